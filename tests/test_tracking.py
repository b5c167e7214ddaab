"""training.report_to (cptlab.train.tracking): TRL's logs of a stage and the evaluation scores of
its checkpoints, at their steps, in one offline run of the tracker; a tracker that is not
installed is a config error naming its package."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import torch
from tiny_world import BENCHMARK, tiny_world

from cptlab.errors import ConfigError
from cptlab.train import tracking
from cptlab.train.stage import train_stage

# `make test-vllm` collects this module in its own environment, which has no tensorboard; the
# project's environment has it (envs/requirements.txt).
event_files = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


def scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in `folder`: tag -> [(step, value)]."""
    events = event_files.EventAccumulator(str(folder))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def test_a_stage_logs_to_tensorboard_and_its_evaluations_join_it_at_their_step(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "")  # the stage sets it: restored after
    config, base, data = tiny_world(tmp_path)
    config["training"].update(steps=3, report_to="tensorboard")
    run = tmp_path / "tracking" / "grpo" / "seed0" / "stage1_math"
    train_stage(
        config, "grpo", "math", seed=0, start=base, out=tmp_path / "out",
        state_dir=tmp_path / "state", data=data / f"{BENCHMARK}.jsonl", tracking_dir=run,
    )  # fmt: skip
    logged = scalars(run)
    log = [json.loads(line) for line in (tmp_path / "out" / "train_log.jsonl").open()]
    assert [step for step, _ in logged["train/loss"]] == [1, 2, 3]
    assert [v for _, v in logged["train/loss"]] == pytest.approx([r["loss"] for r in log])
    tracking.log_scores("tensorboard", run, 2, {"eval/math_id/accuracy": 0.25})
    assert scalars(run)["eval/math_id/accuracy"] == [(2, 0.25)]


def test_a_tracker_that_is_not_installed_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="report_to: wandb needs the wandb package"):
        tracking.tracking_args("wandb", tmp_path, "exp", "grpo/seed0", "stage1_math")
    assert tracking.tracking_args("none", None, "exp", "grpo/seed0", "stage1_math") == {
        "report_to": "none"
    }


def test_wandb_runs_offline_grouped_by_chain(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    for key in ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_GROUP"):
        monkeypatch.setenv(key, "")  # set by tracking_args: restored after
    args = tracking.tracking_args("wandb", tmp_path, "embedded", "grpo/seed0", "stage1_math")
    assert args == {"report_to": "wandb", "run_name": "stage1_math"}
    assert os.environ["WANDB_MODE"] == "offline" and os.environ["WANDB_DIR"] == str(tmp_path)
    assert (os.environ["WANDB_PROJECT"], os.environ["WANDB_RUN_GROUP"]) == (
        "embedded",
        "grpo/seed0",
    )
