"""Jobs that a killed `snakemake --profile slurm` left on SLURM (cptlab.slurm), against a fake
`squeue` on PATH: which jobs count as this workflow's, when the check runs at all, and the wait
with its messages; and the watch of SLURM's controller during a run, against a fake `scontrol`.
The real scheduler's drills (the Snakemake controller killed with -9, then the same command
again; slurmctld stopped mid-run) are in tests/test_slurm_cluster.py (`make test-slurm`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from workflow_helpers import copy_workflow, snakemake

from cptlab.slurm import (
    ControllerWatch,
    SlurmJob,
    SlurmQueryError,
    controller_problem,
    killed_run_may_have_jobs,
    queued_jobs,
    wait_for_jobs_of_killed_run,
)

# Prints the lines of $FAKE_SQUEUE_OUT (then drops the first block, up to a blank line, so that
# each call sees the next state), or fails like squeue does without a controller.
FAKE_SQUEUE = """#!/bin/sh
echo "$@" >> "$FAKE_SQUEUE_OUT.calls"
if [ -e "$FAKE_SQUEUE_OUT.fail" ]; then
    echo "squeue: error: Unable to contact slurm controller (connect failure)" >&2
    exit 1
fi
sed '/^$/q' "$FAKE_SQUEUE_OUT" | grep -v '^$'
sed -i '1,/^$/d' "$FAKE_SQUEUE_OUT"
"""


@pytest.fixture
def fake_squeue(tmp_path, monkeypatch):
    """A `squeue` on PATH; write its answers, one block per call, to the returned file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(FAKE_SQUEUE)
    (bin_dir / "squeue").chmod(0o755)
    answers = tmp_path / "squeue.out"
    answers.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SQUEUE_OUT", str(answers))
    return answers


def killed_run(workdir: Path) -> Path:
    """A folder as a run killed with -9 leaves it: outputs marked incomplete, lock freed."""
    marks = workdir / ".snakemake" / "incomplete"
    marks.mkdir(parents=True)
    (marks / "cmVzdWx0cy9vdXQ=").write_text('{"external_jobid": "61"}')
    return workdir


def test_only_the_plugins_jobs_from_this_folder_count(tmp_path, fake_squeue):
    other = tmp_path / "other"
    fake_squeue.write_text(
        f"61|RUNNING|{tmp_path}|rule_train_stage_wildcards_grpo_0_1_math\n"
        f"62|PENDING|{tmp_path}/.|rule_evaluate_base\n"
        f"63|RUNNING|{other}|rule_evaluate_base\n"  # another workflow
        f"64|RUNNING|{tmp_path}|an interactive job of the user\n"
    )
    jobs = queued_jobs(tmp_path)
    assert jobs == [
        SlurmJob("61", "RUNNING", "rule_train_stage_wildcards_grpo_0_1_math"),
        SlurmJob("62", "PENDING", "rule_evaluate_base"),
    ]
    assert [job.describe() for job in jobs] == [
        "61 train_stage grpo_0_1_math (RUNNING)",
        "62 evaluate_base (PENDING)",
    ]
    # this user's unfinished jobs only, the comment last (it may hold a "|")
    calls = Path(f"{fake_squeue}.calls").read_text().split()
    assert "--me" in calls and "--format=%i|%T|%Z|%k" in calls
    assert "--states=all" not in calls


def test_a_failing_squeue_names_the_cause(tmp_path, fake_squeue):
    Path(f"{fake_squeue}.fail").touch()
    with pytest.raises(SlurmQueryError, match="Unable to contact slurm controller"):
        queued_jobs(tmp_path)


def test_the_check_runs_only_after_a_run_that_left_unfinished_jobs(tmp_path):
    assert not killed_run_may_have_jobs(tmp_path)  # nothing marked incomplete
    killed_run(tmp_path)
    assert killed_run_may_have_jobs(tmp_path)
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir()
    (locks / "0.output.lock").touch()  # a live run holds the folder: those are its jobs
    assert not killed_run_may_have_jobs(tmp_path)


def test_waits_until_the_killed_runs_jobs_have_ended(tmp_path, fake_squeue):
    killed_run(tmp_path)
    fake_squeue.write_text(
        f"61|RUNNING|{tmp_path}|rule_train_stage_wildcards_grpo_0_1_math\n"
        f"62|PENDING|{tmp_path}|rule_evaluate_base\n\n"
        f"62|RUNNING|{tmp_path}|rule_evaluate_base\n\n"
        f"62|RUNNING|{tmp_path}|rule_evaluate_base\n\n"
    )
    said, slept = [], []
    waited = wait_for_jobs_of_killed_run(tmp_path, say=said.append, sleep=slept.append)
    assert [job.jobid for job in waited] == ["61", "62"]
    assert len(slept) == 3  # three more queries: 62 alone, 62 again, none
    assert len(said) == 3, said
    assert "2 SLURM job(s) of a killed run" in said[0] and "scancel 61 62" in said[0]
    assert "61 train_stage grpo_0_1_math (RUNNING)" in said[0]
    assert said[1] == "cptlab: still waiting for 62 evaluate_base (RUNNING)"
    assert "have ended" in said[2]


def test_no_squeue_no_marks_or_no_jobs_is_no_wait(tmp_path, fake_squeue, monkeypatch):
    said = []
    assert wait_for_jobs_of_killed_run(tmp_path, say=said.append) == []  # no marks: no query
    assert not Path(f"{fake_squeue}.calls").exists()
    killed_run(tmp_path)
    assert wait_for_jobs_of_killed_run(tmp_path, say=said.append) == []  # squeue lists none
    monkeypatch.setenv("PATH", "/nonexistent")
    assert wait_for_jobs_of_killed_run(tmp_path, say=said.append) == []  # no SLURM here
    assert said == []


def test_squeue_failing_before_or_during_the_wait(tmp_path, fake_squeue):
    killed_run(tmp_path)
    Path(f"{fake_squeue}.fail").touch()
    said = []
    assert wait_for_jobs_of_killed_run(tmp_path, say=said.append) == []
    assert len(said) == 1 and "could not ask SLURM" in said[0] and "connect failure" in said[0]

    answers = iter([[SlurmJob("61", "RUNNING", "rule_evaluate_base")], "connect failure"])

    def query(workdir: Path) -> list[SlurmJob]:
        answer = next(answers)
        if isinstance(answer, str):
            raise SlurmQueryError(f"squeue failed: {answer}")
        return answer

    with pytest.raises(SlurmQueryError, match="connect failure"):
        wait_for_jobs_of_killed_run(tmp_path, say=said.append, query=query, sleep=lambda s: None)


@pytest.mark.integration
def test_the_workflow_waits_before_planning(tmp_path, fake_squeue):
    """The Snakefile calls the wait in the main run, before any job is planned; a dry run does
    not wait."""
    workdir = killed_run(copy_workflow(tmp_path))
    job = f"61|RUNNING|{workdir}|rule_prepare_data_wildcards_math_id\n\n"
    fake_squeue.write_text(job)
    dry = snakemake(workdir, "-n", "--cores", "1", "--configfile", "config/smoke.yaml")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "killed run" not in dry.stderr
    target = "results/smoke/data/math_id.jsonl"
    done = snakemake(
        workdir, target, "--cores", "1", "--configfile", "config/smoke.yaml",
        env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    log = done.stderr
    assert "1 SLURM job(s) of a killed run" in log and "61 prepare_data math_id" in log
    assert log.index("have ended") < log.index("rule prepare_data")
    assert (workdir / target).exists()


# `scontrol ping` as SLURM 22.05 answers it: exit status 0 when the controller is up, 1 when not.
FAKE_SCONTROL = """#!/bin/sh
if [ -e "$FAKE_SCONTROL_DOWN" ]; then
    echo "Slurmctld(primary) at vm is DOWN"
    echo "*****************************************"
    exit 1
fi
echo "Slurmctld(primary) at vm is UP"
"""


def test_the_controller_problem_is_scontrol_pings_first_line(tmp_path, monkeypatch):
    (tmp_path / "scontrol").write_text(FAKE_SCONTROL)
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SCONTROL_DOWN", str(tmp_path / "down"))
    assert controller_problem() is None
    (tmp_path / "down").touch()
    assert controller_problem() == "scontrol ping: Slurmctld(primary) at vm is DOWN"


def test_the_controller_watch_says_when_it_stops_again_while_down_and_when_it_is_back():
    down = "scontrol ping: Slurmctld(primary) at vm is DOWN"
    answers = iter([None, down, down, down, down, down, None, None])
    watch = ControllerWatch(ping=lambda: next(answers), remind_s=600)
    said = {t: watch.check(t) for t in (0, 60, 120, 600, 660, 720, 780, 840)}
    assert said[0] is None  # up: nothing
    assert said[60].startswith(f"cptlab: SLURM's controller does not answer ({down}) since ")
    assert "no job can be submitted or start" in said[60]
    assert said[120] is said[600] is None  # said once, then again after remind_s
    assert said[660] == f"cptlab: SLURM's controller still does not answer, for 10m00s ({down})"
    assert said[720] is None
    assert said[780] == "cptlab: SLURM's controller answers again, after 12m00s without"
    assert said[840] is None
