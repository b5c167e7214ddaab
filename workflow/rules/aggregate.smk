# Scores of every checkpoint -> the results contract (scores.csv, cl_metrics.csv) -> figures.


rule aggregate:
    input:
        checkpoint_evals(),
    output:
        scores=RESULTS / "scores.csv",
        metrics=RESULTS / "cl_metrics.csv",
        summary=RESULTS / "cl_summary.csv",
    params:
        config=CONFIG_FILE,
        # results/<experiment>/eval, from the base's first evaluation file
        eval_dir=lambda wc, input: str(Path(input[0]).parents[1]),
        out_dir=lambda wc, output: str(Path(output.scores).parent),
        run=config["run"],
        code=code_hash("cl_metrics.py", "aggregate.py"),
    log:
        f"logs/{EXPERIMENT}/aggregate.log",
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab aggregate --config {params.config} --eval-dir {params.eval_dir}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule figures:
    input:
        scores=RESULTS / "scores.csv",
        metrics=RESULTS / "cl_metrics.csv",
        runs=all_stage_manifests(),
    output:
        manifest=RESULTS / "figures/manifest.json",
        cl_curves=[
            report(
                str(RESULTS / f"figures/cl_curves_{method}.png"),
                caption="../report/cl_curves.rst",
                category="Continual learning",
                labels={"method": method, "figure": "relative performance per stage"},
            )
            for method in config["run"]["methods"]
        ],
        matrices=[
            report(
                str(RESULTS / f"figures/accuracy_matrix_{method}.png"),
                caption="../report/accuracy_matrix.rst",
                category="Continual learning",
                labels={"method": method, "figure": "accuracy matrix"},
            )
            for method in config["run"]["methods"]
        ],
        ood=report(
            RESULTS / "figures/ood_final.png",
            caption="../report/ood_final.rst",
            category="Out of distribution",
            labels={"figure": "final OOD relative performance"},
        ),
        curves=report(
            RESULTS / "figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="Training",
            labels={"figure": "training curves"},
        ),
    params:
        config=CONFIG_FILE,
        # results/<experiment>/runs, from runs/<method>/seed<s>/stage<k>_<domain>/manifest.json
        runs_dir=lambda wc, input: str(Path(input.runs[0]).parents[3]),
        out_dir=lambda wc, output: str(Path(output.manifest).parent),
        code=code_hash("figures.py", "aggregate.py", "cl_metrics.py"),
    log:
        f"logs/{EXPERIMENT}/figures.log",
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab figures --config {params.config} --scores {input.scores}"
        " --metrics {input.metrics} --train-logs-dir {params.runs_dir}"
        " --out-dir {params.out_dir} > {log} 2>&1"
