rule build_base:
    input:
        [data_file(name) for name in benchmarks_of_config()],
    output:
        manifest=base_manifest(),
    params:
        code=code_hash("base_model.py", "sft.py", "model.py", "tokenizer.py", "chat.py",
                       "generation.py", "metrics.py", "reprompt.py", "verifiers", "sandbox.py"),
        base=config["base"],
        folder=lambda wc, output: str(Path(output.manifest).parent),
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    log:
        "logs/" + config["experiment"] + "/build_base.log",
    benchmark:
        "benchmarks/" + config["experiment"] + "/build_base.tsv"
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab build-base --config {CONFIG_FILE} --data-dir {RESULTS}/data"
        " --out {params.folder} --threads {threads} > {log} 2>&1"
