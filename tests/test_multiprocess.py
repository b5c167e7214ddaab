"""A training stage under a launcher with two processes, through the workflow's own train rule
and its `resources.train.launcher` setting: on CPU, `torchrun` starts two processes that talk
over gloo, as `accelerate launch --num_processes 8` starts eight on a GPU node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workflow_helpers import copy_workflow, edited_config, snakemake

pytestmark = pytest.mark.integration

LAUNCHER = "torchrun --nproc_per_node 2"


def two_processes(config: dict) -> None:
    config["experiment"] = "mp"
    config["run"].update(sequence=["math"], methods=["sdpo_frozen"], seeds=[0])
    config["resources"]["train"]["launcher"] = LAUNCHER
    config["training"].update(prompts_per_step=4, num_generations=2)


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> dict:
    workdir = copy_workflow(tmp_path_factory.mktemp("multiprocess"))
    edited_config(workdir / "config" / "smoke.yaml", workdir / "config" / "mp.yaml", two_processes)
    target = "results/mp/runs/sdpo_frozen/seed0/stage1_math/manifest.json"
    env = {"OMP_NUM_THREADS": "1"}
    done = snakemake(workdir, target, "--cores", "2", "--configfile", "config/mp.yaml", env=env)
    log = workdir / "results/mp/logs/train/sdpo_frozen/seed0/stage1_math.log"
    text = log.read_text() if log.exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + text[-3000:]
    return {"workdir": workdir, "manifest": json.loads((workdir / target).read_text())}


def test_the_train_rule_runs_the_cli_module_in_two_processes(stage: dict) -> None:
    manifest = stage["manifest"]
    assert manifest["status"] == "complete" and manifest["world_size"] == 2
    out = Path(stage["workdir"]) / "results/mp/runs/sdpo_frozen/seed0/stage1_math"
    assert sorted(p.name for p in out.glob("*.safetensors")) == ["model.safetensors"]
    assert [p.name for p in out.glob("manifest.json")] == ["manifest.json"]
    # Each step's verdicts are gathered from both processes: 4 prompts x 2 completions.
    lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["verifier/completions"] == 8 for line in lines)
