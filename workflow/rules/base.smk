# The embedded base model, built offline (skipped when base.path names a pretrained model).


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
    threads: threads("build_base")
    resources:
        **resources("build_base"),
    log:
        LAYOUT.log_file(BASE_JOB),
    benchmark:
        LAYOUT.benchmark_file(BASE_JOB)
    conda:
        CONDA_ENV
    shell:
        CPTLAB
        + " build-base --config {params.config} --data-dir {params.data_dir}"
        " --out {params.folder} --threads {threads} > {log} 2>&1"
        + COMMIT_PROVENANCE
