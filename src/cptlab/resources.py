"""Compute per rule kind: the config's `resources` section over RESOURCE_DEFAULTS (the schema's
defaults), as the workflow's `threads:` and `resources:` (the SLURM profile turns them into
sbatch options)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any

from cptlab.config import schema_file

# Rule kinds without an entry in `resources` (data, aggregate, figures) run on one CPU with the
# SLURM profile's default-resources.
RESOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    kind: spec["default"]
    for kind, spec in schema_file()["properties"]["resources"]["properties"].items()
}


def rule_resources(config: Mapping, kind: str) -> dict[str, Any]:
    """The resources of rule kind `kind` with the defaults filled in."""
    return {**RESOURCE_DEFAULTS[kind], **(config.get("resources") or {}).get(kind, {})}


def snakemake_resources(config: Mapping, kind: str) -> dict[str, Any]:
    """A rule's `resources:` for `kind`; each retry extends the runtime. CPU-only jobs (gpu 0)
    get no GPU keys, so the SLURM executor asks for none."""
    spec = rule_resources(config, kind)
    runtime = spec["runtime"]
    res: dict[str, int | str | Callable] = {
        "runtime": lambda wildcards, attempt: runtime * attempt,
        "mem_mb": spec["mem_mb"],
    }
    if spec["gpu"]:
        res["gpu"] = spec["gpu"]
        res.update({key: spec[key] for key in ("gpu_model", "cpus_per_gpu") if key in spec})
        # One task per job: its launcher starts one process per GPU. The executor plugin's
        # 2.6.1 (the GPU lock's) asks a GPU job for `--ntasks-per-gpu=1` unless tasks_per_gpu is
        # set: one task per GPU, each bound to one GPU. 0 omits the flag there; from 2.7.0 on the
        # flag comes only with tasks_per_gpu >= 1 (docs/slurm.md).
        res["tasks_per_gpu"] = 0
    res.update({key: spec[key] for key in ("slurm_partition", "slurm_account") if key in spec})
    return res


def cptlab_invocation(launcher: str, half_precision: bool = False, under: str = "") -> str:
    """The command that runs the CLI under `launcher`: `cptlab` without one, else the launcher
    starting the `cptlab` module (`accelerate launch ... -m cptlab`, `torchrun ... -m cptlab`),
    started by `under` when given (the workflow's `cptlab claimed ... --`).
    `half_precision` (`computes_in_half_precision`): the job and every process it starts keep
    torch's own CPU kernel dispatch (CPTLAB_CPU_KERNELS=native; cptlab/__init__.py says why)."""
    command = f"{launcher.strip()} -m cptlab" if launcher.strip() else "cptlab"
    if under:
        command = f"{under} {command}"
    return f"CPTLAB_CPU_KERNELS=native {command}" if half_precision else command


def computes_in_half_precision(config: Mapping) -> bool:
    """Whether the config trains in bf16 or fp16 anywhere (`training.dtype`, `training.bf16`,
    or a method's `training` overrides): its checkpoints, and so every job, are half precision."""
    sections = [config.get("training") or {}] + [
        (method or {}).get("training") or {} for method in (config.get("methods") or {}).values()
    ]
    return any(
        section.get("bf16") or section.get("dtype") in ("bfloat16", "float16")
        for section in sections
    )


def launcher_processes(launcher: str) -> int:
    """The processes a launcher line starts: `--num_processes N` (accelerate) or
    `--nproc_per_node N` x `--nnodes N` (torchrun); 1 without a launcher."""
    words = shlex.split(launcher)

    def value(*names: str) -> int | None:
        for i, word in enumerate(words):
            for name in names:
                if word == name and i + 1 < len(words):
                    return int(words[i + 1])
                if word.startswith(name + "="):
                    return int(word.split("=", 1)[1])
        return None

    processes = value("--num_processes", "--num-processes")
    if processes is None:
        processes = (value("--nproc_per_node", "--nproc-per-node") or 1) * (value("--nnodes") or 1)
    return processes
