"""Within-stage checkpoints (cptlab.train.within_stage): a stage exports its trainer saves as it
trains and publishes them in out/step<N>/ before its manifest; the exports outlive the rotation
of trainer checkpoints and a kill; a stage that stopped early publishes its own weights for the
steps it has no export of; the within-stage settings and their checks."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file
from tiny_world import BENCHMARK, Kill, tiny_world
from transformers import TrainerCallback

from cptlab.artifacts import read_manifest
from cptlab.errors import ConfigError
from cptlab.evaluation.settings import EvalSettings, WithinStage
from cptlab.train.stage import train_stage
from cptlab.validation import validate_config

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("within")
    config, base, data_dir = tiny_world(folder)
    # a save every step, and only the last trainer checkpoint kept
    config["training"].update(steps=5, save_steps=1, save_total_limit=1)
    return {"config": config, "base": base, "data": data_dir, "dir": folder}


class CaptureSaves(TrainerCallback):
    """Copies each trainer checkpoint's weights as it is saved (before its rotation)."""

    def __init__(self, into):
        self.into = into

    def on_save(self, args, state, control, **kwargs):
        source = f"{args.output_dir}/checkpoint-{state.global_step}/model.safetensors"
        shutil.copy(source, self.into / f"{state.global_step}.safetensors")


def run(world, name, config=None, **kwargs):
    return train_stage(
        config or world["config"],
        "grpo",
        "math",
        seed=1,
        start=world["base"],
        out=world["dir"] / name / "out",
        state_dir=world["dir"] / name / "state",
        threads=1,
        data=world["data"] / f"{BENCHMARK}.jsonl",
        export_saves=True,
        **kwargs,
    )


def weights(folder) -> dict:
    return load_file(folder / "model.safetensors")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_stage_publishes_each_save_before_its_manifest(world):
    captured = world["dir"] / "captured"
    captured.mkdir()
    manifest = run(world, "whole", callbacks=[CaptureSaves(captured)])
    out, state = world["dir"] / "whole" / "out", world["dir"] / "whole" / "state"
    assert [c["step"] for c in manifest["within_stage"]] == [1, 2, 3, 4]  # 5 is the stage's end
    assert sorted(p.name for p in state.glob("checkpoint-*")) == ["checkpoint-5"]  # rotated
    for step in (1, 2, 3, 4):
        folder = out / f"step{step}"
        assert read_manifest(folder) == {"step": step, "optimizer_step": step, "reached": True}
        assert same(weights(folder), load_file(captured / f"{step}.safetensors"))
        assert (folder / "tokenizer.json").is_file()
        written = (folder / "manifest.json").stat().st_mtime
        assert written <= (out / "manifest.json").stat().st_mtime
    assert not same(weights(out / "step1"), weights(out / "step4"))  # it trained in between


def test_a_killed_stage_resumes_with_its_earlier_exports(world):
    """Killed after step 3's save (checkpoint-3 the only one left), resumed: steps 1-3 are the
    exports made before the kill, step 4 is made again (an export past the resumed checkpoint
    is removed first), and every step's weights are the uninterrupted run's."""
    with pytest.raises(KeyboardInterrupt):
        run(world, "killed", callbacks=[Kill(at=3)])
    exports = world["dir"] / "killed" / "state" / "exports"
    assert sorted(p.name for p in exports.iterdir()) == ["step1", "step2", "step3"]
    stale = exports / "step4"
    shutil.copytree(exports / "step3", stale)  # as if saved past the checkpoint resumed from
    (stale / "stale").write_text("")
    manifest = run(world, "killed")
    assert manifest["resumed_from"] == "checkpoint-3"
    assert not (exports / "step4" / "stale").exists()
    for step in (1, 2, 3, 4):
        folder = f"step{step}"
        whole = weights(world["dir"] / "whole" / "out" / folder)
        assert same(weights(world["dir"] / "killed" / "out" / folder), whole), step


def test_a_stage_stopped_early_publishes_its_own_weights_for_the_rest(world):
    """A KL budget ends the stage at step 2: steps 1 and 2 are its saves; 3 and 4 hold the
    weights it hands on, marked not reached."""
    config = json.loads(json.dumps(world["config"]))
    kls = [
        json.loads(line)["kl_to_start"]
        for line in (world["dir"] / "whole" / "out" / "train_log.jsonl").read_text().splitlines()
    ]
    config["training"]["kl_budget"] = kls[1] if kls[1] > kls[0] else pytest.skip("KL fell")
    manifest = run(world, "budget", config=config)
    assert manifest["steps_done"] == 2
    out = world["dir"] / "budget" / "out"
    assert [c["reached"] for c in manifest["within_stage"]] == [True, True, False, False]
    assert read_manifest(out / "step3") == {"step": 3, "reached": False}
    assert same(weights(out / "step3"), weights(out)) and same(weights(out / "step2"), weights(out))
    assert same(weights(out / "step1"), weights(world["dir"] / "whole" / "out" / "step1"))


def test_the_within_stage_checkpoints_and_their_rows():
    within = WithinStage(every=20, rows=3)
    assert within.steps(50) == [20, 40] and within.steps(40) == [20] and within.steps(20) == []
    rows = [{"id": str(i)} for i in range(10)]
    picked = within.sample(rows, "math_id", seed=0)
    assert picked == within.sample(rows, "math_id", seed=0) and len(picked) == 3
    assert [r["id"] for r in picked] == sorted((r["id"] for r in picked), key=int)  # file order
    others = [within.sample(rows, "math_id", seed=s) for s in range(1, 6)]
    others += [within.sample(rows, "math_ood", seed=0)]
    assert any(p != picked for p in others)  # seeded, per benchmark
    assert WithinStage(every=20).sample(rows, "math_id", 0) == rows  # rows null: all
    assert EvalSettings(within_stage={"every": 5}).within_stage_steps(12) == [5, 10]
    assert EvalSettings().within_stage_steps(12) == []


def test_every_must_be_a_multiple_of_each_methods_save_steps(world):
    config = json.loads(json.dumps(world["config"]))
    config["evaluation"] = {"within_stage": {"every": 3}}
    config["run"] = {"sequence": ["math"], "methods": ["grpo", "sdpo_frozen"], "seeds": [0]}
    config["training"]["save_steps"] = 1
    config["methods"]["sdpo_frozen"]["training"] = {"save_steps": 2}
    with pytest.raises(ConfigError, match="within_stage.every: 3 is not a multiple of .* 2"):
        validate_config(config, "t")
    config["evaluation"]["within_stage"]["every"] = 4
    validate_config(config, "t")
