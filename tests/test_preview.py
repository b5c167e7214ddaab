"""Only a run that executes jobs changes a results folder: previews, lints, reports and a refused
second run leave it as it was, and each real run reruns exactly what its config changed.

One real run of config/smoke.yaml with one method and no within-stage evaluation (module
fixture: one chain of stage-end evaluations is all that the provenance needs, and a third of the
jobs); every case works on a copy of that workflow, its results
and its `.snakemake/`, and checks its outcome both with a dry run and with a real run. A
folder's state is every file's and folder's name, content and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from workflow_helpers import (
    BIN,
    SMOKE,
    STAGES,
    copy_workflow,
    downstream,
    edited_config,
    job_stats,
    planned_jobs,
    snakemake,
)

from cptlab.layout import Layout
from cptlab.provenance import ACCEPTED

pytestmark = pytest.mark.integration

RESULTS = Layout(Path("results/smoke"))
ENV = {"OMP_NUM_THREADS": "1"}
CONFIG = "config/preview.yaml"  # the smoke config with GRPO alone, written by `finished`
# One evaluation key changed: every evaluation and what reads the evaluations, nothing else.
EVALUATIONS = Counter(evaluate_base=1, evaluate_stage=STAGES, **downstream(1, base=True))


def state(workdir: Path) -> dict[str, tuple]:
    """Every file and folder under results/: name -> (content digest, modification time)."""
    found = {}
    for path in sorted((workdir / "results").rglob("*")):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "folder"
        found[str(path.relative_to(workdir))] = (digest, info.st_mtime_ns)
    return found


def real_run(workdir: Path, *args: str) -> Counter:
    """A real `snakemake` run that must succeed; the jobs it executed, per rule."""
    done = snakemake(workdir, "--cores", "2", *args, env=ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return job_stats(done.stdout + done.stderr)


def with_max_new_tokens(workdir: Path, tokens: int) -> str:
    """The preview config with `evaluation.max_new_tokens` changed, beside the workflow."""

    def edit(config: dict) -> None:
        config["evaluation"]["max_new_tokens"] = tokens

    return str(edited_config(workdir / CONFIG, workdir / f"tokens{tokens}.yaml", edit))


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("finished"))

    def grpo_alone(config: dict) -> None:
        config["run"]["methods"] = ["grpo"]
        config["evaluation"]["within_stage"] = None  # more evaluations of the same kind

    edited_config(workdir / SMOKE, workdir / CONFIG, grpo_alone)
    real_run(workdir, "--configfile", CONFIG)
    return workdir


@pytest.fixture
def clone(finished, tmp_path) -> Path:
    """The finished workflow as its user has it: sources, results and `.snakemake/`."""
    workdir = tmp_path / "clone"
    shutil.copytree(finished, workdir, symlinks=True)
    return workdir


def assert_nothing_to_do(workdir: Path, *args: str) -> None:
    """Nothing planned by a dry run, nothing run by a real run, and the folder unchanged."""
    before = state(workdir)
    assert planned_jobs(workdir, "--configfile", CONFIG, *args) == Counter()
    assert real_run(workdir, "--configfile", CONFIG, *args) == Counter()
    assert state(workdir) == before


@pytest.mark.parametrize("snakemake_state", ["kept", "absent"])
def test_a_preview_of_another_config_leaves_the_results_as_they_were(clone, snakemake_state):
    """In the clone that ran, and in a colleague's copy without `.snakemake/` (where Snakemake
    has no checksums of its own to fall back on)."""
    if snakemake_state == "absent":
        shutil.rmtree(clone / ".snakemake")
    before = state(clone)
    assert planned_jobs(clone, "--configfile", with_max_new_tokens(clone, 9)) == EVALUATIONS
    assert state(clone) == before
    assert_nothing_to_do(clone)


def test_lint_summary_and_report_with_another_config_change_nothing(clone, tmp_path):
    """The report goes outside results/ here, so that the tree can be compared whole."""
    other = with_max_new_tokens(clone, 9)
    before = state(clone)
    for args in (
        ["--lint"],
        ["--summary"],
        ["--detailed-summary"],
        ["--report", str(tmp_path / "report.html")],
    ):
        done = snakemake(clone, *args, "--configfile", other)
        assert done.returncode == 0, args + [done.stdout[-3000:] + done.stderr[-3000:]]
        assert state(clone) == before, args
    assert_nothing_to_do(clone)


def test_two_configs_run_alternately_rerun_only_the_evaluations_and_their_readers(clone):
    other = with_max_new_tokens(clone, 9)
    provenance = clone / RESULTS.provenance_file(RESULTS.evaluate_job())
    first = provenance.read_text()
    for config in (other, CONFIG):
        assert planned_jobs(clone, "--configfile", config) == EVALUATIONS
        assert real_run(clone, "--configfile", config) == EVALUATIONS
        assert planned_jobs(clone, "--configfile", config) == Counter()
        assert (provenance.read_text() == first) == (config == CONFIG)


def test_a_moved_repository_with_its_results_has_nothing_to_do(clone, tmp_path):
    moved = tmp_path / "elsewhere" / "cptlab"
    moved.parent.mkdir()
    os.rename(clone, moved)
    assert_nothing_to_do(moved)


def test_touch_commits_the_provenance_of_what_it_marks_up_to_date(clone):
    """It also keeps, in each record it accepts, the settings that made the outputs."""
    other = with_max_new_tokens(clone, 9)
    done = snakemake(clone, "--touch", "--cores", "1", "--configfile", other)
    assert done.returncode == 0, done.stderr[-3000:]
    assert planned_jobs(clone, "--configfile", other) == Counter()
    record = json.loads((clone / RESULTS.provenance_file(RESULTS.evaluate_job())).read_text())
    assert record["settings"]["evaluation"]["max_new_tokens"] == 9
    assert [made["settings"]["evaluation"]["max_new_tokens"] for made in record[ACCEPTED]] == [8]
    assert planned_jobs(clone, "--configfile", CONFIG) == EVALUATIONS


def processes_in(workdir: Path) -> dict[int, list[str]]:
    """pid -> command line of every process running in `workdir` (the run and its jobs)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(os.readlink(f"/proc/{entry}/cwd")) == workdir:
                    argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                    found[int(entry)] = [a.decode() for a in argv if a]
            except OSError:
                continue
    return found


def wait_for(condition, what: str, timeout: float = 300):
    end = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


def evaluation_job(workdir: Path) -> tuple[int, list[str]] | None:
    """A running `cptlab evaluate-checkpoint` job of the run in `workdir`."""
    for pid, argv in processes_in(workdir.resolve()).items():
        if "evaluate-checkpoint" in argv and any(a.endswith("cptlab") for a in argv):
            return pid, argv
    return None


def test_a_second_run_is_refused_and_a_killed_job_keeps_its_provenance(clone):
    """While a run holds the folder: a dry run plans, a second run is refused in one line and
    writes nothing. Then one evaluation job is killed mid-way: its provenance stays its last
    complete run's, and the same command again reruns it."""
    other = with_max_new_tokens(clone, 9)
    committed = {p: p.read_text() for p in (clone / RESULTS.root / "provenance").rglob("*.json")}
    log = open(clone / "run.log", "w")
    run = subprocess.Popen(
        [str(BIN / "snakemake"), "--cores", "1", "--configfile", other],
        cwd=clone,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **ENV},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        pid, argv = wait_for(lambda: evaluation_job(clone), "an evaluation job")
        frozen = list(processes_in(clone.resolve()))  # the run and its job, paused
        for process in frozen:
            os.kill(process, signal.SIGSTOP)
        try:
            before = state(clone)
            assert planned_jobs(clone, "--configfile", with_max_new_tokens(clone, 10))
            second = snakemake(
                clone, "--cores", "1", "--configfile", with_max_new_tokens(clone, 10), env=ENV
            )
            assert state(clone) == before
        finally:
            for process in frozen:
                os.kill(process, signal.SIGCONT)
        assert second.returncode == 2
        errors = [line for line in second.stderr.splitlines() if "rror" in line]
        assert len(errors) == 1, second.stderr
        assert re.fullmatch(
            r"cptlab: error: results/smoke is in use by another snakemake run, process "
            rf"{run.pid} on \S+ \(lock \.snakemake/locks/\d+\.(input|output)\.lock\); "
            r"wait for it to end, or plan with -n",
            errors[0],
        ), errors[0]

        os.kill(pid, signal.SIGKILL)
        assert run.wait(timeout=600) != 0
    finally:
        if run.poll() is None:
            run.kill()
        log.close()

    # The killed job: which checkpoint it evaluated, from its command line.
    if "--method" in argv:
        index = argv.index
        job = RESULTS.evaluate_job(
            argv[index("--method") + 1], argv[index("--seed") + 1], argv[index("--stage") + 1]
        )
        planned = "evaluate_stage"
    else:
        job, planned = RESULTS.evaluate_job(), "evaluate_base"
    killed = clone / RESULTS.provenance_file(job)
    assert killed.read_text() == committed[killed]
    assert planned_jobs(clone, "--configfile", other)[planned] >= 1
    real_run(clone, "--configfile", other)
    assert killed.read_text() != committed[killed]
    assert json.loads(killed.read_text())["settings"]["evaluation"]["max_new_tokens"] == 9
    assert planned_jobs(clone, "--configfile", other) == Counter()
