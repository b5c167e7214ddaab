# Every checkpoint on every benchmark: one job per (checkpoint, benchmark), so adding a
# benchmark adds only its jobs. The base's evaluations are shared by every method and seed.

EVALUATE_CODE = code_hash(
    "evaluate.py", "eval_cli.py", "generation.py", "backends", "metrics.py", "verifiers",
    "sandbox.py", "chat.py", "tokenizer.py",
)


rule evaluate_base:
    input:
        checkpoint=base_inputs(),
        data=data_file("{benchmark}"),
    output:
        scores=RESULTS / "eval/base/{benchmark}.json",
        responses=RESULTS / "eval/base/{benchmark}.responses.jsonl",
    params:
        config=CONFIG_FILE,
        checkpoint=lambda wc: base_model(),
        evaluation=config.get("evaluation", {}),
        code=EVALUATE_CODE,
    threads: resource("evaluate", "threads", 1)
    resources:
        **job_resources("evaluate", runtime=30),
    log:
        f"logs/{EXPERIMENT}/evaluate/base/{{benchmark}}.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/evaluate/base/{{benchmark}}.tsv"
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
    output:
        scores=RESULTS / "eval/{method}/seed{seed}/stage{stage}/{benchmark}.json",
        responses=RESULTS / "eval/{method}/seed{seed}/stage{stage}/{benchmark}.responses.jsonl",
    params:
        config=CONFIG_FILE,
        checkpoint=lambda wc: stage_dir(wc.method, wc.seed, wc.stage),
        evaluation=config.get("evaluation", {}),
        code=EVALUATE_CODE,
    log:
        f"logs/{EXPERIMENT}/evaluate/{{method}}/seed{{seed}}/stage{{stage}}/{{benchmark}}.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/evaluate/{{method}}/seed{{seed}}/stage{{stage}}/{{benchmark}}.tsv"
