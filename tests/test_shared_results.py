"""Clones of the workflow that share one results folder, run at once (cptlab.claims).

Each clone is a private copy of the workflow with its own `.snakemake/`; the first keeps the
results folder, the second reaches it through a symlink (`results -> ../a/results`), the third
through CPTLAB_RESULTS. The experiment is the smoke config cut to two chains of one stage (math),
with math_id and logic_ood evaluated, and four training steps with a checkpoint after each, so
that a kill can land between checkpoints. Each run's executed jobs are read from its Snakemake
log; the results are compared with one uninterrupted run in a single clone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from workflow_helpers import BIN, ROOT, SMOKE, copy_workflow, edited_config, planned_jobs

from cptlab.layout import RESULTS_ENV, Layout

pytestmark = pytest.mark.integration

EXPERIMENT = "shared"
CONFIG = "shared.yaml"
LAYOUT = Layout(Path("results") / EXPERIMENT)
CHAINS = ("grpo", "sdpo_frozen")


def shared_config(config: dict) -> None:
    config["experiment"] = EXPERIMENT
    del config["data"]["domains"]["science"]
    config["run"]["sequence"] = ["math"]
    config["training"]["steps"] = 4
    config["evaluation"]["within_stage"] = None  # the claims, not the within-stage jobs


def chain_target(method: str) -> str:
    """A chain's last evaluation: its stage, the base and the data it needs, not the tables."""
    return str(LAYOUT.eval_file("math_id", method, 0, 1))


def clone(folder: Path, results: Path | None = None) -> Path:
    """A clone of the workflow; its results folder a symlink to `results` when given."""
    folder.mkdir(parents=True)
    copy_workflow(folder)
    edited_config(ROOT / SMOKE, folder / CONFIG, shared_config)
    if results is not None:
        (folder / "results").symlink_to(results)
    return folder


class Run:
    """`snakemake ARGS --configfile shared.yaml` in a clone, in the background and in a session
    of its own (a kill takes its jobs too); its output in a log file beside the workflow."""

    def __init__(self, workdir: Path, *args: str, cores: int = 1, env: dict | None = None):
        self.workdir = workdir
        self.log_path = workdir / f"snakemake-{time.monotonic_ns()}.log"
        environment = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [str(BIN / "snakemake"), *args, "--cores", str(cores), "--configfile", CONFIG],
                cwd=workdir,
                env={**environment, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def finish(self, timeout: float = 600) -> str:
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"snakemake ran over {timeout} s in {self.workdir}:\n{self.log[-3000:]}")
        assert code == 0, f"snakemake failed ({code}) in {self.workdir}:\n{self.log[-3000:]}"
        return self.log

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def wait_for(condition, what: str, runs: list[Run], timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while not condition():
        for run in runs:
            assert run.process.poll() is None, f"a run ended before {what}:\n{run.log[-3000:]}"
        assert time.monotonic() < end, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)


def executed(log: str, finished: bool = False) -> list[str]:
    """The jobs a run started (or `finished`), from its Snakemake log: each as its rule and
    first output in the experiment's folder (`train_stage runs/grpo/seed0/stage1_math/...`)."""
    jobs = []
    for block in re.split(r"^(?=(?:local)?rule \w+:$)", log, flags=re.MULTILINE)[1:]:
        rule = block.split()[1].rstrip(":")
        jobid = re.search(r"^\s+jobid: (\d+)$", block, re.MULTILINE)[1]
        if rule == "all" or (finished and f"Finished jobid: {jobid} " not in log):
            continue
        output = re.search(r"^\s+output: ([^,\n]+)", block, re.MULTILINE)[1]
        jobs.append(f"{rule} {output.split(f'/{EXPERIMENT}/', 1)[1]}")
    return jobs


def claim_of(workdir: Path, job: str) -> dict | None:
    try:
        return json.loads((workdir / LAYOUT.claim_file(job)).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def results(workdir: Path, tables: bool = True) -> dict[str, bytes]:
    """What a run must reproduce: every weight file and evaluation's responses, and the tables."""
    root = workdir / LAYOUT.root
    files = [*sorted(root.rglob("*.safetensors")), *sorted(root.rglob("*.responses.jsonl"))]
    if tables:
        files += [root / "scores.csv", root / "cl_metrics.csv"]
    return {str(path.relative_to(root)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[str]]:
    """The experiment in one clone, uninterrupted: its folder and the jobs it executed."""
    workdir = clone(tmp_path_factory.mktemp("reference") / "clone")
    plan = planned_jobs(workdir, "--configfile", CONFIG)
    jobs = executed(Run(workdir, cores=2).finish())
    assert len(jobs) == len(set(jobs)) == plan.total() - plan["all"]
    return workdir, jobs


def processes(workdir: Path, word: str) -> list[int]:
    """The processes running in `workdir` whose command line holds `word`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(os.readlink(f"/proc/{entry}/cwd")) == workdir.resolve():
                if word.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
        except OSError:  # ended meanwhile
            continue
    return found


def test_three_clones_at_once_run_each_job_once(reference, tmp_path):
    """A runs the grpo chain, B (through a symlink) the sdpo chain, C (through CPTLAB_RESULTS)
    the whole experiment. B starts once A has claimed its jobs, C once B plans. A's base build
    is held (SIGSTOP) until B waits for it and C waits for B to finish planning, so that the
    runs meet whatever the machine's speed. Each job runs in one run only, and the results are
    the single run's. A has the reference's two cores: the base's warm-up runs on as many
    threads as the run gives it, and its last bits depend on their number."""
    a = clone(tmp_path / "a")
    b = clone(tmp_path / "b", results=a / "results")
    c = clone(tmp_path / "c")
    run_a = Run(a, chain_target("grpo"), cores=2)
    wait_for(lambda: processes(a, "build-base"), "A's base build", [run_a])
    held = processes(a, "build-base")
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        run_b = Run(b, chain_target("sdpo_frozen"))
        wait_for(lambda: "cptlab: waiting for base" in run_b.log, "B's wait", [run_a, run_b])
        run_c = Run(c, env={RESULTS_ENV: str(a / "results")})
        wait_for(lambda: "to finish planning" in run_c.log, "C's wait", [run_a, run_b, run_c])
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)
    logs = {"A": run_a.finish(), "B": run_b.finish(), "C": run_c.finish()}

    jobs = {name: executed(log) for name, log in logs.items()}
    print("jobs each run executed:", json.dumps(jobs, indent=1))
    everything = [job for ran in jobs.values() for job in ran]
    assert Counter(everything) == Counter(reference[1])  # each job once, none missing
    assert sorted(jobs["B"]) == [
        "evaluate_stage eval/sdpo_frozen/seed0/stage1/math_id.json",
        "train_stage runs/sdpo_frozen/seed0/stage1_math/manifest.json",
    ]
    assert "build_base base/manifest.json" in jobs["A"]
    assert {"aggregate scores.csv", "evaluate_base eval/base/math_id.json"} <= set(jobs["C"])
    assert not any("stage" in job for job in jobs["C"])
    owner_a = rf"the run of \S+ on \S+ \(process {run_a.process.pid}, clone {a}, since [^)]+\)"
    assert re.search(rf"^cptlab: waiting for base, which {owner_a} is making$", logs["B"], re.M)
    owner_b = rf"the run of \S+ on \S+ \(process {run_b.process.pid}, clone {b}, since [^)]+\)"
    planning = rf"^cptlab: waiting for {owner_b} to finish planning in {a}/results/{EXPERIMENT}$"
    assert re.search(planning, logs["C"], re.M)
    assert results(a) == results(reference[0])
    assert not list((a / LAYOUT.claims_dir).rglob("*.json"))  # every claim released
    # Each clone, however it reaches the folder, finds nothing to do: no output of another
    # clone's run looks stale to it.
    env = {RESULTS_ENV: str(a / "results")}
    for workdir, extra in ((a, {}), (b, {}), (c, env)):
        assert planned_jobs(workdir, "--configfile", CONFIG, env=extra) == Counter(), workdir


def test_a_run_killed_with_9_leaves_its_claims_to_the_next(reference, tmp_path):
    """A runs both chains; B, through a symlink, the same, started once A has claimed its jobs:
    it waits. A is killed with -9 between two checkpoints of a training stage: B takes over A's
    claims (one line), resumes the stage from A's checkpoint, runs what A left, and ends with
    the single run's stages and evaluations."""
    a = clone(tmp_path / "a")
    b = clone(tmp_path / "b", results=a / "results")
    targets = [chain_target(method) for method in CHAINS]
    run_a = Run(a, *targets, cores=2)
    wait_for(lambda: claim_of(a, "base") is not None, "A's claims", [run_a])
    run_b = Run(b, *targets)

    def between_checkpoints() -> str | None:
        for method in CHAINS:
            stage = a / LAYOUT.stage_manifest(method, 0, 1, "math")
            state = a / LAYOUT.state_dir(method, 0, 1, "math")
            if list(state.glob("checkpoint-*/trainer_state.json")) and not stage.exists():
                return method
        return None

    wait_for(between_checkpoints, "a checkpoint of a training stage", [run_a, run_b])
    killed = between_checkpoints()
    run_a.kill()
    log_b = run_b.finish()

    gone = re.findall(r"^cptlab: taking over \d+ claim\(s\) of the run of (.*)$", log_b, re.M)
    assert len(gone) == 1, log_b[-3000:]
    assert f"(process {run_a.process.pid}, clone {a}, since" in gone[0]
    assert re.search(rf"which is gone: .*train/{killed}/seed0/stage1_math", gone[0])
    started, finished = set(executed(run_a.log)), set(executed(run_a.log, finished=True))
    jobs_b = executed(log_b)
    print("A finished:", sorted(finished), "\nA was killed in:", sorted(started - finished))
    print("B ran:", jobs_b)
    # What A was running when killed is B's; nothing that A finished runs again.
    assert f"train_stage runs/{killed}/seed0/stage1_math/manifest.json" in started - finished
    assert set(jobs_b) & finished == set() and started - finished <= set(jobs_b)
    chains = ("prepare_data", "build_base", "train_stage", "evaluate_stage")
    assert Counter([*finished, *jobs_b]) == Counter(j for j in reference[1] if j.startswith(chains))
    manifest = json.loads((a / LAYOUT.stage_manifest(killed, 0, 1, "math")).read_text())
    assert manifest["resumed_from"] is not None and manifest["steps_done"] == 4
    chain_files = {  # the base's evaluation is not among the targets
        path: data
        for path, data in results(reference[0], tables=False).items()
        if not path.startswith("eval/base/")
    }
    assert results(a, tables=False) == chain_files
    assert not list((a / LAYOUT.claims_dir).rglob("*.json"))
