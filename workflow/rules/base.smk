# The embedded base model, built offline (skipped when base.path names a pretrained model), or
# copied from the shipped build when that was made from the same recipe (cptlab.base_model.shipped).
SHIPPED_BASE = Path(workflow.basedir) / "models" / "embedded-base"


rule build_base:
    input:
        [data_file(f"{domain}_pretrain") for domain in DOMAINS],
        [data_file(name) for name in base_measure_benchmarks(config)],
        provenance=provenance(BASE_JOB, "build-base", base_settings),
    output:
        manifest=LAYOUT.base_manifest,
    params:
        config=CONFIG_FILE,
        data_dir=lambda wc, input: str(Layout(LAYOUT.root_in(input[0])).data_dir),
        folder=lambda wc, output: str(Path(output.manifest).parent),
        shipped=SHIPPED_BASE,
    threads: threads("build_base")
    priority: PRIORITY["build_base"]
    resources:
        **resources("build_base"),
    log:
        LAYOUT.log_file(BASE_JOB),
    benchmark:
        LAYOUT.benchmark_file(BASE_JOB)
    conda:
        CONDA_ENV
    shell:
        cptlab_shell(
            "build-base --config {params.config} --data-dir {params.data_dir}"
            " --out {params.folder} --shipped {params.shipped} --threads {threads}"
        )
