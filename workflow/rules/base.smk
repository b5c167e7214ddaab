rule build_base:
    input:
        [data_file(f"{domain}_pretrain") for domain in DOMAINS],
        [data_file(name) for name in base_measure_benchmarks(config)],
    output:
        manifest=base_manifest(),
    params:
        config=CONFIG_FILE,
        data_dir=lambda wc, input: str(Path(input[0]).parent),
        folder=lambda wc, output: str(Path(output.manifest).parent),
        base=config["base"],
        code=code_hash(
            "base_model.py", "sft.py", "model.py", "tokenizer.py", "chat.py", "generation.py",
            "metrics.py", "reprompt.py", "verifiers", "sandbox.py", "config.py",
        ),
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        f"logs/{EXPERIMENT}/build_base.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/build_base.tsv"
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab build-base --config {params.config} --data-dir {params.data_dir}"
        " --out {params.folder} --threads {threads} > {log} 2>&1"
