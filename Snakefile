# cptlab: continual post-training experiments.
#   snakemake --cores all                   # embedded default (config/config.yaml)
#   snakemake --cores all --profile slurm   # cluster
# The default target is declared here: Snakemake drops a default_target from an included file.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/base.smk"


rule all:
    default_target: True
    input:
        base_manifest(),
