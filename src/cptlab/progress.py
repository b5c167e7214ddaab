"""What each running job of a workflow run is doing, read from the files the jobs write anyway
(`cptlab watch`, which `make run` starts beside Snakemake).

Snakemake marks the outputs of a running job in `.snakemake/incomplete/` (one file per
output, named by the output's path in base64). Each marked output is matched to its job through
the results layout, and the job's own files tell how far it is:

    train     the state folder's train log: steps done of the stage's steps, reward, s/step
    evaluate  the checkpoint's EVAL.json files (a stage's end or a checkpoint inside it):
              benchmarks done of the config's
    base      the build log's warm-up steps, then its measured benchmarks
    others    the time since the job started

A job whose files have not changed for `stall_after` seconds is reported as stalled.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from cptlab.layout import BASE_JOB, TRAIN_LOG, Layout

INCOMPLETE = Path(".snakemake") / "incomplete"
STALL_AFTER = 300.0


@dataclass(frozen=True)
class JobProgress:
    """One running job: what it is, how far it is, and when its files last changed."""

    job: str  # e.g. "train grpo seed0 stage 2 science"
    done: int | None  # steps, benchmarks, ... done of `total` (None: no count)
    total: int | None
    detail: str  # e.g. "reward 0.42, 2.1 s/step, ETA 1m10s"
    last_change: float  # unix time

    def line(self, now: float, stall_after: float = STALL_AFTER) -> str:
        text = self.job
        if self.total:
            text += f": {self.done}/{self.total}"
        if self.detail:
            text += (", " if self.total else ": ") + self.detail
        idle = now - self.last_change
        if idle > stall_after:
            text += f" -- STALLED? nothing new for {duration(idle)}"
        return text


def duration(seconds: float) -> str:
    """`1h02m`, `3m05s` or `42s`."""
    seconds = max(0, int(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def running_outputs(workdir: Path = Path(".")) -> list[Path]:
    """The outputs Snakemake marks as being made."""
    folder = workdir / INCOMPLETE
    found = []
    for marker in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            found.append(Path(base64.b64decode(marker.name, validate=True).decode()))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    return found


def _mtime(*paths: Path) -> float:
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def _read_lines(path: Path) -> list[dict]:
    records = []
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line being written
    return records


def train_progress(config: dict, layout: Layout, method: str, seed: int, stage: int, domain: str):
    from cptlab.train.spec import resolve_stage

    steps = resolve_stage(config, method, domain).steps
    log = layout.state_dir(method, seed, stage, domain) / TRAIN_LOG
    records = _read_lines(log)
    detail = []
    if records:
        last = records[-1]
        reward = last.get("verifier/reward_mean", last.get("reward"))
        if isinstance(reward, int | float):
            detail.append(f"reward {reward:.2f}")
        times = [
            r["step_seconds"]
            for r in records[-10:]
            if isinstance(r.get("step_seconds"), int | float)
        ]
        if times:
            per_step = sum(times) / len(times)
            detail.append(
                f"{per_step:.1f} s/step, ETA {duration(per_step * (steps - len(records)))}"
            )
    job = f"train {method} seed{seed} stage {stage} {domain}"
    started = layout.log_file(layout.train_job(method, seed, stage, domain))
    return JobProgress(job, len(records), steps, ", ".join(detail), _mtime(log, started))


def evaluate_progress(
    config: dict, layout: Layout, method: str | None, seed, stage: int, step: int | None = None
):
    from cptlab.plan import eval_benchmarks

    names = [b.name for b in eval_benchmarks(config)]
    files = [layout.eval_file(b, method, seed, stage, step) for b in names]
    done = sum(f.exists() for f in files)
    job = "evaluate base" if method is None else f"evaluate {method} seed{seed} stage {stage}"
    job += "" if step is None else f" step {step}"
    log = layout.log_file(layout.evaluate_job(method, seed, stage, step))
    return JobProgress(job, done, len(names), "benchmarks", _mtime(log, *files))


_WARMUP_STEP = re.compile(r"warm-up \{'step': (\d+)(?:.*'seconds': ([0-9.]+))?")
_MEASURED = re.compile(r"measured \S+:")


def base_progress(config: dict, layout: Layout):
    from cptlab.base_model.settings import BaseSettings
    from cptlab.plan import base_measure_benchmarks

    log = layout.log_file(BASE_JOB)
    text = log.read_text(errors="replace") if log.is_file() else ""
    steps = _WARMUP_STEP.findall(text)
    measured = len(_MEASURED.findall(text))
    total = BaseSettings.from_config(config).sft.steps
    if measured:
        bench = len(base_measure_benchmarks(config))
        return JobProgress("build base", measured, bench, "benchmarks measured", _mtime(log))
    done, detail = 0, "warm-up steps"
    if steps:
        done, seconds = int(steps[-1][0]), steps[-1][1]
        if seconds and done:
            detail += f", ETA {duration(float(seconds) / done * (total - done))}"
    return JobProgress("build base", done, total, detail, _mtime(log))


def job_progress(config: dict, layout: Layout, output: Path, now: float) -> JobProgress | None:
    """The progress of the job that makes `output`; None for a path outside the layout."""
    try:
        relative = output.relative_to(layout.root)
    except ValueError:
        return None
    parts = relative.parts
    if parts[:1] == ("runs",) and len(parts) == 5 and parts[-1] == "manifest.json":
        stage, domain = re.fullmatch(r"stage(\d+)_(.+)", parts[3]).groups()
        return train_progress(config, layout, parts[1], int(parts[2][4:]), int(stage), domain)
    if parts[:1] == ("eval",) and len(parts) > 3 and parts[-2] == "shards":
        shard = parts[-1].removesuffix(".json").removesuffix(".responses.jsonl")
        return JobProgress(f"evaluate {' '.join(parts[1:-2])} {shard}", None, None, "running", now)
    if parts[:2] == ("eval", "base"):
        return evaluate_progress(config, layout, None, None, 0)
    if parts[:1] == ("eval",) and len(parts) == 5:
        return evaluate_progress(config, layout, parts[1], int(parts[2][4:]), int(parts[3][5:]))
    if parts[:1] == ("eval",) and len(parts) == 6 and parts[4].startswith("step"):
        seed, stage, step = int(parts[2][4:]), int(parts[3][5:]), int(parts[4][4:])
        return evaluate_progress(config, layout, parts[1], seed, stage, step)
    if parts[:1] == ("base",):
        return base_progress(config, layout)
    return JobProgress(_other_job(parts), None, None, "running", now)


def _other_job(parts: tuple[str, ...]) -> str:
    """A label for the jobs without a finer progress count."""
    if parts[0] in (
        "scores.csv", "trajectory.csv", "cl_metrics.csv", "cl_summary.csv", "item_ledger.csv",
        "transitions.csv",
    ):  # fmt: skip
        return "aggregate"
    if parts[:2] == ("drift", "figures"):
        return "drift figures"
    if parts[:2] == ("drift", "datasets"):
        return "dataset distance"
    if parts[0] == "drift" and len(parts) == 4:
        return f"drift {parts[1]} {parts[2]}"
    if parts[0] == "data":
        return f"prepare data {Path(parts[-1]).stem}"
    return parts[0]


def snapshot(workdir: Path, layout: Layout, now: float | None = None) -> list[JobProgress]:
    """The progress of every running job of the experiment, one entry per job."""
    now = time.time() if now is None else now
    if not (workdir / layout.config_file).is_file():
        return []
    config = json.loads((workdir / layout.config_file).read_text())
    found: dict[str, JobProgress] = {}
    rooted = Layout(workdir / layout.root)
    for output in running_outputs(workdir):
        progress = job_progress(config, rooted, workdir / output, now)
        if progress is not None:
            found.setdefault(progress.job, progress)
    return list(found.values())
