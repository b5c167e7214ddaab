# cptlab: continual post-training experiments.
#   snakemake --cores all                   # embedded default (config/config.yaml)
#   snakemake --cores all --profile slurm   # cluster
#   snakemake --report results/<experiment>/report.html   # the HTML report, after a run
# The default target is declared here: Snakemake drops a default_target from an included file.


import sys
from pathlib import Path

from cptlab.slurm import SlurmQueryError, wait_for_jobs_of_killed_run


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


# The SLURM jobs that a killed run left queued or running here would otherwise be submitted a
# second time: wait for them before planning (cptlab.slurm). Jobs run Snakemake too (not as
# the main process), and a dry run submits nothing.
if workflow.is_main_process and not workflow.output_settings.dryrun:
    try:
        wait_for_jobs_of_killed_run(Path(workflow.workdir_init))
    except SlurmQueryError as err:
        sys.exit(f"cptlab: error: {err}; the killed run's jobs may still be running")


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
