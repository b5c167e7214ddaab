"""`snakemake --cores all --profile slurm` on a real SLURM: the smoke workflow end to end, the
paper config's requests on the scheduler, GPU jobs under each lock's executor plugin, and
failures drilled there.

Opt-in (`make test-slurm`, marker `slurm`; CI runs it). The module starts a single-node
cluster with slurm/cluster.sh (Debian's SLURM 22.05 with accounting, root needed) and stops it
afterwards unless it was running before. Every SLURM run charges the cluster's account, filled
into the profile's default-resources as a site fills in its own.

Two drivers run Snakemake and the executor plugin: this venv (envs/requirements.txt, plugin
2.8.0) and the GPU lock's (envs/requirements-gpu.txt, plugin 2.6.1, what README's cluster steps
install; `make gpu-driver`, its path in CPTLAB_GPU_DRIVER). Jobs run this venv's programs under
either.

- The smoke config as a user types it, with the profile and without it: every job ran once as
  a SLURM job, with the resources of the config as accounting recorded them; scores.csv and the
  stage weights are the local run's; the same command again has nothing to do.
- The paper config: each rule's sbatch line, as each driver's plugin builds it, passes
  `sbatch --test-only` on the node's 8 stand-in H100s, and each GPU rule's line is pinned; so
  are the plugin's GPU conventions.
- The GPU drill, under each driver: a training stage on 2 GPUs under its launcher and its
  evaluation on 1, every program they start behind a probe (tests/slurm_gpu_probe.py): each
  command runs once, its launcher starts 2 processes, the job's environment holds its GPUs,
  accounting shows one task.
- Five drills on stages of SFT (its weights move, unlike the smoke config's RL stages, whose
  zero rewards leave them as they were), four against one uninterrupted local run: scancel of a
  training job; a training job past its time limit; the Snakemake controller killed with -9
  while its jobs are queued and running, then the same command again; the accounting database
  stopped while a job runs; and, last and alone, slurmctld stopped while a job runs.
- Two drivers, in two clones that share one results folder (a symlink), each running one chain
  of the smoke config through the profile: no job is submitted twice (cptlab.claims), and the
  stages and evaluations are the local run's.

The long runs overlap (fixture `runs`): the two smoke runs start together, and the drills as
soon as the local one has made their data and base. The SLURM run leaves the CPUs idle while
the plugin waits between status checks, and the drills' jobs queue beside its jobs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflow_helpers import (
    BIN,
    ROOT,
    TWO_PROCESSES,
    copy_workflow,
    dry_run_jobs,
    planned_jobs,
    snakemake,
)

from cptlab.layout import Layout
from cptlab.resources import launcher_processes, snakemake_resources
from cptlab.slurm import queued_jobs

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

CLUSTER = ROOT / "slurm" / "cluster.sh"
ACCOUNT = "cptlab"  # slurm/cluster.sh's ACCOUNT
# Snakemake and the executor plugin of each lock (the folder of their scripts), and the lock.
DRIVERS = {
    "cpu-lock": BIN,
    "gpu-lock": Path(os.environ.get("CPTLAB_GPU_DRIVER", ROOT / ".venv-gpu-driver")) / "bin",
}
LOCKS = {
    "cpu-lock": ROOT / "envs" / "requirements.txt",
    "gpu-lock": ROOT / "envs" / "requirements-gpu.txt",
}
SBATCH_LINES = Path(__file__).parent / "slurm_sbatch_lines.py"
PROBE = Path(__file__).parent / "slurm_gpu_probe.py"
SMOKE = "config/smoke.yaml"
PROFILE = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
ON_SLURM = ("--cores", "all", "--profile", "slurm")
# The rule kind whose `resources:` entry each rule reads (workflow/rules/*.smk); the other
# rules (data, tables, figures) take the profile's default-resources and one thread.
RULE_KINDS = {
    "build_base": "build_base",
    "train_stage": "train",
    "evaluate_base": "evaluate",
    "evaluate_stage": "evaluate",
    "evaluate_base_shard": "evaluate",
    "evaluate_stage_shard": "evaluate",
    "evaluate_within_stage": "evaluate",
    "drift_base": "drift",
    "drift_chain": "drift",
    "dataset_distance": "drift",
}

DRILL = "drill.yaml"
DRILL_CONFIG = """\
extends: config/smoke.yaml
experiment: drill
run: {sequence: [math], methods: [sft], seeds: [0, 1]}
methods: {sft: {trainer: sft, training: {learning_rate: 1.0e-3}}}
training: {steps: 40, save_steps: 5}
evaluation: {within_stage: null}  # the stage ends: what a drill interrupts and compares
"""
# The timeout drill's training jobs may run one minute (two on the retry). They go to the
# partition of the node's declared 64 CPUs, so that the stalled one does not hold one of the
# two CPUs for which the other runs' jobs queue.
TIMEOUT_DRILL = "drill_timeout.yaml"
TIMEOUT_CONFIG = "extends: drill.yaml\nresources: {train: {runtime: 1, slurm_partition: gpu}}\n"
LAYOUT = Layout(Path("results/drill"))
STAGES = [LAYOUT.stage_manifest("sft", seed, 1, "math") for seed in (0, 1)]
STATE = LAYOUT.state_dir("sft", 0, 1, "math")
EVALUATIONS = [LAYOUT.eval_file("math_id"), LAYOUT.eval_file("math_id", "sft", 0, 1)]
# Two stages and the base's evaluation are ready at once (one waits: the node has 2 CPUs),
# and an evaluation of the first stage comes after it.
DRILL_TARGETS = [*STAGES, *EVALUATIONS]
# The GPU drill: the first stage trains on 2 GPUs, 2 processes under the launcher (on the CPUs,
# as tests/test_multiprocess.py runs them), and its evaluation asks for 1 GPU. The jobs go to
# the default partition, where they queue for the real CPUs.
GPU_DRILL = "drill_gpu.yaml"
GPU_RESOURCES = {
    "train": {"gpu": 2, "cpus_per_gpu": 1, "launcher": TWO_PROCESSES},
    "evaluate": {"gpu": 1, "cpus_per_gpu": 1},
}
GPU_DRILL_CONFIG = yaml.safe_dump(
    {"extends": DRILL, "training": {"steps": 4, "save_steps": 2}, "resources": GPU_RESOURCES}
)
GPU_TARGETS = [STAGES[0], EVALUATIONS[1]]
PROBED = "probed.jsonl"  # what the probe saw, one line per program started
# Each GPU job's rule: its rule kind, and the program and first argument of its command.
GPU_JOBS = {
    "train_stage": ("train", ["accelerate", "launch"]),
    "evaluate_stage": ("evaluate", ["cptlab", "evaluate-checkpoint"]),
}
# Far longer than any run takes here (the SLURM smoke run: 384 s beside the drills, 605 s on
# a machine loaded by other work), so that a silent wait fails the test instead of hanging.
RUN_BOUND_S = 1200


def environment() -> dict[str, str]:
    """The caller's environment, this venv first on PATH (the jobs' programs, whichever driver
    runs Snakemake), one thread per torch process, and no SLURM_* variables (a test run inside
    a SLURM job would pass its job's to every job)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return {**env, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}


def with_site_account(workdir: Path) -> Path:
    """The workflow in `workdir` with the cluster's account in its SLURM profile's
    default-resources, as the profile's comment asks a site to give its own (without one the
    executor plugin guesses, and warns)."""
    profile = workdir / "slurm" / "config.yaml"
    text = profile.read_text()
    assert "\ndefault-resources:\n" in text, text
    profile.write_text(
        text.replace(
            "\ndefault-resources:\n", f"\ndefault-resources:\n  slurm_account: {ACCOUNT}\n"
        )
    )
    return workdir


def command(*argv: str | Path) -> str:
    """Run a command; its stdout, or a failure naming the command and its stderr."""
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}: {done.stdout}{done.stderr}"
    return done.stdout


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    condition: Callable[[], Any], what: str, timeout: float = 600, run=None, poll: float = 0.05
) -> Any:
    """Poll `condition` until it returns something true, and return that; fail naming `what`
    after `timeout` seconds, or as soon as `run` has ended."""
    end = time.monotonic() + timeout
    while not (value := condition()):
        if run is not None and run.process.poll() is not None:
            pytest.fail(f"the run ended before {what}:\n{tail(run.log)}")
        assert time.monotonic() < end, f"{what} did not happen within {timeout} s"
        time.sleep(poll)
    return value


class Run:
    """`snakemake ARGS` in WORKDIR, in the background and in a session of its own (a drill
    kills it with all its children), its output in a log file beside the workflow."""

    started: list[Run] = []  # every run of the module, stopped at its end

    def __init__(
        self, workdir: Path, *args: str | Path, driver: Path = BIN, env: dict | None = None
    ) -> None:
        """`driver`: the folder of the Snakemake to run (DRIVERS); `env`: added to
        environment()."""
        self.workdir = workdir
        self.log_path = workdir / f"snakemake-{time.monotonic_ns()}.log"
        self.began = time.monotonic()
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [str(driver / "snakemake"), *map(str, args)],
                cwd=workdir,
                env={**environment(), **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        Run.started.append(self)

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def finish(self, timeout: float = RUN_BOUND_S) -> str:
        """Wait for the run; fail unless it succeeded within `timeout` seconds. Its log."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"snakemake ran over {timeout} s in {self.workdir}:\n{tail(self.log)}")
        self.seconds = time.monotonic() - self.began
        assert code == 0, f"snakemake failed ({code}) in {self.workdir}:\n{tail(self.log)}"
        return self.log

    def kill(self) -> None:
        """kill -9 of Snakemake and its children (its SLURM jobs run on without it)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGINT, on which Snakemake cancels its SLURM jobs (SIGTERM would wait for them)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def cluster():
    """The single-node cluster, running; stopped at the end if this module started it."""
    was_running = subprocess.run([CLUSTER, "status"], capture_output=True).returncode == 0
    command(CLUSTER, "start")
    yield
    for run in Run.started:  # what a failed test left running
        run.stop()
        jobs = queued_jobs(run.workdir)
        if jobs:
            subprocess.run(["scancel", *(job.jobid for job in jobs)], check=False)
    if not was_running:
        command(CLUSTER, "stop")


# --- what SLURM recorded ----------------------------------------------------------------------

SACCT_FIELDS = ("JobIDRaw", "JobName", "Comment", "State", "TimelimitRaw", "ReqTRES", "WorkDir")
# The plugin's jobs of a killed run may still be in the queue: the accounting of a folder is
# read once every job there has ended.
ENDED = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def accounting(workdir: Path, count: int, timeout: float = 600) -> list[dict[str, str]]:
    """The jobs submitted from `workdir` as accounting recorded them, in submission order,
    once it lists `count` of them, all ended. slurmctld sends a job's record when it ends, and
    keeps them while slurmdbd is down (the accounting drill stops it for a while)."""
    query = ["sacct", "-X", "--parsable2", "--noheader", "--starttime=now-1days"]
    query.append(f"--format={','.join(SACCT_FIELDS)}")

    def ended_jobs() -> list[dict[str, str]] | None:
        done = subprocess.run(query, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:  # slurmdbd is down
            return None
        jobs = [
            dict(zip(SACCT_FIELDS, line.split("|"), strict=True))
            for line in done.stdout.splitlines()
        ]
        here = [job for job in jobs if Path(job["WorkDir"]).resolve() == workdir.resolve()]
        ended = len(here) >= count and all(job["State"].startswith(ENDED) for job in here)
        return sorted(here, key=lambda job: int(job["JobIDRaw"])) if ended else None

    what = f"accounting of {count} ended jobs from {workdir}"
    return wait_until(ended_jobs, what, timeout, poll=1)


def rule_of(job: dict[str, str]) -> str:
    """The rule of a job, from the comment the plugin gives it (rule_<rule>_wildcards_...)."""
    return job["Comment"].removeprefix("rule_").partition("_wildcards_")[0]


def requested(job: dict[str, str]) -> dict[str, Any]:
    """A job's CPUs, memory (MB), GPUs and time limit (min), as SLURM recorded its request."""
    tres = dict(item.split("=", 1) for item in job["ReqTRES"].split(",") if item)
    value, unit = re.fullmatch(r"([\d.]+)([MGT])", tres["mem"]).groups()
    return {
        "cpus": int(tres["cpu"]),
        "mem_mb": round(float(value) * {"M": 1, "G": 1024, "T": 1024**2}[unit]),
        "gpus": int(tres.get("gres/gpu", 0)),
        "runtime": int(job["TimelimitRaw"]),
    }


# --- the smoke config, with and without the profile -------------------------------------------


@dataclass
class Runs:
    """The module's long runs, started so that they overlap."""

    plan: Counter  # the smoke config's jobs per rule, the default target (a local rule) aside
    local: Run  # the smoke config without the profile
    on_slurm: Run  # and with it
    drills: dict[str, Future]  # each drill's outcome, and the uninterrupted reference's
    drills_began: float  # time.monotonic() when they were started
    template: Path  # the drills' workflow, with the data and base of the local run
    shared: Future  # the two drivers on one results folder (SharedDrivers)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory) -> Iterator[Runs]:
    """The smoke config with and without the profile, at once; as soon as the local run has
    made the data and base the drills need, the drills and their reference, all at once and
    each in a copy of the drill workflow. The SLURM run leaves the CPUs idle while the
    executor plugin waits between status checks; the drills' jobs queue beside its jobs, as on
    a busy cluster; the timeout drill's stalled job mostly waits out its time limit."""
    plan = planned_jobs(copy_workflow(tmp_path_factory.mktemp("plan")), "--configfile", SMOKE)
    assert plan.pop("all") == 1
    local_dir = copy_workflow(tmp_path_factory.mktemp("local"))
    slurm_dir = with_site_account(copy_workflow(tmp_path_factory.mktemp("slurm")))
    local = Run(local_dir, "--cores", "all", "--configfile", SMOKE)
    on_slurm = Run(slurm_dir, *ON_SLURM, "--configfile", SMOKE)
    local.finish()
    template = drill_workflow(local.workdir, tmp_path_factory.mktemp("drill_template"))
    drill_runs = {
        "reference": reference_run,
        "timeout": timeout_drill,
        "cancel": cancel_drill,
        "accounting": accounting_drill,
        "controller": controller_drill,
        **{f"gpu {driver}": partial(gpu_drill, driver=driver) for driver in DRIVERS},
    }
    pool = ThreadPoolExecutor(max_workers=len(drill_runs) + 1)
    began, drills = time.monotonic(), {}
    for name, drill in drill_runs.items():
        work = tmp_path_factory.mktemp(name.replace(" ", "_")) / "workflow"
        drills[name] = pool.submit(drill, shutil.copytree(template, work, symlinks=True))
    shared = pool.submit(two_drivers, tmp_path_factory.mktemp("shared"))
    yield Runs(plan, local, on_slurm, drills, began, template, shared)
    pool.shutdown(wait=True)


@dataclass
class Smoke:
    local: Path
    on_slurm: Path
    plan: Counter
    run: Run  # the SLURM run
    jobs: list[dict[str, str]]  # its jobs, as accounting recorded them


@pytest.fixture(scope="module")
def smoke(runs) -> Smoke:
    runs.on_slurm.finish()
    jobs = accounting(runs.on_slurm.workdir, count=runs.plan.total())
    print(
        f"smoke: {len(jobs)} SLURM jobs, {runs.on_slurm.seconds:.0f} s through SLURM, "
        f"{runs.local.seconds:.0f} s locally (both at once, then beside the drills)"
    )
    run_id = re.search(r"SLURM run ID: (\S+)", runs.on_slurm.log)[1]
    assert {job["JobName"] for job in jobs} == {run_id}
    return Smoke(runs.local.workdir, runs.on_slurm.workdir, runs.plan, runs.on_slurm, jobs)


def test_every_job_ran_once_as_a_slurm_job(smoke):
    assert Counter(rule_of(job) for job in smoke.jobs) == smoke.plan
    assert len({job["Comment"] for job in smoke.jobs}) == len(smoke.jobs)  # none twice
    assert {job["State"] for job in smoke.jobs} == {"COMPLETED"}
    assert re.findall(r"^localrule (\w+):", smoke.run.log, re.MULTILINE) == ["all"]


def test_each_jobs_resources_as_slurm_recorded_them_are_the_configs(smoke):
    config = yaml.safe_load((ROOT / SMOKE).read_text())["resources"]
    defaults = {**PROFILE["default-resources"], "threads": 1}
    for job in smoke.jobs:
        spec = config[RULE_KINDS[rule_of(job)]] if rule_of(job) in RULE_KINDS else defaults
        expected = {
            "cpus": spec["threads"],
            "mem_mb": spec["mem_mb"],
            "gpus": spec.get("gpu", 0),
            "runtime": spec["runtime"],
        }
        assert requested(job) == expected, job


def test_scores_and_stage_weights_are_the_local_runs(smoke):
    results = Path("results/smoke")
    scores = results / "scores.csv"
    assert (smoke.on_slurm / scores).read_bytes() == (smoke.local / scores).read_bytes()
    weights = sorted((smoke.local / results / "runs").rglob("model.safetensors"))
    assert len(weights) == 8  # two methods, two stages, each with its within-stage checkpoint
    for path in weights:
        on_slurm = smoke.on_slurm / path.relative_to(smoke.local)
        assert on_slurm.read_bytes() == path.read_bytes(), path


def test_the_same_command_again_has_nothing_to_do(smoke):
    again = Run(smoke.on_slurm, *ON_SLURM, "--configfile", SMOKE).finish(timeout=300)
    assert "Nothing to be done" in again
    assert "has been submitted" not in again
    assert len(accounting(smoke.on_slurm, count=len(smoke.jobs))) == len(smoke.jobs)


# What the profile's settings and the site's account avoid, as the plugin words it.
AVOIDABLE_WARNINGS = (
    "MinJobAge",  # squeue as the status command with a short MinJobAge
    "Falling back to 'sacct'",
    "should work reliably",  # sacct chosen where squeue would do
    "No wall time information",
    "No job memory information",
    "Unable to get the status",
    "No partition was given",
    "No SLURM account given",  # the account guess, and its failure
    "Unable to guess SLURM account",
    "invalid option",
)


def avoidable_warnings(log: str) -> list[str]:
    return [warning for warning in AVOIDABLE_WARNINGS if warning in log]


def test_the_profile_avoids_the_plugins_avoidable_warnings(smoke):
    assert avoidable_warnings(smoke.run.log) == []


# --- the paper config's requests on the scheduler ---------------------------------------------


def driver_path(driver: str) -> Path:
    """The folder of `driver`'s scripts; a failure that names how to build it if missing."""
    folder = DRIVERS[driver]
    assert (folder / "snakemake").exists(), f"no {driver} driver in {folder}: make gpu-driver"
    return folder


def sbatch_lines(driver: str, jobs: dict[str, dict], workdir: Path) -> dict[str, str]:
    """The sbatch line that `driver`'s executor plugin builds for each job (name -> {rule,
    threads, resources}), with its own functions (tests/slurm_sbatch_lines.py)."""
    request = json.dumps({"workdir": str(workdir), "jobs": jobs})
    done = subprocess.run(
        [driver_path(driver) / "python", SBATCH_LINES],
        input=request,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def scheduler_verdict(line: str) -> str:
    """slurmctld's verdict on an sbatch line: "Job ... to start at ..." or its refusal."""
    done = subprocess.run(
        f"{line} --test-only --wrap=true", shell=True, capture_output=True, text=True, timeout=60
    )
    return (done.stdout + done.stderr).strip()


def accepted(verdict: str) -> bool:
    return re.search(r"Job \d+ to start at \S+ using \d+ processors", verdict) is not None


PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
PAPER_RULES = {
    "prepare_data", "train_stage", "evaluate_base", "evaluate_stage", "evaluate_base_shard",
    "evaluate_stage_shard", "evaluate_within_stage", "merge_shards_base", "merge_shards_stage",
    "drift_base", "drift_chain", "dataset_distance", "aggregate", "findings", "figures",
    "drift_figures",
}  # fmt: skip


DRIVER_PACKAGES = (
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "snakemake-executor-plugin-slurm-jobstep",
)
VERSIONS = "import importlib.metadata as m, sys; print(*(m.version(p) for p in sys.argv[1:]))"


@pytest.mark.parametrize("driver", DRIVERS)
def test_each_driver_runs_its_locks_snakemake_and_executor_plugin(driver):
    lock = dict(re.findall(r"^([\w.-]+)==(\S+)$", LOCKS[driver].read_text(), re.M))
    installed = command(driver_path(driver) / "python", "-c", VERSIONS, *DRIVER_PACKAGES).split()
    assert dict(zip(DRIVER_PACKAGES, installed, strict=True)) == {
        p: lock[p] for p in DRIVER_PACKAGES
    }


@pytest.fixture(scope="module")
def paper_jobs(tmp_path_factory) -> dict[str, Any]:
    """The first job of each rule of the paper config's dry run through the profile (rule ->
    {rule, threads, resources}), and the workflow folder."""
    work = copy_workflow(tmp_path_factory.mktemp("paper"))
    done = snakemake(work, "-n", *ON_SLURM, "--configfile", "config/paper.yaml", env=environment())
    assert done.returncode == 0, tail(done.stdout + done.stderr)
    jobs: dict[str, dict] = {}
    for job in dry_run_jobs(done.stdout + done.stderr):
        if job["rule"] != "all":
            jobs.setdefault(
                job["rule"], {key: job[key] for key in ("rule", "threads", "resources")}
            )
    assert set(jobs) == PAPER_RULES
    return {"jobs": jobs, "workdir": work}


@pytest.mark.parametrize("driver", DRIVERS)
def test_each_paper_rule_passes_sbatch_test_only(cluster, paper_jobs, driver):
    lines = sbatch_lines(driver, paper_jobs["jobs"], paper_jobs["workdir"])
    verdicts = {rule: scheduler_verdict(line) for rule, line in lines.items()}
    print(f"sbatch --test-only of the paper config ({driver}):", json.dumps(verdicts, indent=1))
    assert all(accepted(v) for v in verdicts.values()), verdicts
    for rule, kind in RULE_KINDS.items():
        if rule in lines:  # the paper config names a base: no build_base
            spec = PAPER["resources"][kind]
            cpus = spec["gpu"] * spec["cpus_per_gpu"]
            assert f"using {cpus} processors" in verdicts[rule], (rule, verdicts[rule])
            assert "in partition gpu" in verdicts[rule], (rule, verdicts[rule])
    assert all("in partition cpu" in verdicts[r] for r in lines if r not in RULE_KINDS)


@pytest.mark.parametrize("driver", DRIVERS)
def test_each_gpu_rules_sbatch_line_is_pinned(paper_jobs, driver):
    """Under each lock's plugin, each GPU rule of the paper config asks for its GPUs and CPUs
    per GPU as the config says, one task (no --ntasks, no --ntasks-per-gpu), no GPU binding,
    and nothing else but its partition, time and memory."""
    work = paper_jobs["workdir"]
    gpu_jobs = {rule: job for rule, job in paper_jobs["jobs"].items() if rule in RULE_KINDS}
    assert set(gpu_jobs) == set(RULE_KINDS) - {"build_base"}
    lines = sbatch_lines(driver, gpu_jobs, work)
    print(f"sbatch lines of the paper config's GPU rules ({driver}):", json.dumps(lines, indent=1))
    for rule, line in lines.items():
        spec = PAPER["resources"][RULE_KINDS[rule]]
        assert shlex.split(line) == [
            "sbatch", "--parsable", "--job-name", "test-only", "--output", f"{work}/%j.log",
            "--export=ALL", "--comment", f"rule_{rule}", "-p", spec["slurm_partition"],
            "-t", str(spec["runtime"]), "--mem", str(spec["mem_mb"]),
            f"--cpus-per-gpu={spec['cpus_per_gpu']}", "-D", str(work), f"--gpus={spec['gpu']}",
        ], (driver, rule, line)  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_plugins_gpu_conventions_on_the_scheduler(cluster, tmp_path, driver):
    """The config's `gpu` becomes `--gpus=N` with `--cpus-per-gpu`, and `gpu_model` a typed
    request, `--gpus=<model>:N`: the node's H100s take it, another model is refused, and so
    is a ninth GPU. (`tasks`, which the plugin turns into --ntasks-per-gpu for GPU jobs, and
    `slurm_extra` are not resources keys of the config: tests/test_slurm_profile.py.)"""

    def job(**train: Any) -> dict:
        config = {"resources": {"train": {**PAPER["resources"]["train"], **train}}}
        resources = snakemake_resources(config, "train")
        resources["runtime"] = resources["runtime"](None, 1)  # the first attempt
        return {"rule": "train_stage", "threads": 8, "resources": resources}

    jobs = {"plain": job(), "h100": job(gpu_model="h100"), "a100": job(gpu_model="a100")}
    lines = sbatch_lines(driver, {**jobs, "nine": job(gpu=9)}, tmp_path)
    plain, h100 = lines["plain"], lines["h100"]
    assert " --gpus=8" in plain and " --cpus-per-gpu=8" in plain
    assert "--cpus-per-task" not in plain and "--ntasks" not in plain
    assert " --gpus=h100:8" in h100
    assert accepted(scheduler_verdict(plain)) and accepted(scheduler_verdict(h100))
    refused = "Requested node configuration is not available"
    assert refused in scheduler_verdict(lines["a100"])
    assert refused in scheduler_verdict(lines["nine"])


# --- drills -----------------------------------------------------------------------------------


def drill_workflow(smoke_run: Path, folder: Path) -> Path:
    """The drill experiment's workflow in `folder`, with the data and base of a finished smoke
    run (the same settings make the same data and base)."""
    template = with_site_account(copy_workflow(folder))
    (template / DRILL).write_text(DRILL_CONFIG)
    (template / TIMEOUT_DRILL).write_text(TIMEOUT_CONFIG)
    (template / GPU_DRILL).write_text(GPU_DRILL_CONFIG)
    for part in ("data", "base", "provenance/data", "provenance/base.json"):
        source, dest = smoke_run / "results" / "smoke" / part, template / LAYOUT.root / part
        if source.is_dir():
            shutil.copytree(source, dest, symlinks=True)  # keeps modification times
        else:
            shutil.copy2(source, dest)
    planned = planned_jobs(template, *map(str, DRILL_TARGETS), "--configfile", DRILL)
    assert planned == Counter(train_stage=2, evaluate_base=1, evaluate_stage=1), planned
    return template


@dataclass
class Drill:
    workdir: Path
    log: str  # the command's log (the second one's, where it ran twice)
    notes: dict[str, Any] = field(default_factory=dict)


def reference_run(work: Path) -> Drill:
    """The drill targets without interruption, locally."""
    return Drill(work, Run(work, *DRILL_TARGETS, "--cores", "all", "--configfile", DRILL).finish())


def checkpointed(work: Path) -> bool:
    """Whether the first stage has saved a checkpoint (every 5 of its 40 steps)."""
    return any((work / STATE).glob("checkpoint-*/trainer_state.json"))


def train_job(work: Path) -> str:
    """The SLURM id of the running training job submitted from `work`."""
    jobs = [j for j in queued_jobs(work) if j.comment.startswith("rule_train_stage")]
    return jobs[0].jobid if jobs and jobs[0].state == "RUNNING" else ""


def cancel_drill(work: Path) -> Drill:
    """scancel of the training job once it has saved its first checkpoint."""
    run = Run(work, STAGES[0], *ON_SLURM, "--configfile", DRILL)
    jobid = wait_until(lambda: train_job(work), "the training job's start", run=run, poll=0.2)
    wait_until(lambda: checkpointed(work), "the first checkpoint", run=run)
    command("scancel", jobid)
    return Drill(work, run.finish())


def timeout_drill(work: Path) -> Drill:
    """The training process stops after its first checkpoint (SIGSTOP, as in a hung
    collective), so that its job runs past its one-minute time limit."""
    run = Run(work, STAGES[0], *ON_SLURM, "--configfile", TIMEOUT_DRILL)
    wait_until(lambda: checkpointed(work), "the first checkpoint", run=run)
    stopped = [pid for pid in processes_in(work) if b"train-stage" in cmdline(pid)]
    assert stopped, "no training process found"
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    return Drill(work, run.finish())


def processes_in(folder: Path) -> list[int]:
    """The processes whose working directory is `folder` (a SLURM job's is its -D)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(os.readlink(f"/proc/{entry}/cwd")) == folder.resolve():
                pids.append(int(entry))
        except OSError:  # ended meanwhile
            continue
    return pids


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def controller_drill(work: Path) -> Drill:
    """kill -9 of the Snakemake controller while its jobs are queued and running, then the
    same command again."""
    args = (*DRILL_TARGETS, *ON_SLURM, "--configfile", DRILL)
    run = Run(work, *args)

    def queued_and_running() -> bool:
        return {"PENDING", "RUNNING"} <= {job.state for job in queued_jobs(work)}

    wait_until(queued_and_running, "a job queued beside a running one", run=run, poll=0.2)
    run.kill()
    left = [job.describe() for job in queued_jobs(work)]
    return Drill(work, Run(work, *args).finish(), {"left": left})


def accounting_drill(work: Path) -> Drill:
    """slurmdbd and its database stopped while a job runs; started again afterwards."""
    run = Run(work, STAGES[0], EVALUATIONS[1], *ON_SLURM, "--configfile", DRILL)
    try:
        wait_until(lambda: train_job(work), "the training job's start", run=run, poll=0.2)
        command(CLUSTER, "stop", "slurmdbd", "mariadbd")
        return Drill(work, run.finish())
    finally:
        command(CLUSTER, "start")


def gpu_drill(work: Path, driver: str) -> Drill:
    """The GPU drill's jobs through the profile, Snakemake and the executor plugin of `driver`;
    the programs their commands start (accelerate, cptlab) each behind the probe."""
    probes = work / "probes"
    probes.mkdir()
    for program in ("accelerate", "cptlab"):
        probe = probes / program
        probe.write_text(f'#!/bin/sh\nexec {sys.executable} -S -E {PROBE} {BIN / program} "$@"\n')
        probe.chmod(0o755)
    env = {"PATH": f"{probes}:{BIN}:{os.environ['PATH']}", "GPU_PROBE_LOG": str(work / PROBED)}
    args = (*GPU_TARGETS, *ON_SLURM, "--configfile", GPU_DRILL)
    return Drill(work, Run(work, *args, driver=driver_path(driver), env=env).finish())


@pytest.fixture(scope="module")
def drills(runs) -> dict[str, Future]:
    """The drills' outcomes, once all have ended: each test takes its own (or its failure)."""
    wait(runs.drills.values())
    print(f"drills: all ended {time.monotonic() - runs.drills_began:.0f} s after they started")
    return runs.drills


def assert_same_results(drill: Drill, reference: Drill, outputs: list[Path]) -> None:
    """Each stage's weights and each evaluation (less its timing and its process's memory)
    equal the reference's."""

    def same_bytes(path: Path) -> bool:
        return (drill.workdir / path).read_bytes() == (reference.workdir / path).read_bytes()

    def record(workdir: Path, path: Path) -> dict:
        evaluation = json.loads((workdir / path).read_text())
        return {k: v for k, v in evaluation.items() if k not in ("seconds", "memory")}

    for path in outputs:
        if path.name == "manifest.json":  # a stage
            weights = path.with_name("model.safetensors")
            assert same_bytes(weights), f"{weights} differs from the uninterrupted run's"
        else:  # an evaluation
            assert record(drill.workdir, path) == record(reference.workdir, path), path
            responses = path.with_suffix(".responses.jsonl")
            assert same_bytes(responses), f"{responses} differs from the uninterrupted run's"


def resumed_stage(drill: Drill) -> dict:
    manifest = json.loads((drill.workdir / STAGES[0]).read_text())
    assert manifest["resumed_from"] is not None, "the retry started over instead of resuming"
    assert manifest["steps_done"] == 40
    return manifest


def test_a_cancelled_training_job_is_retried_and_resumes_to_the_same_weights(drills):
    drill, reference = drills["cancel"].result(), drills["reference"].result()
    tries = accounting(drill.workdir, count=2)
    assert [(rule_of(j), j["State"].split()[0]) for j in tries] == [
        ("train_stage", "CANCELLED"),
        ("train_stage", "COMPLETED"),
    ]
    resumed_stage(drill)
    assert_same_results(drill, reference, [STAGES[0]])


def test_a_job_past_its_time_limit_is_retried_with_a_longer_one(drills):
    drill, reference = drills["timeout"].result(), drills["reference"].result()
    tries = accounting(drill.workdir, count=2)
    limits = [(job["State"], job["TimelimitRaw"]) for job in tries]
    assert limits == [("TIMEOUT", "1"), ("COMPLETED", "2")]  # minutes
    resumed_stage(drill)
    assert_same_results(drill, reference, [STAGES[0]])


def test_the_controller_killed_with_9_then_again_submits_no_job_twice(drills):
    drill, reference = drills["controller"].result(), drills["reference"].result()
    assert drill.notes["left"], "no job outlived the killed controller"
    assert "of a killed run of this workflow are still queued or running" in drill.log
    jobs = accounting(drill.workdir, count=len(DRILL_TARGETS))
    assert len(jobs) == len(DRILL_TARGETS), [j["Comment"] for j in jobs]
    assert len({j["Comment"] for j in jobs}) == len(jobs)  # none twice
    assert {j["State"] for j in jobs} == {"COMPLETED"}
    assert_same_results(drill, reference, DRILL_TARGETS)


def test_the_accounting_database_stopped_mid_run_does_not_stop_the_workflow(drills):
    drill, reference = drills["accounting"].result(), drills["reference"].result()
    jobs = accounting(drill.workdir, count=2)
    assert [(rule_of(j), j["State"]) for j in jobs] == [
        ("train_stage", "COMPLETED"),
        ("evaluate_stage", "COMPLETED"),
    ]
    assert_same_results(drill, reference, [STAGES[0], EVALUATIONS[1]])


# --- GPU jobs under each lock's executor plugin -----------------------------------------------


def job_steps(jobid: str) -> dict[str, Any]:
    """Job `jobid` as accounting recorded it: its allocation (AllocTRES, SubmitLine) and each
    step's task count (step name -> NTasks: "batch", "0", ...)."""
    query = ["sacct", "-j", jobid, "--parsable2", "--noheader"]
    lines = command(*query, "--format=JobIDRaw,NTasks,AllocTRES,SubmitLine").splitlines()
    record: dict[str, Any] = {"steps": {}}
    for line in lines:
        step, tasks, tres, submitted = line.split("|", 3)
        if step == jobid:
            record.update(tres=dict(t.split("=", 1) for t in tres.split(",") if t), line=submitted)
        else:
            record["steps"][step.removeprefix(f"{jobid}.")] = tasks
    return record


def gpu_job_counts(drill: Drill) -> dict[str, dict[str, Any]]:
    """For each GPU job of a GPU drill: how often its rule's command ran, the processes its
    launcher started, its tasks and GPUs as the job's environment, its command's environment
    and accounting give them."""
    probed = [json.loads(line) for line in (drill.workdir / PROBED).read_text().splitlines()]
    manifest = json.loads((drill.workdir / STAGES[0]).read_text())
    counts = {}
    for job in accounting(drill.workdir, count=len(GPU_TARGETS)):
        jobid, rule = job["JobIDRaw"], rule_of(job)
        program_and_argument = GPU_JOBS[rule][1]
        runs = [
            r
            for r in probed
            if r["command_env"].get("SLURM_JOB_ID") == jobid
            and [r["program"], *r["args"][:1]] == program_and_argument
        ]
        recorded = job_steps(jobid)
        first = runs[0] if runs else {"job_env": {}, "command_env": {}}
        job_env, command_env = first["job_env"] or {}, first["command_env"]
        sbatch_options = recorded["line"].split(" --wrap")[0].split()
        counts[rule] = {
            "state": job["State"],
            "commands run": len(runs),
            # the launcher's processes, each of which trained (one weights digest per process)
            "processes": (
                [manifest["world_size"], len(manifest["ranks"]["student_sha256"])]
                if rule == "train_stage"
                else [len(runs)]
            ),
            "job tasks": job_env.get("SLURM_NTASKS", "1"),
            "job tasks per GPU": job_env.get("SLURM_NTASKS_PER_GPU"),
            "job SLURM_GPUS_ON_NODE": job_env.get("SLURM_GPUS_ON_NODE"),
            "job SLURM_JOB_GPUS": job_env.get("SLURM_JOB_GPUS"),
            "command SLURM_GPUS_ON_NODE": command_env.get("SLURM_GPUS_ON_NODE"),
            "command CUDA_VISIBLE_DEVICES": command_env.get("CUDA_VISIBLE_DEVICES"),
            "accounting steps (tasks)": recorded["steps"],
            "accounting GPUs, CPUs": [recorded["tres"].get("gres/gpu"), recorded["tres"]["cpu"]],
            "submitted with": [
                o for o in sbatch_options if o.startswith(("--gpu", "--ntasks", "--cpus"))
            ],
        }
    return counts


@pytest.mark.parametrize("driver", DRIVERS)
def test_gpu_jobs_run_once_with_all_their_gpus(drills, driver):
    """Under each lock's plugin, each GPU job's command runs once, its launcher starts the
    configured processes, the job holds one task and the GPUs it asked for, and the command
    sees all of them (no GPU bound to a task of its own)."""
    drill = drills[f"gpu {driver}"].result()
    counts = gpu_job_counts(drill)
    print(f"GPU drill ({driver}):", json.dumps(counts, indent=1))
    assert set(counts) == set(GPU_JOBS)
    for rule, (kind, _) in GPU_JOBS.items():
        spec, found = GPU_RESOURCES[kind], counts[rule]
        gpus = spec["gpu"]
        processes = launcher_processes(spec.get("launcher", ""))
        assert found["state"] == "COMPLETED", (rule, found)
        assert found["commands run"] == 1, (rule, found)
        assert set(found["processes"]) == {processes}, (rule, found)
        assert (found["job tasks"], found["job tasks per GPU"]) == ("1", None), (rule, found)
        assert found["job SLURM_GPUS_ON_NODE"] == found["command SLURM_GPUS_ON_NODE"] == str(gpus)
        job_gpus = (found["job SLURM_JOB_GPUS"] or "").split(",")
        assert len(job_gpus) == gpus and found["command CUDA_VISIBLE_DEVICES"] == ",".join(job_gpus)
        assert found["accounting steps (tasks)"] == {"batch": "1", "0": "1"}, (rule, found)
        assert found["accounting GPUs, CPUs"] == [str(gpus), str(gpus * spec["cpus_per_gpu"])]
        assert found["submitted with"] == [
            f"--cpus-per-gpu={spec['cpus_per_gpu']}",
            f"--gpus={gpus}",
        ], (rule, found)
    assert avoidable_warnings(drill.log) == []


# --- two drivers on one shared results folder ----------------------------------------------------

SMOKE_LAYOUT = Layout(Path("results/smoke"))


def chain_targets(method: str) -> list[str]:
    """A chain of the smoke config: both its stages' evaluations (and so its stages, the base
    and the data they need)."""
    return [str(SMOKE_LAYOUT.eval_file("math_id", method, 0, stage)) for stage in (1, 2)]


@dataclass
class SharedDrivers:
    a: Path  # the clone that holds results/
    b: Path  # the clone whose results/ is a symlink to a's
    log_a: str
    log_b: str
    pid_a: int


def two_drivers(folder: Path) -> SharedDrivers:
    """A drives the grpo chain, B the sdpo chain, each `--profile slurm` in its own clone; B
    starts once A's base build runs, which is held (SIGSTOP) until B waits for it."""
    a, b = copy_workflow(mkdir(folder / "a")), copy_workflow(mkdir(folder / "b"))
    (a / "results").mkdir()
    (b / "results").symlink_to(a / "results")
    run_a = Run(a, *chain_targets("grpo"), *ON_SLURM, "--configfile", SMOKE)

    def base_build() -> list[int]:
        return [pid for pid in processes_in(a) if b"build-base" in cmdline(pid)]

    held = wait_until(base_build, "A's base build as a SLURM job", run=run_a, poll=0.2)
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        run_b = Run(b, *chain_targets("sdpo_frozen"), *ON_SLURM, "--configfile", SMOKE)
        wait_until(lambda: "cptlab: waiting for base" in run_b.log, "B's wait", run=run_b)
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)
    return SharedDrivers(a, b, run_a.finish(), run_b.finish(), run_a.process.pid)


def mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


@pytest.fixture(scope="module")
def shared_drivers(runs) -> SharedDrivers:
    return runs.shared.result()


def test_two_drivers_on_one_results_folder_submit_each_job_once(shared_drivers, smoke, tmp_path):
    drivers = shared_drivers
    both = planned_jobs(
        copy_workflow(mkdir(tmp_path / "both")),
        *chain_targets("grpo"),
        *chain_targets("sdpo_frozen"),
        "--configfile",
        SMOKE,
    )
    alone = planned_jobs(
        copy_workflow(mkdir(tmp_path / "a")), *chain_targets("grpo"), "--configfile", SMOKE
    )
    jobs_a = accounting(drivers.a, count=alone.total())
    jobs_b = accounting(drivers.b, count=both.total() - alone.total())
    print(
        "two drivers on one results folder, the SLURM jobs of each:",
        json.dumps({"A": [j["Comment"] for j in jobs_a], "B": [j["Comment"] for j in jobs_b]}),
    )
    comments = [job["Comment"] for job in jobs_a + jobs_b]
    assert len(set(comments)) == len(comments)  # none submitted twice
    assert Counter(rule_of(job) for job in jobs_a + jobs_b) == both
    assert {job["State"] for job in jobs_a + jobs_b} == {"COMPLETED"}
    assert all("sdpo_frozen" in job["Comment"] for job in jobs_b), comments
    owner_a = rf"\(process {drivers.pid_a}, clone {drivers.a}, since [^)]+\)"
    assert re.search(rf"^cptlab: waiting for base, which the run of .* {owner_a} is making$",
                     drivers.log_b, re.MULTILINE)  # fmt: skip
    assert not list((drivers.a / SMOKE_LAYOUT.claims_dir).rglob("*.json"))
    for method in ("grpo", "sdpo_frozen"):
        for stage, domain in ((1, "math"), (2, "science")):
            weights = SMOKE_LAYOUT.stage_dir(method, 0, stage, domain) / "model.safetensors"
            assert (drivers.a / weights).read_bytes() == (smoke.local / weights).read_bytes()
            responses = SMOKE_LAYOUT.responses_file("math_id", method, 0, stage)
            assert (drivers.a / responses).read_bytes() == (smoke.local / responses).read_bytes()


# --- slurmctld stopped mid-run, alone: every other run needs it -------------------------------


def test_slurmctld_stopped_mid_run_is_said_and_the_run_ends_once_it_is_back(runs, drills):
    """The controller stopped while a training job trains: the run says so within minutes (the
    controller watch, cptlab.slurm), and once it is back, finishes the stage. (A job whose step
    would start meanwhile fails: srun cannot confirm its allocation.)"""
    wait([runs.shared])  # its runs are started from a thread of their own
    for run in Run.started:  # every other run of the module has ended
        run.process.wait(timeout=RUN_BOUND_S)
    work = shutil.copytree(runs.template, runs.template.parent / "slurmctld", symlinks=True)
    run = Run(work, STAGES[0], *ON_SLURM, "--configfile", DRILL)
    wait_until(lambda: checkpointed(work), "the first checkpoint", run=run)
    command(CLUSTER, "stop", "slurmctld")
    stopped = time.monotonic()
    try:
        said = wait_until(
            lambda: re.search(r"^cptlab: SLURM's controller does not answer.*$", run.log, re.M),
            "a line about the controller",
            timeout=300,
            run=run,
            poll=0.5,
        )
        said_after = time.monotonic() - stopped
    finally:
        command(CLUSTER, "start")
    restarted = time.monotonic()
    log = run.finish()
    print(
        f"slurmctld stopped: said after {said_after:.0f} s ({said[0]!r}); back after "
        f"{restarted - stopped:.0f} s; the run ended {run.seconds - (restarted - run.began):.0f} s "
        f"after it was back; said so: {'answers again' in log}"
    )
    # Whether the run also said that the controller is back depends on which comes first, the
    # watch's next check or the plugin's (tests/test_slurm_jobs.py tests the line).
    jobs = accounting(work, count=1)
    assert [(rule_of(j), j["State"]) for j in jobs] == [("train_stage", "COMPLETED")]
    assert json.loads((work / STAGES[0]).read_text())["steps_done"] == 40
