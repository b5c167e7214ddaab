rule prepare_data:
    output:
        data_file("{benchmark}"),
    params:
        code=code_hash("domains", "rows.py", "data.py"),
        data=lambda wc: {"seed": config["data"]["seed"], "sizes": config["data"].get("sizes"),
                         "options": config["data"].get("options", {}).get(wc.benchmark)},
    log:
        "logs/" + config["experiment"] + "/prepare_data/{benchmark}.log",
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab prepare-data --config {CONFIG_FILE} --benchmark {wildcards.benchmark}"
        " --out {output} > {log} 2>&1"
