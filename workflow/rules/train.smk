# One continual-learning stage: method x seed x stage k, starting from stage k-1 (or the base).

TRAIN_JOB = LAYOUT.train_job("{method}", "{seed}", "{stage}", "{domain}")



rule train_stage:
    input:
        previous=previous_inputs,
        data=lambda wc: data_file(DOMAINS[wc.domain]["train"]),
        replay=replay_inputs,
        provenance=provenance(TRAIN_JOB, "train-stage", train_settings),
    output:
        manifest=LAYOUT.stage_manifest("{method}", "{seed}", "{stage}", "{domain}"),
    params:
        config=CONFIG_FILE,
        start=previous_checkpoint,
        anchor=anchor(),
        out=str(LAYOUT.stage_dir("{method}", "{seed}", "{stage}", "{domain}")),
        # Resumable trainer state lives outside the output, which Snakemake clears on a rerun.
        state=str(LAYOUT.state_dir("{method}", "{seed}", "{stage}", "{domain}")),
        # Within-stage evaluation: the weights of each trainer save, in the output's step<N>/.
        exports="--export-saves" if EXPORT_SAVES else "",
        # Where training.report_to's tracker writes (not an output: logs only).
        tracking=str(LAYOUT.tracking_dir("{method}", "{seed}", "{stage}", "{domain}")),
    threads: threads("train")
    priority: train_priority
    resources:
        **resources("train"),
    retries: 1
    log:
        LAYOUT.log_file(TRAIN_JOB),
    benchmark:
        LAYOUT.benchmark_file(TRAIN_JOB)
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "train-stage --config {params.config} --method {wildcards.method}"
            " --domain {wildcards.domain} --seed {wildcards.seed} --start-from {params.start}"
            " --anchor {params.anchor} --out {params.out} --state-dir {params.state}"
            " --data {input.data} --replay-data {input.replay} {params.exports}"
            " --tracking-dir {params.tracking} --threads {threads}",
            kind="train",
        )
