# Scores of every checkpoint -> the results contract (scores.csv, cl_metrics.csv) -> figures.



rule aggregate:
    input:
        checkpoint_evals(),
        provenance=provenance("aggregate", "aggregate", plan_settings),
    output:
        scores=LAYOUT.scores_csv,
        metrics=LAYOUT.cl_metrics_csv,
        summary=LAYOUT.cl_summary_csv,
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
        provenance=provenance("findings", "findings", findings_settings),
    output:
        table=LAYOUT.findings_csv,
        html=report(
            LAYOUT.findings_html,
            caption="../report/findings.rst",
            category="Findings",
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


rule figures:
    input:
        scores=LAYOUT.scores_csv,
        metrics=LAYOUT.cl_metrics_csv,
        runs=all_stage_manifests(),
        provenance=provenance("figures", "figures", plan_settings),
    output:
        manifest=LAYOUT.figures_dir / MANIFEST,
        cl_curves=[
            report(
                str(LAYOUT.figures_dir / f"cl_curves_{method}.png"),
                caption="../report/cl_curves.rst",
                category="Continual learning",
                labels={"method": method, "figure": "relative performance per stage"},
            )
            for method in PLAN.methods
        ],
        matrices=[
            report(
                str(LAYOUT.figures_dir / f"accuracy_matrix_{method}.png"),
                caption="../report/accuracy_matrix.rst",
                category="Continual learning",
                labels={"method": method, "figure": "accuracy matrix"},
            )
            for method in PLAN.methods
        ],
        ood=report(
            LAYOUT.figures_dir / "ood_final.png",
            caption="../report/ood_final.rst",
            category="Out of distribution",
            labels={"figure": "final OOD relative performance"},
        ),
        curves=report(
            LAYOUT.figures_dir / "training_curves.png",
            caption="../report/training_curves.rst",
            category="Training",
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
