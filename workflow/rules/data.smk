# Every data set the config names, as canonical rows.

DATA_JOB = LAYOUT.data_job("{benchmark}")



rule prepare_data:
    input:
        provenance=provenance(DATA_JOB, "prepare-data", data_settings),
    output:
        LAYOUT.data_file("{benchmark}"),
    params:
        config=CONFIG_FILE,
    log:
        LAYOUT.log_file(DATA_JOB),
    benchmark:
        LAYOUT.benchmark_file(DATA_JOB)
    conda:
        CONDA_ENV
    shell:
        CPTLAB
        + " prepare-data --config {params.config} --benchmark {wildcards.benchmark}"
        " --out {output} > {log} 2>&1"
        + COMMIT_PROVENANCE
