"""A training stage under a launcher with two processes, through the workflow's own train rule
and its `resources.train.launcher` setting: on CPU, `accelerate launch` starts two processes
that talk over gloo, as `accelerate launch --num_processes 8` starts eight on a GPU node.
accelerate's own CPU path (`--cpu`) is single-process or mpirun; `--multi_gpu` runs
torch.distributed's launcher, which works without GPUs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cptlab.artifacts import MANIFEST
from tests.workflow_helpers import TWO_PROCESSES, copy_workflow, edited_config, snakemake

pytestmark = pytest.mark.integration


def two_processes(config: dict) -> None:
    config["experiment"] = "mp"
    config["run"].update(sequence=["math"], methods=["sdpo_ema"], seeds=[0])
    config["resources"]["train"]["launcher"] = TWO_PROCESSES
    # An EMA teacher moves every step: equal digests on both ranks mean it moved identically.
    config["methods"]["sdpo_ema"] = {
        "trainer": "sdpo",
        "teacher_model_kind": "ema",
        "teacher_update_rate": 0.5,
    }
    config["training"].update(prompts_per_step=4, num_generations=2, steps=2, save_total_limit=2)


STAGE = "results/mp/runs/sdpo_ema/seed0/stage1_math"


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> dict:
    workdir = copy_workflow(tmp_path_factory.mktemp("multiprocess"))
    edited_config(workdir / "config" / "smoke.yaml", workdir / "config" / "mp.yaml", two_processes)
    train(workdir)
    return {"workdir": workdir, "manifest": json.loads((workdir / STAGE / MANIFEST).read_text())}


def train(workdir: Path) -> None:
    target = f"{STAGE}/{MANIFEST}"
    env = {"OMP_NUM_THREADS": "1"}
    done = snakemake(workdir, target, "--cores", "2", "--configfile", "config/mp.yaml", env=env)
    log = workdir / "results/mp/logs/train/sdpo_ema/seed0/stage1_math.log"
    text = log.read_text() if log.exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + text[-3000:]


def test_the_train_rule_runs_the_cli_module_in_two_processes(stage: dict) -> None:
    manifest = stage["manifest"]
    assert manifest["status"] == "complete" and manifest["world_size"] == 2
    out = Path(stage["workdir"]) / STAGE
    assert sorted(p.name for p in out.glob("*.safetensors")) == ["model.safetensors"]
    assert [p.name for p in out.glob("manifest.json")] == ["manifest.json"]
    # Each step's verdicts are gathered from both processes: 4 prompts x 2 completions.
    lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["verifier/completions"] == 8 for line in lines)


def test_processes_train_on_disjoint_whole_groups(stage: dict) -> None:
    """Each process scores its own prompts, two per step, each with both of its rollouts (the
    group stays on one process for its advantage and its teacher demonstration)."""
    out = Path(stage["workdir"]) / STAGE
    for line in (out / "train_log.jsonl").read_text().splitlines():
        record = json.loads(line)
        first, second = record["rank_rows"]
        assert len(first) == len(second) == 2 and not set(first) & set(second), record["step"]
        assert record["verifier/completions"] == 2 * (len(first) + len(second))


def test_both_processes_end_with_the_same_student_and_teacher(stage: dict) -> None:
    ranks = stage["manifest"]["ranks"]
    assert len(set(ranks["student_sha256"])) == 1 and len(ranks["student_sha256"]) == 2
    assert len(set(ranks["teacher_sha256"])) == 1
    assert ranks["teacher_sha256"][0] != ranks["student_sha256"][0]


def test_a_killed_two_process_stage_resumes_to_the_same_weights(stage: dict) -> None:
    """The state a kill during step 2 leaves (checkpoint 1, no output): the rerun of the train
    rule resumes from checkpoint 1 and ends bit-identical to the uninterrupted run."""
    workdir = Path(stage["workdir"])
    state = next(workdir.glob("results/mp/**/checkpoint-2")).parent
    assert (state / "checkpoint-1").is_dir()
    shutil.rmtree(state / "checkpoint-2")
    shutil.rmtree(workdir / STAGE)
    train(workdir)
    resumed = json.loads((workdir / STAGE / MANIFEST).read_text())
    assert resumed["resumed_from"] == "checkpoint-1" and resumed["world_size"] == 2
    assert resumed["weights_sha256"] == stage["manifest"]["weights_sha256"]
    assert resumed["ranks"] == stage["manifest"]["ranks"]  # the EMA teacher too
