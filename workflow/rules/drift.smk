# Why forgetting happens (issue #5): one job per chain (method x seed) for parameter drift,
# response drift and collapse forensics of all its stages, one for the distances between data
# sets, one for the figures. Per chain rather than per (checkpoint, benchmark): each job loads the
# embedder once and reads the base model once. Settings: the config's optional `drift` section.


rule drift_chain:
    input:
        base=base_inputs(),
        stages=lambda wc: [
            stage_manifest(wc.method, wc.seed, k) for k in range(1, len(SEQUENCE) + 1)
        ],
        base_responses=[
            str(RESULTS / "eval/base" / f"{b}.responses.jsonl") for b in eval_benchmarks()
        ],
        responses=lambda wc: [
            str(RESULTS / "eval" / wc.method / f"seed{wc.seed}" / f"stage{k}" / f"{b}.responses.jsonl")
            for k in range(1, len(SEQUENCE) + 1)
            for b in eval_benchmarks()
        ],
    output:
        manifest=RESULTS / "drift/{method}/seed{seed}/manifest.json",
    params:
        config=CONFIG_FILE,
        results_dir=lambda wc, output: str(Path(output.manifest).parents[3]),
        out_dir=lambda wc, output: str(Path(output.manifest).parent),
        drift=config.get("drift", {}),
        collapse=config.get("training", {}).get("collapse", {}),
        code=code_hash("drift", "io.py"),
    threads: resource("drift", "threads", 1)
    resources:
        **job_resources("drift", runtime=30),
    log:
        f"logs/{EXPERIMENT}/drift/{{method}}/seed{{seed}}.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/drift/{{method}}/seed{{seed}}.tsv"
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab drift-chain --config {params.config} --method {wildcards.method}"
        " --seed {wildcards.seed} --results-dir {params.results_dir} --out-dir {params.out_dir}"
        " --threads {threads} > {log} 2>&1"


rule dataset_distance:
    input:
        data=[data_file(name) for name in benchmarks_in(config)],
        scores=RESULTS / "scores.csv",
    output:
        manifest=RESULTS / "drift/datasets/manifest.json",
    params:
        config=CONFIG_FILE,
        data_dir=lambda wc, input: str(Path(input.data[0]).parent),
        out_dir=lambda wc, output: str(Path(output.manifest).parent),
        seed=config["data"]["seed"],
        drift=config.get("drift", {}),
        code=code_hash("drift", "io.py"),
    threads: resource("drift", "threads", 1)
    resources:
        **job_resources("drift", runtime=30),
    log:
        f"logs/{EXPERIMENT}/drift/dataset_distance.log",
    benchmark:
        f"benchmarks/{EXPERIMENT}/drift/dataset_distance.tsv"
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab dataset-distance-all --config {params.config} --data-dir {params.data_dir}"
        " --scores {input.scores} --out-dir {params.out_dir} --seed {params.seed}"
        " --threads {threads} > {log} 2>&1"


rule drift_figures:
    input:
        chains=[
            str(RESULTS / "drift" / method / f"seed{seed}" / "manifest.json")
            for method in config["run"]["methods"]
            for seed in config["run"]["seeds"]
        ],
        datasets=RESULTS / "drift/datasets/manifest.json",
    output:
        manifest=RESULTS / "drift/figures/manifest.json",
        params=report(
            RESULTS / "drift/figures/drift_params.png",
            caption="../report/drift_params.rst",
            category="Drift",
            labels={"figure": "parameter drift per stage"},
        ),
        params_by_type=report(
            RESULTS / "drift/figures/drift_params_by_type.png",
            caption="../report/drift_params_by_type.rst",
            category="Drift",
            labels={"figure": "parameter drift per layer type"},
        ),
        responses=report(
            RESULTS / "drift/figures/response_similarity.png",
            caption="../report/response_similarity.rst",
            category="Drift",
            labels={"figure": "response similarity to the base"},
        ),
        mmd=report(
            RESULTS / "drift/figures/mmd_heatmap.png",
            caption="../report/mmd_heatmap.rst",
            category="Drift",
            labels={"figure": "MMD between data sets"},
        ),
        tsne=report(
            RESULTS / "drift/figures/tsne_map.png",
            caption="../report/tsne_map.rst",
            category="Drift",
            labels={"figure": "t-SNE map of the data sets"},
        ),
        gain_forgetting=report(
            RESULTS / "drift/figures/gain_forgetting_mmd.png",
            caption="../report/gain_forgetting_mmd.rst",
            category="Drift",
            labels={"figure": "gain and forgetting vs MMD"},
        ),
        collapse_trend=report(
            RESULTS / "drift/figures/collapse_trend.png",
            caption="../report/collapse_trend.rst",
            category="Drift",
            labels={"figure": "collapse artifact over training"},
        ),
        collapse_stages=report(
            RESULTS / "drift/figures/collapse_stages.png",
            caption="../report/collapse_stages.rst",
            category="Drift",
            labels={"figure": "collapse forensics per checkpoint"},
        ),
    params:
        config=CONFIG_FILE,
        drift_dir=lambda wc, input: str(Path(input.datasets).parents[1]),
        out_dir=lambda wc, output: str(Path(output.manifest).parent),
        code=code_hash("drift", "io.py"),
    log:
        f"logs/{EXPERIMENT}/drift/figures.log",
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab drift-figures --config {params.config} --drift-dir {params.drift_dir}"
        " --out-dir {params.out_dir} > {log} 2>&1"
