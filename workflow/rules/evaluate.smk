# Every checkpoint on every benchmark: one job per (checkpoint, benchmark), so adding a
# benchmark adds only its jobs. The base's evaluations are shared by every method and seed.

EVAL_BASE_JOB = "evaluate/base/{benchmark}"
EVAL_STAGE_JOB = "evaluate/{method}/seed{seed}/stage{stage}/{benchmark}"



rule evaluate_base:
    input:
        checkpoint=base_inputs(),
        data=data_file("{benchmark}"),
        provenance=provenance(
            EVAL_BASE_JOB, "evaluate", evaluation_settings(lambda wc: base_model())
        ),
    output:
        scores=LAYOUT.eval_file("{benchmark}"),
        responses=LAYOUT.responses_file("{benchmark}"),
    params:
        config=CONFIG_FILE,
        checkpoint=lambda wc: base_model(),
    threads: threads("evaluate")
    resources:
        **resources("evaluate"),
    log:
        LAYOUT.log_file(EVAL_BASE_JOB),
    benchmark:
        LAYOUT.benchmark_file(EVAL_BASE_JOB)
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab evaluate --config {params.config} --checkpoint {params.checkpoint}"
        " --data {input.data} --benchmark {wildcards.benchmark} --out {output.scores}"
        " --responses {output.responses} --threads {threads} > {log} 2>&1"


use rule evaluate_base as evaluate_stage with:
    input:
        checkpoint=lambda wc: stage_manifest(wc.method, wc.seed, wc.stage),
        data=data_file("{benchmark}"),
        provenance=provenance(
            EVAL_STAGE_JOB,
            "evaluate",
            evaluation_settings(lambda wc: stage_dir(wc.method, wc.seed, wc.stage)),
        ),
    output:
        scores=LAYOUT.eval_file("{benchmark}", "{method}", "{seed}", "{stage}"),
        responses=LAYOUT.responses_file("{benchmark}", "{method}", "{seed}", "{stage}"),
    params:
        config=CONFIG_FILE,
        checkpoint=lambda wc: stage_dir(wc.method, wc.seed, wc.stage),
    log:
        LAYOUT.log_file(EVAL_STAGE_JOB),
    benchmark:
        LAYOUT.benchmark_file(EVAL_STAGE_JOB)
