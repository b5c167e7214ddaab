"""Who works in a results folder: one claim per job in results/<experiment>/claims/, so that runs
from several clones (or hosts) that share the folder never run the same job twice.

Snakemake's own lock lives in each clone's `.snakemake/`, so two clones whose `results/` is one
folder (a symlink, or `CPTLAB_RESULTS`) do not see each other. The claims live in the folder.

A claim is a small JSON file, `claims/<job>.json`, naming its owner: the run (an id), the user,
the host (and its boot), the Snakemake process and its start time, the clone, since when, and
the job's inputs and outputs. While the job runs, its own process is added (`process`). It is
created with link(2) of a private temporary file, the exclusive create that holds on NFS (v2 and
up; the link count of the temporary file says whether a link whose reply was lost succeeded), and
changed only by a rename over it. flock is not used: it does not hold across NFS clients.

A run of the workflow (the driver, `SharedRun`):
  1. beside another run, plans alone: it holds `claims/.planning.json` while it builds its plan
     (another run that plans waits for it, one line); a run alone in the folder writes nothing
     before its first job, and holds the planning claim only while it claims its jobs;
  2. while it plans, waits for every job of its plan that a live run has claimed, one line per
     job (`await_job`), so that their outputs are complete when Snakemake looks at them; a
     job claimed by a dead run is planned again (its outputs are suspect);
  3. before its first job, claims every job it will run (`claim`), taking over, in one line per
     dead run, the claims of runs that are gone. It stops, in one line naming the owner, when
     the folder's config.json is another config and a live run works there, when a live run
     has claimed a job it planned, or when rerunning a job would replace a file that a live
     run's job reads;
  4. its jobs run under their claims (`cptlab claimed`, the start of every rule's shell line):
     the job's process joins the claim, beats its heart, commits the job's provenance when the
     command succeeded and then removes the claim. The run releases what is left when it ends.

A claim is alive while any of its processes (the driver, the job) is: on this host (same boot)
while the process exists with its recorded start time (a reused pid is another process); on
another host while the claim's heartbeat, its modification time, which the driver and the job
touch every HEARTBEAT_S seconds, is younger than STALE_S; and, for a run under SLURM whose
driver is gone, while SLURM still holds a job that run's executor submitted from its clone
(cptlab.slurm), which would otherwise start later and find its job taken.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

from cptlab.cli import arg, command
from cptlab.errors import InputError

# The run id a driver passes to its jobs (local and SLURM jobs inherit its environment).
RUN_ENV = "CPTLAB_RUN"
# Every HEARTBEAT_S seconds the driver and the running job touch their claims; a claim of
# another host whose heartbeat is older than STALE_S is dead. The margin covers NFS attribute
# caching (60 s by default) and clocks some minutes apart.
HEARTBEAT_S = 30.0
STALE_S = 300.0
POLL_S = 2.0  # how often a waiting run looks again
PLANNING = ".planning"  # the claim of the run that is planning (a name no job id takes)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot), or None when it is gone: no
    such process, or a zombie (killed, not yet reaped; a container's first process may never
    reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count after its last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


@dataclass(frozen=True)
class Process:
    """One process, as another process on any host can recognise it."""

    host: str
    boot: str
    pid: int
    start: int | None  # clock ticks since boot (None: unknown)

    @classmethod
    def this(cls) -> Process:
        return cls(socket.gethostname(), _boot_id(), os.getpid(), _start_ticks(os.getpid()))

    def on_this_host(self) -> bool:
        return self.host == socket.gethostname() and self.boot == _boot_id()

    def exists(self) -> bool:
        """On this host: whether the process still runs (the same one, not a reused pid)."""
        ticks = _start_ticks(self.pid)
        return ticks is not None and (self.start is None or ticks == self.start)


@dataclass(frozen=True)
class Claim:
    """The owner of one job (or of the planning): what a claim file holds."""

    job: str
    run: str
    user: str
    clone: str
    since: str
    driver: Process
    slurm: bool = False
    inputs: tuple[str, ...] = ()  # relative to the experiment's folder
    outputs: tuple[str, ...] = ()
    process: Process | None = None  # the job's own process, once it runs

    def text(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def parse(cls, text: str) -> Claim:
        record = json.loads(text)
        process = record.pop("process", None)
        return cls(
            **{
                **record,
                "driver": Process(**record["driver"]),
                "inputs": tuple(record.get("inputs", ())),
                "outputs": tuple(record.get("outputs", ())),
                "process": Process(**process) if process else None,
            }
        )

    def owner(self) -> str:
        """The run that holds the claim, by its Snakemake process: `alice on node7 (process
        4242, clone /home/alice/cptlab, since 2026-12-05 10:00:03 CET)`."""
        return (
            f"{self.user} on {self.driver.host} (process {self.driver.pid}, clone {self.clone}, "
            f"since {self.since})"
        )


def _now() -> str:
    return datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def new_claim(job: str, run: str, **fields) -> Claim:
    """A claim of `job` by this process, for run `run`."""
    return Claim(
        job=job,
        run=run,
        user=getpass.getuser(),
        clone=os.getcwd(),
        since=_now(),
        driver=Process.this(),
        **fields,
    )


SlurmQuery = Callable[[Claim], bool]


def slurm_holds_jobs_of(claim: Claim) -> bool:
    """Whether SLURM still holds a job that the run of `claim` submitted from its clone. A
    squeue that fails counts as yes: its jobs' fate is unknown; a host without squeue cannot
    tell, and goes by the heartbeat alone."""
    from cptlab.slurm import SlurmQueryError, queued_jobs

    if shutil.which("squeue") is None:
        return False
    try:
        return bool(queued_jobs(Path(claim.clone), user=claim.user))
    except SlurmQueryError:
        return True


def alive(claim: Claim, heartbeat_age: float, slurm: SlurmQuery = slurm_holds_jobs_of) -> bool:
    """Whether the owner of `claim` may still be working (module docstring)."""
    for process in filter(None, (claim.driver, claim.process)):
        if process.on_this_host():
            if process.exists():
                return True
        elif heartbeat_age < STALE_S:
            return True
    return claim.slurm and claim.process is None and slurm(claim)


class ClaimsFolder:
    """`results/<experiment>/claims/`: one file per claimed job."""

    def __init__(self, root: str | Path, slurm: SlurmQuery = slurm_holds_jobs_of) -> None:
        from cptlab.layout import Layout

        self.layout = Layout(root)
        self.folder = self.layout.claims_dir
        self.slurm = slurm

    def path(self, job: str) -> Path:
        return self.layout.claim_file(job)

    def read(self, job: str) -> tuple[Claim, str, float] | None:
        """(claim, its text, its heartbeat's age in seconds), or None when nobody claims `job`."""
        path = self.path(job)
        try:
            text = path.read_text()
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            return Claim.parse(text), text, age
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: not a claim ({err}); remove it if no run owns it") from None

    def holder(self, job: str) -> tuple[Claim, bool, str] | None:
        """(claim, alive, text) of `job`, or None."""
        found = self.read(job)
        if found is None:
            return None
        claim, text, age = found
        return claim, alive(claim, age, self.slurm), text

    def _temporary(self, path: Path) -> tuple[int, str]:
        """A private file beside `path`, its folder made first (a release may remove it between
        the two: try again)."""
        while True:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new")
            except FileNotFoundError:
                continue

    def create(self, claim: Claim) -> bool:
        """Claim `claim.job` unless someone does: link(2) of a private file, NFS-safe."""
        path = self.path(claim.job)
        fd, tmp = self._temporary(path)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(claim.text())
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, path)
            except OSError:
                pass  # EEXIST, or the lost reply of a link that worked: the link count says
            return os.stat(tmp).st_nlink == 2
        finally:
            os.unlink(tmp)

    def rewrite(self, claim: Claim) -> None:
        """Replace the claim of `claim.job` (a rename over it, atomic on NFS too)."""
        path = self.path(claim.job)
        fd, tmp = self._temporary(path)
        with os.fdopen(fd, "w") as handle:
            handle.write(claim.text())
        os.replace(tmp, path)

    def take_over(self, dead_text: str, claim: Claim) -> bool:
        """Replace the dead claim whose text is `dead_text` with `claim`: moved aside (a rename,
        which only one run can make), checked to be the one judged dead, then created anew."""
        path = self.path(claim.job)
        aside = path.with_name(f".{path.name}.{claim.run}.gone")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return self.create(claim)
        if aside.read_text() != dead_text:  # renewed between our look and the rename: put back
            try:
                os.link(aside, path)
            except FileExistsError:
                pass
            os.unlink(aside)
            return False
        os.unlink(aside)
        return self.create(claim)

    def release(self, job: str, run: str) -> bool:
        """Remove the claim of `job` if run `run` holds it."""
        found = self.read(job)
        if found is None or found[0].run != run:
            return False
        path = self.path(job)
        path.unlink(missing_ok=True)
        for folder in path.parents:  # the job's folders, emptied (claims/ itself stays)
            if folder == self.folder:
                break
            try:
                folder.rmdir()
            except OSError:  # not empty, or gone
                break
        return True

    def describe(self, job: str) -> str | None:
        """For a dry run: who claims `job`, or None."""
        held = self.holder(job)
        if held is None:
            return None
        claim, is_alive, _ = held
        state = "a run would wait for it" if is_alive else "its run is gone: a run would redo it"
        return f"{job} is claimed by the run of {claim.owner()}; {state}"

    def claims(self) -> list[tuple[Claim, bool]]:
        """Every claim in the folder, the planning one included, with whether it is alive."""
        found = []
        for path in sorted(self.folder.rglob("*.json")) if self.folder.is_dir() else []:
            job = path.relative_to(self.folder).with_suffix("").as_posix()
            held = self.holder(job)
            if held is not None:
                found.append(held[:2])
        return found


class Heartbeat:
    """A thread that touches the claims of this process every `interval` seconds."""

    def __init__(self, interval: float = HEARTBEAT_S) -> None:
        self.paths: set[Path] = set()
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="cptlab-claims", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def add(self, path: Path) -> None:
        with self._lock:
            self.paths.add(path)

    def discard(self, path: Path) -> None:
        with self._lock:
            self.paths.discard(path)

    def stop(self) -> None:
        self._stop.set()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                paths = list(self.paths)
            for path in paths:
                try:
                    os.utime(path)
                except FileNotFoundError:  # released
                    self.discard(path)
                except OSError:  # a file system that does not answer now: try again later
                    continue


class ClaimConflict(InputError):
    """A run that cannot go on beside another one (the line names the owner)."""


@dataclass(frozen=True)
class PlannedJob:
    """A job a run will execute: its id, its files (as its rule names them) and the outputs
    that were missing when it was planned."""

    job: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    missing: tuple[str, ...] = ()


@dataclass
class SharedRun:
    """This workflow run's side of the claims of its results folder (module docstring)."""

    root: Path
    slurm: bool = False
    say: Callable[[str], None] = _to_stderr
    poll_s: float = POLL_S
    sleep: Callable[[float], None] = time.sleep
    slurm_query: SlurmQuery = slurm_holds_jobs_of
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    held: set[str] = field(default_factory=set)
    config_text: str | None = None
    heartbeat: Heartbeat = field(default_factory=Heartbeat)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.folder = ClaimsFolder(self.root, self.slurm_query)
        self._waited: set[str] = set()
        self.heartbeat.start()

    # --- 1. planning alone --------------------------------------------------------------

    def plan(self, config_text: str) -> None:
        """Before planning: check that this run's config may join the folder, and, where
        another run works there, hold the planning claim while this run plans (a run alone in
        the folder writes nothing before its first job)."""
        self.config_text = config_text
        self._check_config()
        if self._live_foreign() is not None:
            self._hold_planning()
            self._check_config()

    def _hold_planning(self) -> None:
        """Take the planning claim, waiting (one line) while a live run holds it."""
        while not self._try_take(new_claim(PLANNING, self.run)):
            held = self.folder.holder(PLANNING)
            if held is not None and held[1] and PLANNING not in self._waited:
                self._waited.add(PLANNING)
                self.say(
                    f"cptlab: waiting for the run of {held[0].owner()} to finish planning "
                    f"in {self.root}"
                )
            self.sleep(self.poll_s)

    def _check_config(self) -> None:
        """config.json, which every job reads, must be this run's config while a live run
        works in the folder."""
        config = self.root / "config.json"
        if self.config_text is None or not config.is_file():
            return
        if config.read_text() != self.config_text:
            if (other := self._live_foreign()) is not None:
                self.release()
                raise ClaimConflict(
                    f"{config} holds another config than this run's, and the run of "
                    f"{other.owner()} works in {self.root}; wait for it to end, or run this "
                    "config under another experiment name"
                )

    def _try_take(self, claim: Claim) -> bool:
        """Create `claim`, or take it over from a dead owner."""
        if self.folder.create(claim):
            self._hold(claim.job)
            return True
        held = self.folder.holder(claim.job)
        if held is None:
            return self._try_take(claim)  # released meanwhile
        owner, is_alive, text = held
        if is_alive or not self.folder.take_over(text, claim):
            return False
        self._hold(claim.job)
        return True

    def _hold(self, job: str) -> None:
        self.held.add(job)
        self.heartbeat.add(self.folder.path(job))

    def _live_foreign(self) -> Claim | None:
        for claim, is_alive in self.folder.claims():
            if is_alive and claim.run != self.run:
                return claim
        return None

    # --- 2. waiting for claimed jobs while planning -------------------------------------

    def await_job(self, job: str) -> bool:
        """Wait until nobody alive claims `job`. True when a dead run's claim was found: the
        job's outputs are suspect and it must run again."""
        while (held := self.folder.holder(job)) is not None:
            claim, is_alive, _ = held
            if claim.run == self.run:
                return False
            if not is_alive:
                return True
            if job not in self._waited:
                self._waited.add(job)
                self.say(f"cptlab: waiting for {job}, which the run of {claim.owner()} is making")
            self.sleep(self.poll_s)
        return False

    # --- 3. claiming what this run executes ---------------------------------------------

    def claim(self, jobs: Iterable[PlannedJob]) -> None:
        """Claim every job this run will execute, taking over dead runs' claims (one line per
        dead run); raise ClaimConflict, releasing what it took, when it may not go on."""
        planned = sorted(jobs, key=lambda j: j.job)
        try:
            if PLANNING not in self.held:
                self._hold_planning()
                self._check_config()
            self._check_reruns(planned)
            taken_over: dict[str, tuple[Claim, list[str]]] = {}  # dead run -> its jobs
            for job in planned:
                claim = new_claim(
                    job.job,
                    self.run,
                    slurm=self.slurm,
                    inputs=self._inside(job.inputs),
                    outputs=self._inside(job.outputs),
                )
                before = self.folder.holder(job.job)
                if not self._try_take(claim):
                    owner = before[0].owner() if before else "another run"
                    raise ClaimConflict(
                        f"{job.job} is claimed by the run of {owner} since this run planned; "
                        "wait for it to end and run again"
                    )
                if before is not None and before[0].run != self.run:
                    taken_over.setdefault(before[0].run, (before[0], []))[1].append(job.job)
        except BaseException:
            self.release()
            raise
        for dead, names in taken_over.values():
            self.say(
                f"cptlab: taking over {len(names)} claim(s) of the run of {dead.owner()}, "
                f"which is gone: {', '.join(names)}"
            )

    def _inside(self, paths: Iterable[str]) -> tuple[str, ...]:
        """The paths inside the experiment's folder, relative to it (as every clone sees them)."""
        root = os.path.abspath(self.root)
        found = []
        for path in paths:
            full = os.path.abspath(path)
            if os.path.commonpath([root, full]) == root:
                found.append(os.path.relpath(full, root))
        return tuple(found)

    def _check_reruns(self, planned: list[PlannedJob]) -> None:
        """Stop when an output missing at planning time exists now (another run made it after
        this run looked: running the job would make it twice), and when a job whose outputs
        exist is rerun (its settings or code differ, or its inputs are newer) while it would
        replace a file that a live run's job reads."""
        for job in planned:
            if appeared := [path for path in job.missing if os.path.exists(path)]:
                raise ClaimConflict(
                    f"{appeared[0]} appeared while this run planned {job.job} (another run "
                    "made it); run the same command again"
                )
        read: dict[str, Claim] = {}
        for claim, is_alive in self.folder.claims():
            if is_alive and claim.run != self.run:
                read.update(dict.fromkeys(claim.inputs, claim))
        for job in planned:
            for output in self._inside(job.outputs):
                if output in read and (self.root / output).exists():
                    reader = read[output]
                    raise ClaimConflict(
                        f"rerunning {job.job} would replace {self.root / output}, which "
                        f"{reader.job} of the run of {reader.owner()} reads; wait for that "
                        "run to end"
                    )

    def planned(self) -> None:
        """Planning is over: let the next run plan."""
        if PLANNING in self.held:
            self.folder.release(PLANNING, self.run)
            self.heartbeat.discard(self.folder.path(PLANNING))
            self.held.discard(PLANNING)

    def release(self) -> None:
        """Release every claim this run still holds (its jobs released their own)."""
        for job in sorted(self.held):
            self.folder.release(job, self.run)
            self.heartbeat.discard(self.folder.path(job))
        self.held.clear()


# --- the job's side: `cptlab claimed` ------------------------------------------------------


def join_claim(folder: ClaimsFolder, job: str, run: str | None, say=_to_stderr) -> Claim:
    """Before the job's command runs: add this process to its run's claim of `job` (a run of
    its own, when there is none: the job started outside a workflow run, or its run is gone).
    Raise ClaimConflict when another live run holds it."""
    me = Process.this()
    held = folder.holder(job)
    if held is not None and run is not None and held[0].run == run:
        claim = replace(held[0], process=me)
        folder.rewrite(claim)
        return claim
    own = new_claim(job, uuid.uuid4().hex[:12], process=me)  # a run of its own
    if held is None and folder.create(own):
        return own
    held = folder.holder(job)
    if held is not None and not held[1] and folder.take_over(held[2], own):
        say(f"cptlab: took over the claim of {job} from the run of {held[0].owner()}, gone")
        return own
    owner = held[0].owner() if held else "another run"
    raise ClaimConflict(f"{job} is claimed by the run of {owner}; not running it twice")


def run_command(argv: list[str], log: Path) -> int:
    """Run `argv` with its output in `log`, passing on the signals that stop a job (SLURM's,
    Snakemake's); its exit status (128 + the signal's number when a signal ended it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as output:
        try:
            child = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        except FileNotFoundError as err:
            raise InputError(f"{argv[0]}: no such command") from err

    def pass_on(signum, frame):
        child.send_signal(signum)

    previous = {s: signal.signal(s, pass_on) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


@command(
    "claimed",
    "run a workflow job's command under its claim in results/<exp>/claims/, then commit its "
    "provenance and release the claim (how every workflow job starts)",
    arg("provenance", help="the job's staged provenance file: it names the results folder and job"),
    arg("--log", required=True, help="the job's log: its command's output"),
    arg("job_command", nargs=argparse.REMAINDER, help="-- and the job's command"),
)
def claimed(args: argparse.Namespace) -> None:
    from cptlab.provenance import commit, staged_job

    argv = args.job_command[1:] if args.job_command[:1] == ["--"] else args.job_command
    if not argv:
        raise InputError("cptlab claimed: no command after --")
    root, job = staged_job(args.provenance)
    folder = ClaimsFolder(root)
    run = os.environ.get(RUN_ENV)
    claim = join_claim(folder, job, run)
    heartbeat = Heartbeat().start()
    heartbeat.add(folder.path(job))
    try:
        code = run_command(argv, Path(args.log))
    finally:
        heartbeat.stop()
    if code == 0:
        commit(args.provenance)
    if code == 0 or claim.run != run:
        folder.release(job, claim.run)  # else its run keeps it, for a retry
    if code != 0:
        raise SystemExit(code)
