"""GRPO's zero-advantage rows without gradient (`CptGRPOTrainer._inert_rows`): the same first
training step as with every row in the backward pass, the rows split as intended, and no split
where such a row carries gradient (a KL term)."""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch
from tiny_world import one_step_world, train_one_step

from cptlab.train.grpo import CptGRPOTrainer

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return one_step_world(tmp_path_factory.mktemp("zero_advantage"))


@pytest.fixture
def forwards(monkeypatch):
    """Every policy forward of rows: (rows, whether it builds a gradient, whether the loss
    split its rows)."""
    calls = []
    original = CptGRPOTrainer._logps_and_entropies

    def recording(self, model, input_ids, *args, **kwargs):
        split = self._rows_without_gradient is not None
        calls.append((input_ids.size(0), torch.is_grad_enabled(), split))
        return original(self, model, input_ids, *args, **kwargs)

    monkeypatch.setattr(CptGRPOTrainer, "_logps_and_entropies", recording)
    return calls


def first_line(out) -> dict:
    return json.loads((out / "train_log.jsonl").read_text().splitlines()[0])


@pytest.mark.parametrize("shared", [False, True], ids=["TRL's forward", "shared prompts"])
def test_a_step_is_the_same_without_the_zero_advantage_rows_gradient(
    world, forwards, shared, monkeypatch
):
    """One step from the same weights: the same rollouts, so the same loss, gradient norm and
    entropy up to float rounding; the inert rows went through a forward without gradient and
    the others through one with it."""
    lines = {}
    inert_rows = CptGRPOTrainer._inert_rows
    for skip in (False, True):
        forwards.clear()
        # The reference: every row in the backward pass, as TRL computes the step.
        monkeypatch.setattr(CptGRPOTrainer, "_inert_rows", inert_rows if skip else lambda _: False)
        out = train_one_step(world, "grpo", f"grpo-{shared}-{skip}", shared_prompt_forward=shared)
        lines[skip] = first_line(out)
        total = sum(rows for rows, grad, split in forwards if grad or split)  # the loss's
        without = sum(rows for rows, grad, split in forwards if split and not grad)
        inert = round(lines[skip]["frac_reward_zero_std"] * total)
        if skip:
            assert 0 < inert < total  # the step has rows of both kinds
            assert without == inert
        else:
            assert without == 0
    full, skipped = lines[False], lines[True]
    assert full["grad_norm"] > 0  # the step learnt something to compare
    for key in ("loss", "grad_norm", "entropy"):
        assert skipped[key] == pytest.approx(full[key], rel=1e-4, abs=1e-7), key


def test_a_kl_term_keeps_every_row_in_the_backward_pass(world, forwards):
    """With beta above 0 a zero-advantage row still has the KL term's gradient: no split."""
    with_kl = dict(world, config=copy.deepcopy(world["config"]))
    with_kl["config"]["methods"]["grpo"]["beta"] = 0.04
    out = train_one_step(with_kl, "grpo", "grpo-kl")
    assert first_line(out)["frac_reward_zero_std"] > 0  # there were rows to leave out
    assert forwards and not any(split for _, _, split in forwards)
