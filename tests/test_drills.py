"""Failure drills at the workflow level: `snakemake` killed with -9 mid-job, then the same
command again. Opt-in (`make test-drills`, marker `drill`): each drill runs Snakemake for real,
which the 10-minute test budget of `make test` cannot hold.

The drill experiment is the smoke config cut to one chain of one stage, with 40 training steps
and a checkpoint every 5, so that a kill can land between checkpoints.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from workflow_helpers import BIN, copy_workflow

from cptlab.layout import Layout

pytestmark = [pytest.mark.integration, pytest.mark.drill]

DRILL = """\
extends: config/smoke.yaml
experiment: drill
run: {sequence: [math], methods: [grpo], seeds: [0]}
training: {steps: 40, save_steps: 5}
"""
LAYOUT = Layout(Path("results/drill"))
STAGE = LAYOUT.stage_manifest("grpo", 0, 1, "math")
STATE = LAYOUT.state_dir("grpo", 0, 1, "math")


def workflow(folder: Path) -> Path:
    workdir = copy_workflow(folder)
    (workdir / "drill.yaml").write_text(DRILL)
    return workdir


def start(workdir: Path, *targets: str, cores: int = 1) -> subprocess.Popen:
    """`snakemake` in a session of its own, so that killing its process group kills the run."""
    log = open(workdir / f"snakemake-{time.monotonic_ns()}.log", "w")
    return subprocess.Popen(
        [str(BIN / "snakemake"), *targets, "--cores", str(cores), "--configfile", "drill.yaml"],
        cwd=workdir,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def finish(workdir: Path, *targets: str, cores: int = 2) -> str:
    run = start(workdir, *targets, cores=cores)
    assert run.wait(timeout=600) == 0, Path(run.args[0]).name + ": " + last_log(workdir)
    return last_log(workdir)


def last_log(workdir: Path) -> str:
    return max(workdir.glob("snakemake-*.log"), key=lambda p: p.stat().st_mtime).read_text()


def kill_when(run: subprocess.Popen, workdir: Path, ready, timeout: float = 300) -> None:
    """SIGKILL the run's whole process group as soon as `ready()` holds; then whatever of the
    run still lives in the working folder (a job in a session of its own), as a power loss
    would."""
    end = time.monotonic() + timeout
    while not ready():
        assert run.poll() is None, "the run ended before the drill could kill it"
        assert time.monotonic() < end, "the moment to kill never came"
        time.sleep(0.02)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(os.readlink(f"/proc/{entry}/cwd")).resolve() == workdir.resolve():
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                continue


def copy_results(source: Path, dest: Path, *parts: str) -> None:
    """Parts of a finished results folder, with their modification times (as `cp -a`)."""
    for part in parts:
        src, dst = source / LAYOUT.root / part, dest / LAYOUT.root / part
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def tables(workdir: Path) -> dict[str, bytes]:
    """The results a rerun must reproduce: scores, CL metrics and every drift table."""
    root = workdir / LAYOUT.root
    files = [root / "scores.csv", root / "cl_metrics.csv", *sorted((root / "drift").rglob("*.csv"))]
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The drill experiment, run once without interruption."""
    workdir = workflow(tmp_path_factory.mktemp("reference"))
    finish(workdir)
    return workdir


def test_a_kill_between_checkpoints_resumes_to_the_same_weights(reference, tmp_path):
    workdir = workflow(tmp_path)
    copy_results(reference, workdir, "data", "base", "provenance/data", "provenance/base.json")
    run = start(workdir, str(STAGE))
    checkpoint = workdir / STATE / "checkpoint-10" / "trainer_state.json"
    kill_when(run, workdir, checkpoint.is_file)
    assert not (workdir / STAGE).exists()
    assert (workdir / ".snakemake/locks").is_dir() and list(
        (workdir / ".snakemake/locks").glob("*.lock")
    )
    log = finish(workdir, str(STAGE), cores=1)  # the same command: no --unlock
    assert "freed the lock of a run that was killed" in log
    resumed = json.loads((workdir / STAGE).read_text())
    uninterrupted = json.loads((reference / STAGE).read_text())
    assert resumed["resumed_from"] is not None and resumed["steps_done"] == 40
    assert resumed["weights_sha256"] == uninterrupted["weights_sha256"]


def test_kills_during_evaluation_and_drift_are_recomputed(reference, tmp_path):
    workdir = workflow(tmp_path)
    copy_results(
        reference, workdir, "data", "base", "runs", "state",
        "provenance/data", "provenance/base.json", "provenance/train",
    )  # fmt: skip
    root = workdir / LAYOUT.root
    evals = root / "eval"

    def some_evaluations_done() -> bool:
        return len(list(evals.rglob("*.json"))) >= 1

    kill_when(start(workdir, cores=2), workdir, some_evaluations_done)
    for summary in evals.rglob("*.json"):  # what exists is complete: EVAL.json is written last
        record = json.loads(summary.read_text())
        responses = summary.with_suffix(".responses.jsonl")
        assert len(responses.read_text().splitlines()) == record["n"] > 0
    assert not list(root.rglob("*.tmp"))

    chain = root / "drift" / "grpo" / "seed0"

    def drift_running() -> bool:
        return (root / "logs/drift/grpo/seed0.log").is_file() and not (
            chain / "manifest.json"
        ).exists()

    kill_when(start(workdir, cores=2), workdir, drift_running)
    assert not (chain / "manifest.json").exists()
    finish(workdir)
    assert tables(workdir) == tables(reference)
