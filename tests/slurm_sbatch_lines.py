"""The sbatch line that the SLURM executor plugin's run_job builds for each job, with the
plugin's own functions (partition, submit command, GPU flags), less the wrapped command.

Run by the Python of a SLURM driver (tests/test_slurm_cluster.py runs it under each lock's
plugin), so that each plugin version builds its own lines:

    python slurm_sbatch_lines.py < {"workdir": ..., "jobs": {name: {rule, threads, resources}}}

prints {name: line} as JSON. A job without `slurm_partition` takes the cluster's default
partition (`sinfo`), as the plugin does.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from snakemake_executor_plugin_slurm.partitions import get_default_partition
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string


class Resources(SimpleNamespace):
    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


class PlannedJob(SimpleNamespace):
    """What the plugin's sbatch-line builder reads of a job: name, threads, resources."""

    def __init__(self, rule: str, threads: int, resources: dict[str, Any]) -> None:
        values = {k: int(v) if str(v).isdigit() else v for k, v in resources.items()}
        super().__init__(name=rule, threads=threads, resources=Resources(**values))

    def is_group(self) -> bool:
        return False


def sbatch_line(job: PlannedJob, workdir: Path) -> str:
    logger = logging.getLogger("plugin")
    partition = job.resources.get("slurm_partition") or get_default_partition(job, logger)
    params = {
        "run_uuid": "test-only",
        "slurm_logfile": workdir / "%j.log",
        "comment_str": f"rule_{job.name}",
        "account": "",  # a site's account; none for the paper config's lines
        "partition": f" -p {partition}",
        "workdir": str(workdir),
    }
    return get_submit_command(job, params) + set_gres_string(job)


def main() -> None:
    request = json.load(sys.stdin)
    workdir = Path(request["workdir"])
    lines = {
        name: sbatch_line(PlannedJob(job["rule"], job["threads"], job["resources"]), workdir)
        for name, job in request["jobs"].items()
    }
    json.dump(lines, sys.stdout)


if __name__ == "__main__":
    main()
