# One continual-learning stage: method x seed x stage k, starting from stage k-1 (or the base).


rule train_stage:
    input:
        previous=previous_inputs,
        data=lambda wc: data_file(DOMAINS[wc.domain]["train"]),
    output:
        manifest=RESULTS / "runs/{method}/seed{seed}/stage{stage}_{domain}/manifest.json",
    params:
        config=CONFIG_FILE,
        start=previous_checkpoint,
        anchor=config["run"].get("anchor", base_model()),
        out=lambda wc, output: str(Path(output.manifest).parent),
        # Resumable trainer state lives outside the output, which Snakemake clears on a rerun.
        state=lambda wc: str(
            RESULTS / "state" / wc.method / f"seed{wc.seed}" / f"stage{wc.stage}_{wc.domain}"
        ),
        data_dir=lambda wc, input: str(Path(input.data).parent),
        settings=lambda wc: stage_settings(wc.method, wc.domain),
        launcher=launcher("train"),
        code=code_hash(
            "train", "model.py", "tokenizer.py", "chat.py", "reprompt.py", "verifiers",
            "sandbox.py", "metrics.py", "rows.py",
        ),
    threads: resource("train", "threads", 1)
    resources:
        **job_resources("train", runtime=60),
    retries: 1
    log:
        f"logs/{EXPERIMENT}/train/{{method}}/seed{{seed}}/stage{{stage}}_{{domain}}.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/train/{{method}}/seed{{seed}}/stage{{stage}}_{{domain}}.tsv"
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "{params.launcher} cptlab train-stage --config {params.config} --method {wildcards.method}"
        " --domain {wildcards.domain} --seed {wildcards.seed} --start {params.start}"
        " --anchor {params.anchor} --out {params.out} --state-dir {params.state}"
        " --data-dir {params.data_dir} --threads {threads} > {log} 2>&1"
