# cptlab: continual post-training experiments.
#   snakemake --cores all                   # embedded default (config/config.yaml)
#   snakemake --cores all --profile slurm   # cluster
#   snakemake --report results/<experiment>/report.html   # the HTML report, after a run
# The default target is declared here: Snakemake drops a default_target from an included file.


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/base.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/drift.smk"


rule all:
    default_target: True
    input:
        base_inputs(),
        LAYOUT.scores_csv,
        LAYOUT.cl_metrics_csv,
        LAYOUT.findings_csv,
        LAYOUT.figures_dir / MANIFEST,
        LAYOUT.drift_figures_dir / MANIFEST,
