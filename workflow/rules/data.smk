rule prepare_data:
    output:
        data_file("{benchmark}"),
    params:
        config=CONFIG_FILE,
        code=code_hash("domains", "rows.py", "data.py"),
        data=lambda wc: {
            "seed": config["data"]["seed"],
            "sizes": config["data"].get("sizes"),
            "options": config["data"].get("options", {}).get(wc.benchmark),
        },
    log:
        f"logs/{EXPERIMENT}/prepare_data/{{benchmark}}.log",
    conda:
        "../../envs/cptlab.yaml"
    shell:
        "cptlab prepare-data --config {params.config} --benchmark {wildcards.benchmark}"
        " --out {output} > {log} 2>&1"
