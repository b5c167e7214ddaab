"""SLURM jobs that a killed Snakemake run left queued or running in this folder.

`snakemake --profile slurm` submits each job with `sbatch` and then only watches it. When the
controller is killed (-9, a lost login session), its jobs go on: the running ones finish, the
queued ones start later. The same command again would find their outputs missing or marked
incomplete and submit them a second time, two jobs then writing the same files. So, before the
workflow builds its plan, `wait_for_jobs_of_killed_run` waits for those jobs to end: a job
that completes clears its own incomplete marks (its Snakemake finishes the job's bookkeeping in
the shared `.snakemake/`), so the new run takes its outputs as done; one that failed is run
again. The wait ends when the last of them does, at the latest at their SLURM time limits, and
says which jobs it waits for and how to cancel them instead.

While a run goes on, `start_controller_watch` (started from the workflow's onstart in a SLURM
run) asks SLURM's controller every minute whether it answers, and says when it stops, again
every 10 minutes while it stays down, and when it is back. The executor plugin says nothing
useful then: it turns to sacct for job states (which reports the jobs as they were, since
their ends go through the controller), and a failed status query is a debug line.

A job belongs to this workflow when the executor plugin submitted it (its comment starts with
`rule_` or `group_`) with this folder as its working directory (`sbatch -D`). It belongs to a
killed run when no Snakemake run holds this folder's lock: a live run always does, and
`cptlab.locks` has already freed the lock of a dead one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cptlab.locks import LOCKS
from cptlab.progress import duration

# Snakemake marks the outputs of every job it starts here and clears the marks when the job
# ends; a killed run's unfinished jobs keep theirs. No marks: nothing of a killed run is left.
INCOMPLETE = Path(".snakemake") / "incomplete"
# The executor plugin's `--comment` of a job: rule_<rule>[_wildcards_<values>], or group_...
PLUGIN_COMMENTS = ("rule_", "group_")
SQUEUE_TIMEOUT_S = 60
CONTROLLER_CHECK_S = 60.0  # between two `scontrol ping`s of the controller watch
CONTROLLER_REMIND_S = 600.0  # while the controller stays down, said again this often


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


class SlurmQueryError(RuntimeError):
    """squeue failed: the controller does not answer, or no SLURM is configured."""


@dataclass(frozen=True)
class SlurmJob:
    jobid: str
    state: str  # PENDING, RUNNING, COMPLETING, ...
    comment: str

    def describe(self) -> str:
        """`61 train_stage grpo_0_1_math (RUNNING)`: the job as the plugin named it."""
        rule, _, wildcards = self.comment.partition("_wildcards_")
        rule = rule.removeprefix("rule_")
        return f"{self.jobid} {rule}{' ' + wildcards if wildcards else ''} ({self.state})"


def queued_jobs(workdir: Path, user: str | None = None) -> list[SlurmJob]:
    """The jobs of `user` (default: this user) that SLURM still holds (pending, running,
    completing) and that the executor plugin submitted from `workdir`. Raises SlurmQueryError
    when squeue fails."""
    # squeue lists unfinished jobs only, unless asked for more. The comment comes last: the
    # split below leaves any "|" in it alone.
    whose = f"--user={user}" if user else "--me"
    command = ["squeue", "--noheader", whose, "--format=%i|%T|%Z|%k"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SlurmQueryError(f"{' '.join(command)}: {err}") from err
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
        raise SlurmQueryError(f"{' '.join(command)} failed: {reason}")
    here = workdir.resolve()
    jobs = []
    for line in done.stdout.splitlines():
        jobid, state, folder, comment = (line.split("|", 3) + ["", "", ""])[:4]
        if comment.startswith(PLUGIN_COMMENTS) and folder and Path(folder).resolve() == here:
            jobs.append(SlurmJob(jobid.strip(), state.strip(), comment.strip()))
    return jobs


def killed_run_may_have_jobs(workdir: Path) -> bool:
    """A killed run's jobs can be in flight here only if some output is still marked
    incomplete and no live run holds the folder's lock."""
    incomplete, locks = workdir / INCOMPLETE, workdir / LOCKS
    if not incomplete.is_dir() or not any(incomplete.iterdir()):
        return False
    return not (locks.is_dir() and any(locks.glob("*.lock")))


def wait_for_jobs_of_killed_run(
    workdir: Path,
    *,
    poll_s: float = 5.0,
    say: Callable[[str], None] = _to_stderr,
    query: Callable[[Path], list[SlurmJob]] = queued_jobs,
    sleep: Callable[[float], None] = time.sleep,
) -> list[SlurmJob]:
    """Wait until no job of a killed run of this workflow is queued or running on SLURM;
    return the jobs waited for (none where there is no SLURM or no such job). A squeue that
    fails before any job was seen is reported and the run goes on; one that fails during the
    wait raises SlurmQueryError (stopping the run: its jobs' fate is unknown)."""
    if shutil.which("squeue") is None or not killed_run_may_have_jobs(workdir):
        return []
    try:
        jobs = query(workdir)
    except SlurmQueryError as err:
        say(f"cptlab: could not ask SLURM for jobs of a killed run in this folder ({err})")
        return []
    if not jobs:
        return []
    waited = list(jobs)
    say(
        f"cptlab: {len(jobs)} SLURM job(s) of a killed run of this workflow are still queued or "
        f"running: {', '.join(job.describe() for job in jobs)}. Waiting for them to end, so "
        f"that none is submitted twice (or cancel them: scancel {' '.join(j.jobid for j in jobs)})"
    )
    while jobs:
        sleep(poll_s)
        left = query(workdir)
        if {j.jobid for j in left} != {j.jobid for j in jobs} and left:
            say(f"cptlab: still waiting for {', '.join(job.describe() for job in left)}")
        jobs = left
    say("cptlab: the killed run's SLURM jobs have ended; planning the rest")
    return waited


def controller_problem() -> str | None:
    """None when SLURM's controller answers `scontrol ping`; else what scontrol said."""
    command = ["scontrol", "ping"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{' '.join(command)}: {err}"
    if done.returncode == 0:
        return None
    lines = (done.stdout + done.stderr).strip().splitlines()
    return f"{' '.join(command)}: {lines[0] if lines else f'exit status {done.returncode}'}"


@dataclass
class ControllerWatch:
    """What to say about SLURM's controller at each check: that it stopped answering, again
    every `remind_s` while it stays down, and that it is back; nothing while it answers."""

    ping: Callable[[], str | None] = controller_problem
    remind_s: float = CONTROLLER_REMIND_S
    down_since: float | None = None
    said_at: float = 0.0

    def check(self, now: float) -> str | None:
        problem = self.ping()
        if problem is None:
            if self.down_since is None:
                return None
            down, self.down_since = now - self.down_since, None
            return f"cptlab: SLURM's controller answers again, after {duration(down)} without"
        if self.down_since is None:
            self.down_since = self.said_at = now
            since = time.strftime("%H:%M:%S", time.localtime(now))
            return (
                f"cptlab: SLURM's controller does not answer ({problem}) since {since}: until "
                "it does, no job can be submitted or start, and no running job's end is recorded"
            )
        if now - self.said_at >= self.remind_s:
            self.said_at = now
            return (
                f"cptlab: SLURM's controller still does not answer, for "
                f"{duration(now - self.down_since)} ({problem})"
            )
        return None


def start_controller_watch(
    *, every_s: float = CONTROLLER_CHECK_S, say: Callable[[str], None] = _to_stderr
) -> threading.Thread | None:
    """A daemon thread that checks the controller every `every_s` seconds for as long as the
    process runs and says what `ControllerWatch` says; None where SLURM is not installed."""
    if shutil.which("scontrol") is None:
        return None
    watch = ControllerWatch()

    def loop() -> None:
        while True:
            time.sleep(every_s)
            if (line := watch.check(time.time())) is not None:
                say(line)

    thread = threading.Thread(target=loop, name="cptlab-slurm-controller-watch", daemon=True)
    thread.start()
    return thread
