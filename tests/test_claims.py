"""Claims in a shared results folder (cptlab.claims): the exclusive create, when an owner is
alive (this host by its process and start time, another host by the heartbeat, SLURM by its
queue), a run's planning, waiting, claiming and taking over, and `cptlab claimed`, the start of
every workflow job. The workflow with two and three clones at once: tests/test_shared_results.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cptlab.claims import (
    PLANNING,
    RUN_ENV,
    STALE_S,
    Claim,
    ClaimConflict,
    ClaimsFolder,
    Heartbeat,
    PlannedJob,
    Process,
    SharedRun,
    alive,
    join_claim,
    new_claim,
)
from cptlab.cli import main
from cptlab.provenance import committed_path, stage

JOB = "train/grpo/seed0/stage1_math"


def dead_process() -> Process:
    """A process of this host that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return replace(Process.this(), pid=int(done.stdout), start=1)


def elsewhere(process: Process) -> Process:
    return replace(process, host="node-elsewhere", boot="another-boot")


def folder(tmp_path: Path, slurm=lambda claim: False) -> ClaimsFolder:
    return ClaimsFolder(tmp_path / "results" / "exp", slurm=slurm)


def run_of(tmp_path: Path, **options) -> SharedRun:
    lines: list[str] = []
    run = SharedRun(
        tmp_path / "results" / "exp", say=lines.append, slurm_query=lambda claim: False, **options
    )
    run.lines = lines
    return run


def dead_claim(job: str, run: str = "deadrun") -> Claim:
    return replace(new_claim(job, run), driver=dead_process())


# --- the primitive and liveness ---------------------------------------------------------------


def test_one_of_two_creates_wins_and_the_file_names_its_owner(tmp_path):
    claims = folder(tmp_path)
    first, second = new_claim(JOB, "run1"), new_claim(JOB, "run2")
    assert claims.create(first) and not claims.create(second)
    record = json.loads(claims.path(JOB).read_text())
    assert record["run"] == "run1" and record["driver"]["pid"] == os.getpid()
    assert {"user", "clone", "since"} <= set(record) and record["clone"] == os.getcwd()
    assert claims.path(JOB) == tmp_path / "results/exp/claims/train/grpo/seed0/stage1_math.json"
    assert not list(claims.path(JOB).parent.glob(".*"))  # no temporary file left
    assert not claims.release(JOB, "run2") and claims.release(JOB, "run1")
    assert not (tmp_path / "results/exp/claims/train").exists()  # emptied folders go


def test_many_threads_at_once_make_one_owner(tmp_path):
    claims = folder(tmp_path)
    won = []
    threads = [
        threading.Thread(target=lambda i=i: won.append(claims.create(new_claim(JOB, f"r{i}"))))
        for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert won.count(True) == 1


def test_a_process_of_this_host_is_alive_while_it_runs_and_not_under_a_reused_pid():
    me = Process.this()
    assert me.on_this_host() and me.exists()
    assert not replace(me, start=me.start + 1).exists()  # same pid, another process
    assert not dead_process().exists()
    claim = new_claim(JOB, "r")
    assert alive(claim, heartbeat_age=1e9, slurm=lambda c: False)  # this host: the process
    assert not alive(replace(claim, driver=dead_process()), 0.0, slurm=lambda c: False)


def test_a_killed_process_not_yet_reaped_is_dead():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process = replace(Process.this(), pid=child.pid, start=None)
    assert process.exists()
    child.kill()
    time.sleep(0.2)  # a zombie now: this test has not reaped it
    assert Path(f"/proc/{child.pid}/stat").exists() and not process.exists()
    child.wait()


def test_another_hosts_claim_lives_by_its_heartbeat():
    claim = replace(new_claim(JOB, "r"), driver=elsewhere(Process.this()))
    assert alive(claim, STALE_S - 1, slurm=lambda c: False)
    assert not alive(claim, STALE_S + 1, slurm=lambda c: False)


def test_a_running_job_keeps_the_claim_of_a_dead_driver_alive():
    claim = replace(new_claim(JOB, "r"), driver=dead_process(), process=Process.this())
    assert alive(claim, 1e9, slurm=lambda c: False)


def test_a_slurm_run_whose_driver_is_gone_lives_while_slurm_holds_its_jobs():
    claim = replace(new_claim(JOB, "r", slurm=True), driver=dead_process())
    assert alive(claim, 1e9, slurm=lambda c: True)
    assert not alive(claim, 1e9, slurm=lambda c: False)
    started = replace(claim, process=dead_process())  # its job ran and died: no SLURM job left
    assert not alive(started, 1e9, slurm=lambda c: True)


def test_the_heartbeat_touches_the_claim(tmp_path):
    path = tmp_path / "claim.json"
    path.write_text("{}")
    os.utime(path, (1e9, 1e9))
    beat = Heartbeat(interval=0.05).start()
    beat.add(path)
    time.sleep(0.3)
    beat.stop()
    assert time.time() - path.stat().st_mtime < 5
    path.unlink()
    time.sleep(0.2)  # a released claim is dropped, not an error


def test_a_dead_claim_is_taken_over_once_and_a_renewed_one_is_put_back(tmp_path):
    claims = folder(tmp_path)
    dead = dead_claim(JOB)
    assert claims.create(dead)
    text = claims.path(JOB).read_text()
    assert claims.take_over(text, new_claim(JOB, "next"))
    assert claims.read(JOB)[0].run == "next"
    # Another run judged the same dead claim and comes second: the claim it moves aside is not
    # the one it judged, so it puts it back and gives up.
    assert not claims.take_over(text, new_claim(JOB, "third"))
    assert claims.read(JOB)[0].run == "next"


# --- a run: planning alone, waiting, claiming --------------------------------------------------


def test_a_run_plans_after_the_live_planner(tmp_path):
    claims = folder(tmp_path)
    other = new_claim(PLANNING, "other")
    claims.create(other)
    run = run_of(tmp_path, sleep=lambda s: claims.release(PLANNING, "other"), poll_s=0)
    run.plan("{}\n")
    assert run.lines == [
        f"cptlab: waiting for the run of {other.owner()} to finish planning in "
        f"{tmp_path / 'results' / 'exp'}"
    ]
    assert claims.read(PLANNING)[0].run == run.run
    run.planned()
    assert claims.read(PLANNING) is None


def test_a_run_alone_plans_without_writing_and_passes_a_dead_planner_over(tmp_path):
    claims = folder(tmp_path)
    run = run_of(tmp_path)
    run.plan("{}\n")
    assert not claims.folder.exists()  # nothing written before the first job
    claims.create(dead_claim(PLANNING))
    run = run_of(tmp_path, sleep=lambda s: pytest.fail("waited for a dead run"))
    run.plan("{}\n")
    assert claims.read(PLANNING)[0].run == "deadrun"  # nobody alive: planned without it
    run.claim([PlannedJob("data/a", (), ())])  # claiming: taken over for the while
    assert claims.read(PLANNING)[0].run == run.run and claims.read("data/a")[0].run == run.run
    run.planned()
    assert claims.read(PLANNING) is None


def test_another_config_stops_beside_a_live_run_only(tmp_path):
    claims = folder(tmp_path)
    claims.layout.root.mkdir(parents=True)
    (claims.layout.root / "config.json").write_text('{"a": 1}\n')
    alone = run_of(tmp_path)
    alone.plan('{"a": 2}\n')  # nobody works there: this run's config will do
    alone.release()
    claims.create(new_claim(JOB, "other"))
    run = run_of(tmp_path)
    with pytest.raises(ClaimConflict, match="config.json holds another config than this run's"):
        run.plan('{"a": 2}\n')
    assert claims.read(PLANNING) is None  # released
    run_of(tmp_path).plan('{"a": 1}\n')  # the same config joins


def test_a_run_waits_for_a_live_claim_and_redoes_a_dead_ones_job(tmp_path):
    claims = folder(tmp_path)
    other = new_claim(JOB, "other")
    claims.create(other)
    run = run_of(tmp_path, sleep=lambda s: claims.release(JOB, "other"), poll_s=0)
    assert run.await_job(JOB) is False  # waited until it was released
    assert run.lines == [f"cptlab: waiting for {JOB}, which the run of {other.owner()} is making"]
    claims.create(dead_claim(JOB))
    assert run.await_job(JOB) is True  # its outputs are suspect
    assert run.await_job("data/math_train") is False  # nobody's


def test_claiming_takes_over_a_dead_run_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    claims = folder(tmp_path)
    jobs = ["data/a", "data/b", JOB]
    for job in jobs[:2]:
        claims.create(dead_claim(job))
    dead = claims.read("data/a")[0]
    run = run_of(tmp_path)
    run.claim(PlannedJob(job, (), (f"results/exp/{job}.out",)) for job in jobs)
    assert run.lines == [
        f"cptlab: taking over 2 claim(s) of the run of {dead.owner()}, which is gone: "
        "data/a, data/b"
    ]
    assert all(claims.read(job)[0].run == run.run for job in jobs)
    assert claims.read(JOB)[0].outputs == (f"{JOB}.out",)  # relative to the folder
    run.release()
    assert claims.claims() == []


def test_a_live_claim_met_while_claiming_stops_the_run_and_frees_what_it_took(tmp_path):
    claims = folder(tmp_path)
    claims.create(new_claim("data/b", "other"))
    run = run_of(tmp_path)
    with pytest.raises(ClaimConflict, match="data/b is claimed by the run of .* since this run"):
        run.claim([PlannedJob("data/a", (), ()), PlannedJob("data/b", (), ())])
    assert claims.read("data/a") is None


def test_an_output_that_appeared_while_planning_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = Path("results/exp/data/a.jsonl")
    output.parent.mkdir(parents=True)
    output.write_text("made by another run\n")
    run = run_of(tmp_path)
    with pytest.raises(ClaimConflict, match="appeared while this run planned data/a"):
        run.claim([PlannedJob("data/a", (), (str(output),), missing=(str(output),))])


def test_rerunning_a_job_whose_output_a_live_job_reads_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    claims = folder(tmp_path)
    base = Path("results/exp/base/manifest.json")
    base.parent.mkdir(parents=True)
    base.write_text("{}")
    reader = new_claim(JOB, "other", inputs=("base/manifest.json",))
    claims.create(reader)
    run = run_of(tmp_path)
    with pytest.raises(ClaimConflict, match=f"rerunning base would replace .* which {JOB}"):
        run.claim([PlannedJob("base", (), (str(base),))])
    run.claim([PlannedJob("data/a", (), ("results/exp/data/a.jsonl",))])  # unrelated: fine


# --- the job's side ------------------------------------------------------------------------------


def test_a_job_joins_its_runs_claim_and_refuses_another_live_runs(tmp_path):
    claims = folder(tmp_path)
    claims.create(new_claim(JOB, "mine"))
    joined = join_claim(claims, JOB, "mine")
    assert joined.run == "mine" and joined.process.pid == os.getpid()
    assert claims.read(JOB)[0].process == joined.process
    with pytest.raises(ClaimConflict, match="not running it twice"):
        join_claim(claims, JOB, "someone-else")


def test_a_job_without_a_claim_takes_its_own_and_a_dead_runs_over(tmp_path):
    claims = folder(tmp_path)
    own = join_claim(claims, JOB, None)
    assert claims.read(JOB)[0].run == own.run
    claims.release(JOB, own.run)
    claims.create(dead_claim(JOB))
    lines: list[str] = []
    took = join_claim(claims, JOB, "mine", say=lines.append)
    assert took.run != "deadrun" and lines and "took over the claim of" in lines[0]


@pytest.fixture
def staged_job(tmp_path, monkeypatch):
    """A workflow job's staged provenance, its run's claim, and the environment of its run."""
    monkeypatch.chdir(tmp_path)
    root = Path("results/exp")
    staged = stage(root, "data/a", {"command": "prepare-data", "settings": {}})
    claims = ClaimsFolder(root)
    claims.create(new_claim("data/a", "therun"))
    monkeypatch.setenv(RUN_ENV, "therun")
    return staged, claims


def test_claimed_runs_the_command_commits_and_releases(staged_job, tmp_path):
    staged, claims = staged_job
    log = tmp_path / "logs" / "a.log"
    command = ["sh", "-c", "echo made; echo e >&2"]
    assert main(["claimed", "--log", str(log), str(staged), "--", *command]) == 0
    assert log.read_text().split() == ["made", "e"]
    assert committed_path(staged).read_text() == staged.read_text()
    assert claims.read("data/a") is None


def test_a_failed_command_keeps_its_runs_claim_for_a_retry(staged_job, tmp_path):
    staged, claims = staged_job
    with pytest.raises(SystemExit) as stopped:
        main(["claimed", "--log", str(tmp_path / "a.log"), str(staged), "--", "sh", "-c", "exit 7"])
    assert stopped.value.code == 7
    assert not committed_path(staged).exists()
    assert claims.read("data/a")[0].run == "therun"


def test_claimed_refuses_a_job_another_live_run_holds(staged_job, tmp_path, monkeypatch):
    staged, claims = staged_job
    monkeypatch.setenv(RUN_ENV, "another")
    log = tmp_path / "a.log"
    log.write_text("the other run's log\n")
    assert main(["claimed", "--log", str(log), str(staged), "--", "touch", "ran"]) == 2
    assert not (tmp_path / "ran").exists() and log.read_text() == "the other run's log\n"
