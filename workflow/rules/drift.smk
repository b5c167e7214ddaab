# Why forgetting happens: one job per chain (method x seed) for parameter drift, response drift
# and collapse forensics of all its stages, one for the base's response embeddings (which every
# chain compares its stages' responses with), one for the distances between data sets (from the
# data alone), one for gain and forgetting against those distances and the figures. Per chain
# rather than per (checkpoint, benchmark): each job loads the embedder once and reads the base
# model once. Settings: the config's optional `drift` section.

DRIFT_CHAIN_JOB = LAYOUT.drift_chain_job("{method}", "{seed}")


rule drift_base:
    input:
        base_responses=[str(LAYOUT.responses_file(b)) for b in EVAL_BENCHMARKS],
        provenance=provenance("drift/base_responses", "drift-base", drift_base_settings),
    output:
        manifest=LAYOUT.drift_base_dir / MANIFEST,
    params:
        config=CONFIG_FILE,
        results=results_dir,
    threads: threads("drift")
    priority: PRIORITY["drift_chain"]
    resources:
        **resources("drift"),
    log:
        LAYOUT.log_file("drift/base_responses"),
    benchmark:
        LAYOUT.benchmark_file("drift/base_responses")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "drift-base --config {params.config} --results-dir {params.results}"
            " --threads {threads}"
        )


rule drift_chain:
    input:
        base=base_inputs(),
        base_embeddings=LAYOUT.drift_base_dir / MANIFEST,
        stages=lambda wc: [stage_manifest(wc.method, wc.seed, k) for k in PLAN.stages[1:]],
        base_responses=[str(LAYOUT.responses_file(b)) for b in EVAL_BENCHMARKS],
        responses=lambda wc: [
            str(LAYOUT.responses_file(b, wc.method, wc.seed, k))
            for k in PLAN.stages[1:]
            for b in EVAL_BENCHMARKS
        ],
        provenance=provenance(DRIFT_CHAIN_JOB, "drift-chain", drift_settings),
    output:
        manifest=LAYOUT.drift_chain_manifest("{method}", "{seed}"),
    params:
        config=CONFIG_FILE,
        results=results_dir,
    threads: threads("drift")
    priority: PRIORITY["drift_chain"]
    resources:
        **resources("drift"),
    log:
        LAYOUT.log_file(DRIFT_CHAIN_JOB),
    benchmark:
        LAYOUT.benchmark_file(DRIFT_CHAIN_JOB)
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "drift-chain --config {params.config} --method {wildcards.method}"
            " --seed {wildcards.seed} --results-dir {params.results} --threads {threads}"
        )


rule dataset_distance:
    input:
        data=[data_file(d.name) for d in datasets(config)],
        provenance=provenance(
            "drift/dataset_distance", "dataset-distance", dataset_distance_settings
        ),
    output:
        manifest=LAYOUT.dataset_distance_dir / MANIFEST,
    params:
        config=CONFIG_FILE,
        results=results_dir,
    threads: threads("drift")
    priority: PRIORITY["dataset_distance"]
    resources:
        **resources("drift"),
    log:
        LAYOUT.log_file("drift/dataset_distance"),
    benchmark:
        LAYOUT.benchmark_file("drift/dataset_distance")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "dataset-distance --config {params.config} --results-dir {params.results}"
            " --threads {threads}"
        )


rule drift_figures:
    input:
        chains=[str(LAYOUT.drift_chain_manifest(m, s)) for m, s in PLAN.chains],
        datasets=LAYOUT.dataset_distance_dir / MANIFEST,
        scores=LAYOUT.scores_csv,
        provenance=provenance("drift/figures", "drift-figures", drift_figures_settings),
    output:
        manifest=LAYOUT.drift_figures_dir / MANIFEST,
        gain_forgetting_table=LAYOUT.drift_figures_dir / "gain_forgetting.csv",
        trend=LAYOUT.drift_figures_dir / "trend.json",
        params=report(
            LAYOUT.drift_figures_dir / "drift_params.png",
            caption="../report/drift_params.rst",
            category="5. Drift",
            labels={"figure": "parameter drift per stage"},
        ),
        params_by_type=report(
            LAYOUT.drift_figures_dir / "drift_params_by_type.png",
            caption="../report/drift_params_by_type.rst",
            category="5. Drift",
            labels={"figure": "parameter drift per layer type"},
        ),
        responses=report(
            LAYOUT.drift_figures_dir / "response_similarity.png",
            caption="../report/response_similarity.rst",
            category="5. Drift",
            labels={"figure": "response similarity to the base"},
        ),
        mmd=report(
            LAYOUT.drift_figures_dir / "mmd_heatmap.png",
            caption="../report/mmd_heatmap.rst",
            category="5. Drift",
            labels={"figure": "MMD between data sets"},
        ),
        tsne=report(
            LAYOUT.drift_figures_dir / "tsne_map.png",
            caption="../report/tsne_map.rst",
            category="5. Drift",
            labels={"figure": "t-SNE map of the data sets"},
        ),
        gain_forgetting=report(
            LAYOUT.drift_figures_dir / "gain_forgetting_mmd.png",
            caption="../report/gain_forgetting_mmd.rst",
            category="5. Drift",
            labels={"figure": "gain and forgetting vs MMD"},
        ),
        collapse_trend=report(
            LAYOUT.drift_figures_dir / "collapse_trend.png",
            caption="../report/collapse_trend.rst",
            category="5. Drift",
            labels={"figure": "collapse artifact over training"},
        ),
        collapse_stages=report(
            LAYOUT.drift_figures_dir / "collapse_stages.png",
            caption="../report/collapse_stages.rst",
            category="5. Drift",
            labels={"figure": "collapse forensics per checkpoint"},
        ),
    params:
        config=CONFIG_FILE,
        results=results_dir,
    log:
        LAYOUT.log_file("drift/figures"),
    benchmark:
        LAYOUT.benchmark_file("drift/figures")
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "drift-figures --config {params.config} --results-dir {params.results}"
        )
