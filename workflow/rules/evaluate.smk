# Every checkpoint on every benchmark: one job per checkpoint, which loads the model once and
# writes each benchmark's EVAL.json and responses file. Adding a benchmark reruns each
# checkpoint's job (its outputs change); the model load dominates it, not the benchmarks. The
# base's evaluations are shared by every method and seed.

EVAL_BASE_JOB = LAYOUT.evaluate_job()
EVAL_STAGE_JOB = LAYOUT.evaluate_job("{method}", "{seed}", "{stage}")


rule evaluate_base:
    input:
        checkpoint=base_inputs(),
        data=[data_file(b) for b in EVAL_BENCHMARKS],
        provenance=provenance(
            EVAL_BASE_JOB, "evaluate-checkpoint", evaluation_settings(lambda wc: base_model())
        ),
    output:
        scores=[str(LAYOUT.eval_file(b)) for b in EVAL_BENCHMARKS],
        responses=[str(LAYOUT.responses_file(b)) for b in EVAL_BENCHMARKS],
    params:
        config=CONFIG_FILE,
        results=results_dir,
        checkpoint="",
    threads: threads("evaluate")
    resources:
        **resources("evaluate"),
    log:
        LAYOUT.log_file(EVAL_BASE_JOB),
    benchmark:
        LAYOUT.benchmark_file(EVAL_BASE_JOB)
    conda:
        CONDA_ENV
    shell:
        "cptlab evaluate-checkpoint --config {params.config} --results-dir {params.results}"
        " {params.checkpoint} --threads {threads} > {log} 2>&1"
        + COMMIT_PROVENANCE


use rule evaluate_base as evaluate_stage with:
    input:
        checkpoint=lambda wc: stage_manifest(wc.method, wc.seed, wc.stage),
        data=[data_file(b) for b in EVAL_BENCHMARKS],
        provenance=provenance(
            EVAL_STAGE_JOB,
            "evaluate-checkpoint",
            evaluation_settings(
                lambda wc: stage_dir(wc.method, wc.seed, wc.stage), lambda wc: wc.method
            ),
        ),
    output:
        scores=[
            str(LAYOUT.eval_file(b, "{method}", "{seed}", "{stage}")) for b in EVAL_BENCHMARKS
        ],
        responses=[
            str(LAYOUT.responses_file(b, "{method}", "{seed}", "{stage}"))
            for b in EVAL_BENCHMARKS
        ],
    params:
        config=CONFIG_FILE,
        results=results_dir,
        checkpoint="--method {method} --seed {seed} --stage {stage}",
    log:
        LAYOUT.log_file(EVAL_STAGE_JOB),
    benchmark:
        LAYOUT.benchmark_file(EVAL_STAGE_JOB)
