# Scores of every checkpoint -> the results contract (scores.csv, cl_metrics.csv) -> figures.



rule aggregate:
    input:
        checkpoint_evals(),
        # the item ledger reads every item's samples, and each benchmark's options (chance)
        responses=checkpoint_evals("responses_file"),
        data=[data_file(b) for b in EVAL_BENCHMARKS],
        provenance=provenance("aggregate", "aggregate", aggregate_settings),
    output:
        scores=LAYOUT.scores_csv,
        trajectory=LAYOUT.trajectory_csv,
        metrics=LAYOUT.cl_metrics_csv,
        summary=LAYOUT.cl_summary_csv,
        ledger=LAYOUT.item_ledger_csv,
        transitions=report(
            LAYOUT.transitions_csv,
            caption="../report/transitions.rst",
            category="1. Findings and forgetting",
            labels={"table": "the item ledger's right -> wrong and wrong -> right counts"},
        ),
    params:
        config=CONFIG_FILE,
        results=results_dir,
    log:
        LAYOUT.log_file("aggregate"),
    benchmark:
        LAYOUT.benchmark_file("aggregate")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "aggregate --config {params.config} --results-dir {params.results}"
        )


rule findings:
    input:
        scores=LAYOUT.scores_csv,
        metrics=LAYOUT.cl_metrics_csv,
        chains=[str(LAYOUT.drift_chain_manifest(m, s)) for m, s in PLAN.chains],
        # the KL budget in each stage's manifest, the steps in its train_log.jsonl
        stages=all_stage_manifests(),
        provenance=provenance("findings", "findings", findings_settings),
    output:
        table=LAYOUT.findings_csv,
        html=report(
            LAYOUT.findings_html,
            caption="../report/findings.rst",
            category="1. Findings and forgetting",
            labels={"table": "the study's findings, scored on this run"},
        ),
    params:
        config=CONFIG_FILE,
        results=results_dir,
    log:
        LAYOUT.log_file("findings"),
    benchmark:
        LAYOUT.benchmark_file("findings")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "findings --config {params.config} --results-dir {params.results}"
        )


# The report's menu sorts its categories by name: the numbers put them in reading order, the
# findings and the curves of forgetting first.
rule figures:
    input:
        scores=LAYOUT.scores_csv,
        trajectory=LAYOUT.trajectory_csv,
        transitions=LAYOUT.transitions_csv,
        metrics=LAYOUT.cl_metrics_csv,
        runs=all_stage_manifests(),
        provenance=provenance("figures", "figures", plan_settings),
    output:
        manifest=LAYOUT.figures_dir / MANIFEST,
        trajectories=[
            report(
                str(LAYOUT.figures_dir / f"cl_trajectory_{method}.png"),
                caption="../report/cl_trajectory.rst",
                category="1. Findings and forgetting",
                labels={"method": method, "figure": "scores at every checkpoint"},
            )
            for method in PLAN.methods
        ],
        transitions=report(
            LAYOUT.figures_dir / "item_transitions.png",
            caption="../report/item_transitions.rst",
            category="1. Findings and forgetting",
            labels={"method": "all", "figure": "items that flip per stage"},
        ),
        cl_curves=[
            report(
                str(LAYOUT.figures_dir / f"cl_curves_{method}.png"),
                caption="../report/cl_curves.rst",
                category="2. Continual learning",
                labels={"method": method, "figure": "relative performance per stage"},
            )
            for method in PLAN.methods
        ],
        matrices=[
            report(
                str(LAYOUT.figures_dir / f"accuracy_matrix_{method}.png"),
                caption="../report/accuracy_matrix.rst",
                category="2. Continual learning",
                labels={"method": method, "figure": "accuracy matrix"},
            )
            for method in PLAN.methods
        ],
        ood=report(
            LAYOUT.figures_dir / "ood_final.png",
            caption="../report/ood_final.rst",
            category="3. Out of distribution",
            labels={"figure": "final OOD relative performance"},
        ),
        curves=report(
            LAYOUT.figures_dir / "training_curves.png",
            caption="../report/training_curves.rst",
            category="4. Training",
            labels={"figure": "training curves"},
        ),
    params:
        config=CONFIG_FILE,
        results=results_dir,
    log:
        LAYOUT.log_file("figures"),
    benchmark:
        LAYOUT.benchmark_file("figures")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "figures --config {params.config} --results-dir {params.results}"
        )
