# Every checkpoint on every benchmark: one job per checkpoint, which loads the model once and
# writes each benchmark's EVAL.json and responses file. Adding a benchmark reruns each
# checkpoint's job (its outputs change); the model load dominates it, not the benchmarks. The
# base's evaluations are shared by every method and seed.
#
# A benchmark that `evaluation.shards` splits in n is evaluated apart: n jobs per checkpoint,
# each on a contiguous part of its rows, then a merge job that writes the benchmark's files from
# theirs (so that each job fits its time limit at paper scale: `cptlab plan-hours`).
#
# With `evaluation.within_stage`, each checkpoint a stage exported inside it (its step<N>/ folder,
# complete once the stage's manifest is written) is evaluated the same way, in one job on every
# benchmark's sample of rows.
#
# With `evaluation.reuse_verdicts`, a chain checkpoint's jobs read the responses of the
# checkpoint its stage started from, whose verdicts they reuse: each waits for that evaluation.

EVAL_BASE_JOB = LAYOUT.evaluate_job()
EVAL_STAGE_JOB = LAYOUT.evaluate_job("{method}", "{seed}", "{stage}")
SHARD = ("{benchmark}", "{shard}", "{shards}")
EVAL_BASE_SHARD_JOB = LAYOUT.evaluate_shard_job(*SHARD)
EVAL_STAGE_SHARD_JOB = LAYOUT.evaluate_shard_job(*SHARD, "{method}", "{seed}", "{stage}")
MERGE_BASE_JOB = LAYOUT.merge_shards_job("{benchmark}")
MERGE_STAGE_JOB = LAYOUT.merge_shards_job("{benchmark}", "{method}", "{seed}", "{stage}")
EVAL_STEP_JOB = LAYOUT.evaluate_job("{method}", "{seed}", "{stage}", "{step}")
CHECKPOINT_ARGS = "--method {method} --seed {seed} --stage {stage}"

base_evaluation_settings = evaluation_settings(lambda wc: base_model())
stage_evaluation_settings = evaluation_settings(
    lambda wc: stage_dir(wc.method, wc.seed, wc.stage), lambda wc: wc.method
)
step_evaluation_settings = evaluation_settings(
    lambda wc: step_dir(wc.method, wc.seed, wc.stage, wc.step),
    lambda wc: wc.method,
    within_stage=True,
)


if WHOLE_BENCHMARKS:

    rule evaluate_base:
        input:
            checkpoint=base_inputs(),
            data=[data_file(b) for b in WHOLE_BENCHMARKS],
            provenance=provenance(
                EVAL_BASE_JOB, "evaluate-checkpoint", base_evaluation_settings
            ),
        output:
            scores=[str(LAYOUT.eval_file(b)) for b in WHOLE_BENCHMARKS],
            responses=[str(LAYOUT.responses_file(b)) for b in WHOLE_BENCHMARKS],
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint="",
        threads: threads("evaluate")
        priority: PRIORITY["evaluate"]
        resources:
            **resources("evaluate"),
        log:
            LAYOUT.log_file(EVAL_BASE_JOB),
        benchmark:
            LAYOUT.benchmark_file(EVAL_BASE_JOB)
        conda:
            CONDA_ENV
        shell:
            cptlab_shell(
                "evaluate-checkpoint --config {params.config} --results-dir {params.results}"
                " {params.checkpoint} --threads {threads}"
            )

    use rule evaluate_base as evaluate_stage with:
        input:
            checkpoint=lambda wc: stage_manifest(wc.method, wc.seed, wc.stage),
            data=[data_file(b) for b in WHOLE_BENCHMARKS],
            earlier=earlier_responses(lambda wc: WHOLE_BENCHMARKS),
            provenance=provenance(
                EVAL_STAGE_JOB, "evaluate-checkpoint", stage_evaluation_settings
            ),
        output:
            scores=[
                str(LAYOUT.eval_file(b, "{method}", "{seed}", "{stage}"))
                for b in WHOLE_BENCHMARKS
            ],
            responses=[
                str(LAYOUT.responses_file(b, "{method}", "{seed}", "{stage}"))
                for b in WHOLE_BENCHMARKS
            ],
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint=CHECKPOINT_ARGS,
        log:
            LAYOUT.log_file(EVAL_STAGE_JOB),
        benchmark:
            LAYOUT.benchmark_file(EVAL_STAGE_JOB)


if SPLIT_BENCHMARKS:

    rule evaluate_base_shard:
        input:
            checkpoint=base_inputs(),
            data=lambda wc: data_file(wc.benchmark),
            provenance=provenance(
                EVAL_BASE_SHARD_JOB, "evaluate-checkpoint", base_evaluation_settings
            ),
        output:
            scores=str(LAYOUT.shard_files(*SHARD)[0]),
            responses=str(LAYOUT.shard_files(*SHARD)[1]),
        wildcard_constraints:
            benchmark="|".join(SPLIT_BENCHMARKS),
            shard=r"\d+",
            shards=r"\d+",
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint="",
        threads: threads("evaluate")
        priority: PRIORITY["evaluate"]
        resources:
            **resources("evaluate"),
        log:
            LAYOUT.log_file(EVAL_BASE_SHARD_JOB),
        benchmark:
            LAYOUT.benchmark_file(EVAL_BASE_SHARD_JOB)
        conda:
            CONDA_ENV
        shell:
            cptlab_shell(
                "evaluate-checkpoint --config {params.config} --results-dir {params.results}"
                " {params.checkpoint} --shard {wildcards.benchmark}:{wildcards.shard}"
                " --threads {threads}"
            )

    use rule evaluate_base_shard as evaluate_stage_shard with:
        input:
            checkpoint=lambda wc: stage_manifest(wc.method, wc.seed, wc.stage),
            data=lambda wc: data_file(wc.benchmark),
            earlier=earlier_responses(lambda wc: [wc.benchmark]),
            provenance=provenance(
                EVAL_STAGE_SHARD_JOB, "evaluate-checkpoint", stage_evaluation_settings
            ),
        output:
            scores=str(LAYOUT.shard_files(*SHARD, "{method}", "{seed}", "{stage}")[0]),
            responses=str(LAYOUT.shard_files(*SHARD, "{method}", "{seed}", "{stage}")[1]),
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint=CHECKPOINT_ARGS,
        log:
            LAYOUT.log_file(EVAL_STAGE_SHARD_JOB),
        benchmark:
            LAYOUT.benchmark_file(EVAL_STAGE_SHARD_JOB)

    rule merge_shards_base:
        input:
            shards=lambda wc: shard_inputs(wc.benchmark),
            provenance=provenance(MERGE_BASE_JOB, "merge-shards", base_evaluation_settings),
        output:
            scores=str(LAYOUT.eval_file("{benchmark}")),
            responses=str(LAYOUT.responses_file("{benchmark}")),
        wildcard_constraints:
            benchmark="|".join(SPLIT_BENCHMARKS),
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint="",
        log:
            LAYOUT.log_file(MERGE_BASE_JOB),
        conda:
            CONDA_ENV
        shell:
            cptlab_shell(
                "merge-shards --config {params.config} --results-dir {params.results}"
                " --benchmark {wildcards.benchmark} {params.checkpoint}"
            )

    use rule merge_shards_base as merge_shards_stage with:
        input:
            shards=lambda wc: shard_inputs(wc.benchmark, wc.method, wc.seed, wc.stage),
            provenance=provenance(MERGE_STAGE_JOB, "merge-shards", stage_evaluation_settings),
        output:
            scores=str(LAYOUT.eval_file("{benchmark}", "{method}", "{seed}", "{stage}")),
            responses=str(LAYOUT.responses_file("{benchmark}", "{method}", "{seed}", "{stage}")),
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint=CHECKPOINT_ARGS,
        log:
            LAYOUT.log_file(MERGE_STAGE_JOB),


if EVALUATION.within_stage is not None:

    rule evaluate_within_stage:
        input:
            checkpoint=lambda wc: stage_manifest(wc.method, wc.seed, wc.stage),
            data=[data_file(b) for b in EVAL_BENCHMARKS],
            earlier=earlier_responses(lambda wc: EVAL_BENCHMARKS),
            provenance=provenance(EVAL_STEP_JOB, "evaluate-checkpoint", step_evaluation_settings),
        output:
            scores=[
                str(LAYOUT.eval_file(b, "{method}", "{seed}", "{stage}", "{step}"))
                for b in EVAL_BENCHMARKS
            ],
            responses=[
                str(LAYOUT.responses_file(b, "{method}", "{seed}", "{stage}", "{step}"))
                for b in EVAL_BENCHMARKS
            ],
        wildcard_constraints:
            step=r"[1-9]\d*",
        params:
            config=CONFIG_FILE,
            results=results_dir,
            checkpoint=CHECKPOINT_ARGS + " --step {step}",
        threads: threads("evaluate")
        priority: PRIORITY["evaluate_within_stage"]
        resources:
            **resources("evaluate"),
        log:
            LAYOUT.log_file(EVAL_STEP_JOB),
        benchmark:
            LAYOUT.benchmark_file(EVAL_STEP_JOB)
        conda:
            CONDA_ENV
        shell:
            cptlab_shell(
                "evaluate-checkpoint --config {params.config} --results-dir {params.results}"
                " {params.checkpoint} --threads {threads}"
            )
