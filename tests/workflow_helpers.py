"""Run Snakemake on a private copy of the workflow (its code hashes read the copy's sources)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Two processes of plain data parallelism on CPU: accelerate's own `--cpu` path is one process
# (or mpirun); `--multi_gpu` runs torch.distributed's launcher, which works without GPUs (gloo).
TWO_PROCESSES = (
    "accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no "
    "--dynamo_backend no"
)


# config/smoke.yaml: two methods of one seed over two stages, three evaluation benchmarks.
SMOKE = "config/smoke.yaml"
STAGES, METHODS = 2, 2


def downstream(chains: int, base: bool = False) -> dict:
    """What any change of an evaluation reruns after it: the tables, figures and the drift
    analyses of the `chains` (method x seed) it touches (not the data-set distances, which read
    the data alone), and with the base's evaluation (`base`) the embeddings of its responses."""
    return {
        "aggregate": 1,
        "figures": 1,
        "findings": 1,
        "drift_chain": chains,
        "drift_figures": 1,
        "all": 1,
        **({"drift_base": 1} if base else {}),
    }


def copy_workflow(dest: Path) -> Path:
    """Snakefile, workflow/, config/, profiles, and src/cptlab (the code the hashes read)."""
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    for folder in ("workflow", "config", "envs", "profiles", "slurm"):
        shutil.copytree(ROOT / folder, dest / folder, symlinks=True)
    shutil.copytree(
        ROOT / "src" / "cptlab",
        dest / "src" / "cptlab",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return dest


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 600):
    environment = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **(env or {})}
    return subprocess.run(
        [str(BIN / "snakemake"), *args],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def planned_jobs(workdir: Path, *args: str, env: dict | None = None) -> Counter:
    """Jobs per rule that a dry run would execute (empty when nothing is to be done)."""
    done = snakemake(workdir, "-n", "--cores", "2", *args, env=env)
    if done.returncode != 0:
        raise AssertionError(f"dry run failed:\n{done.stdout}\n{done.stderr}")
    return job_stats(done.stdout + done.stderr)


def job_stats(text: str) -> Counter:
    """Jobs per rule of the "Job stats" table that Snakemake prints before it runs them (or
    plans them, with -n); empty when nothing is to be done."""
    if "Nothing to be done" in text:
        return Counter()
    table = text.split("Job stats:", 1)[1]
    jobs = Counter()
    for line in table.splitlines()[3:]:
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if match is None:
            break
        if match.group(1) != "total":
            jobs[match.group(1)] = int(match.group(2))
    return jobs


def dry_run_jobs(text: str) -> list[dict]:
    """Each job of a dry run's listing: its rule, input files, threads and `resources:` (values
    as printed)."""
    jobs: list[dict] = []
    for line in text.splitlines():
        field = line.strip().split(":", 1)
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            rule = line.split()[1].rstrip(":")
            jobs.append({"rule": rule, "input": [], "threads": 1, "resources": {}})
        elif jobs and field[0] == "input":
            jobs[-1]["input"] = field[1].strip().split(", ")
        elif jobs and field[0] == "threads":
            jobs[-1]["threads"] = int(field[1])
        elif jobs and field[0] == "resources":
            jobs[-1]["resources"] = dict(p.strip().split("=", 1) for p in field[1].split(","))
    return jobs


def edited_config(source: Path, dest: Path, edit) -> Path:
    config = yaml.safe_load(source.read_text())
    edit(config)
    dest.write_text(yaml.safe_dump(config, sort_keys=False))
    return dest
