"""What a config asks of the machine it runs on, checked before the first job: the local files
its data options name, the commits of the hub datasets it reads where cptlab pins none, its base
model, its SLURM partitions. A placeholder left in a config
(paper.yaml's `/shared/data/...` paths, `slurm_partition: gpu`) is then named at once, key by
key, rather than by a job that fails hours into a run. Only what the run still needs is
checked: a data set already prepared in the results folder no longer reads its source, and a
base whose evaluation and first stages are done is no longer read. No heavy imports: the
Snakefile calls it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from cptlab.layout import Layout
from cptlab.plan import Plan, builds_base, datasets, eval_benchmarks


def base_still_read(config: Mapping, layout: Layout) -> bool:
    """The base is read until its evaluations and every chain's first stage are done."""
    plan = Plan.from_config(config)
    done = [layout.eval_file(b.name) for b in eval_benchmarks(config)] + [
        layout.stage_manifest(method, seed, 1, plan.sequence[0])
        for method in plan.methods
        for seed in plan.seeds
    ]
    return not all(path.exists() for path in done)


def missing_paths(config: Mapping, layout: Layout) -> list[str]:
    """One line per `data.options.<benchmark>.path` that names no file or folder here, for the
    benchmarks not yet prepared in `layout`; and `base.path` when the base is still read and is
    neither a folder nor a model in the local HF cache."""
    options = config["data"].get("options") or {}
    problems = []
    for data_set in datasets(config):
        if layout.data_file(data_set.name).exists():
            continue
        paths = (options.get(data_set.name) or {}).get("path") or []
        # A loader reads one path or a list of files (cptlab.domains.paper.pipeline).
        for path in [paths] if isinstance(paths, str) else paths:
            if not Path(path).exists():
                problems.append(
                    f"data.options.{data_set.name}.path: {path}: no such file or folder"
                )
    if (
        not builds_base(config)
        and base_still_read(config, layout)
        and not _model_available(str(config["base"]["path"]))
    ):
        problems.append(
            f"base.path: {config['base']['path']}: not a folder and not in the local HF cache"
        )
    return problems


def missing_revisions(config: Mapping, layout: Layout) -> list[str]:
    """One line per hub repository a data set not yet prepared in `layout` reads and for which
    neither cptlab nor the config names a commit (`data.options.<benchmark>.revision`)."""
    from cptlab.domains.fetch import hub_sources

    return [
        f"data.options.{source.benchmark}.revision: no commit of {source.repo} is pinned in "
        f"cptlab: set one (`cptlab fetch-data --config <file>` prints the commit main is at)"
        for source in hub_sources(config)
        if source.revision is None and not layout.data_file(source.benchmark).exists()
    ]


def _model_available(name_or_path: str) -> bool:
    if Path(name_or_path).exists():
        return True
    if name_or_path.startswith(("/", ".")):
        return False  # a path, not a hub name
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name_or_path, "config.json"), str)


def unknown_partitions(config: Mapping, known: set[str]) -> list[str]:
    """One line per `resources.<kind>.slurm_partition` that is not among the cluster's."""
    return [
        f"resources.{kind}.slurm_partition: {spec['slurm_partition']!r} is not a partition of "
        f"this cluster ({', '.join(sorted(known))})"
        for kind, spec in (config.get("resources") or {}).items()
        if "slurm_partition" in spec and spec["slurm_partition"] not in known
    ]


def cluster_partitions() -> set[str] | None:
    """The partitions `sinfo` reports (None where SLURM is not installed or does not answer)."""
    if shutil.which("sinfo") is None:
        return None
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%P"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {line.strip().rstrip("*") for line in done.stdout.splitlines() if line.strip()}


def site_problems(config: Mapping, layout: Layout, slurm: bool) -> list[str]:
    """Everything this machine lacks for the rest of the run of `config` in `layout`; the
    partitions only for a run on SLURM."""
    problems = missing_paths(config, layout) + missing_revisions(config, layout)
    if slurm and (known := cluster_partitions()) is not None:
        problems += unknown_partitions(config, known)
    return problems
