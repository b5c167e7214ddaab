"""The shared-prompt forward (`training.shared_prompt_forward`) against the whole-row forward:
the same logits and gradients on a constructed batch, and the same first training step."""

from __future__ import annotations

import json
import os
import random

import pytest
import torch
from tiny_models import tiny_qwen2
from tiny_world import one_step_world, train_one_step

from cptlab.train import shared_prompt
from cptlab.train.grpo import CptGRPOTrainer
from cptlab.train.sdpo import CptSDPOTrainer
from cptlab.train.shared_prompt import completion_logits, shareable

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

VOCAB = 50


def rollout_batch(prompt_lengths, per_prompt, prompt_width, completion_width, seed=0):
    """(input_ids, attention_mask): left-padded prompts, each repeated for `per_prompt` rows,
    with right-padded completions of random lengths, rows shuffled."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for length in prompt_lengths:
        prompt = torch.zeros(prompt_width, dtype=torch.long)
        prompt_mask = torch.zeros(prompt_width, dtype=torch.long)
        prompt[prompt_width - length :] = torch.randint(3, VOCAB, (length,), generator=g)
        prompt_mask[prompt_width - length :] = 1
        for _ in range(per_prompt):
            n = int(torch.randint(1, completion_width + 1, (1,), generator=g))
            completion = torch.zeros(completion_width, dtype=torch.long)
            completion[:n] = torch.randint(3, VOCAB, (n,), generator=g)
            mask = (torch.arange(completion_width) < n).long()
            rows.append((torch.cat([prompt, completion]), torch.cat([prompt_mask, mask])))
    random.Random(seed).shuffle(rows)
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


def whole_row_logits(model, input_ids, attention_mask, width, temperature):
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    return logits[:, -width - 1 : -1] / temperature


def logits_and_gradients(forward, model, input_ids, attention_mask, width):
    model.zero_grad()
    logits = forward(model, input_ids, attention_mask, width, 0.7)
    completion_mask = attention_mask[:, -width:, None].bool()
    # a loss that reads every kept position's whole distribution
    (torch.log_softmax(logits, -1).exp().square() * completion_mask).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return logits.detach().masked_fill(~completion_mask, 0.0), grads


@pytest.mark.parametrize("groups", [1, 3, 20], ids=["one group", "length groups", "a row each"])
@pytest.mark.parametrize(
    "prompt_lengths, per_prompt",
    [([9, 5, 12], 4), ([7, 7, 3, 10, 1], 1)],
    ids=["groups of four", "every prompt distinct"],
)
def test_shared_prompt_forward_equals_the_whole_row_forward(prompt_lengths, per_prompt, groups):
    model = tiny_qwen2(VOCAB, seed=1)
    input_ids, attention_mask = rollout_batch(prompt_lengths, per_prompt, 12, 6)
    expected, expected_grads = logits_and_gradients(
        whole_row_logits, model, input_ids, attention_mask, 6
    )
    grouped = lambda *args: completion_logits(*args, groups=groups)  # noqa: E731
    got, grads = logits_and_gradients(grouped, model, input_ids, attention_mask, 6)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert expected_grads.keys() == grads.keys()
    for name, grad in expected_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_wrapped_or_checkpointed_model_takes_the_whole_row_forward():
    model = tiny_qwen2(VOCAB)
    assert shareable(model, model)
    wrapper = torch.nn.Module()
    assert not shareable(wrapper, model)  # DDP / DeepSpeed: the wrapper must see the forward
    enable = getattr(model, "activation_checkpointing_enable", None)
    (enable or model.gradient_checkpointing_enable)()
    assert not shareable(model, model)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return one_step_world(tmp_path_factory.mktemp("shared_prompt"))


@pytest.mark.parametrize("method", ["grpo", "sdpo_frozen"])
def test_a_training_step_is_the_same_with_the_shared_prompt_forward(world, method, monkeypatch):
    """One step from the same weights: the same rollouts, so the same loss and gradient norm
    up to float rounding (the gradient norm is taken before clipping), with the shared-prompt
    forward in one group and in length groups."""
    calls = []
    original = shared_prompt.completion_hidden_states
    monkeypatch.setattr(
        shared_prompt,
        "completion_hidden_states",
        lambda *args: calls.append(args[-1]) or original(*args),
    )
    first = {}
    trainer = CptGRPOTrainer if method == "grpo" else CptSDPOTrainer
    for shared, grouped in ((False, False), (True, False), (True, True)):
        calls.clear()
        groups = shared_prompt.LENGTH_GROUPS if grouped else 1
        monkeypatch.setattr(trainer, "prompt_forward_groups", lambda _, groups=groups: groups)
        out = train_one_step(
            world, method, f"{method}-{shared}-{grouped}", shared_prompt_forward=shared
        )
        log = out / "train_log.jsonl"
        first[shared, grouped] = json.loads(log.read_text().splitlines()[0])
        # the trainer took the path under test, with its groups
        assert set(calls) == ({shared_prompt.LENGTH_GROUPS if grouped else 1} if shared else set())
    whole = first[False, False]
    assert whole["grad_norm"] > 0  # the step learnt something to compare
    for shared in (first[True, False], first[True, True]):
        assert shared["loss"] == pytest.approx(whole["loss"], rel=1e-4, abs=1e-7)
        assert shared["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)


def test_a_length_group_is_only_as_wide_as_its_longest_completion(monkeypatch):
    """The point of the groups: no group forwards columns past its longest completion, and a
    mask with a hole keeps the row's tokens after it."""
    model = tiny_qwen2(VOCAB, seed=1)
    input_ids, attention_mask = rollout_batch([9, 5, 12], 4, 12, 6)
    attention_mask[0, 12:] = torch.tensor([1, 0, 1, 0, 0, 0])  # row 0: 3 columns, one masked
    lengths = [int(m[12:].nonzero().max()) + 1 for m in attention_mask]
    widths = []
    backbone = model.model
    original = type(backbone).forward

    def recording(self, input_ids=None, **kwargs):
        if kwargs.get(shared_prompt.cache_keyword(type(backbone))) is not None:
            widths.append(input_ids.size(1))
        return original(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(type(backbone), "forward", recording)
    completion_logits(model, input_ids, attention_mask, 6, groups=3)
    by_length = sorted(lengths)
    assert widths == [max(by_length[i * 4 : i * 4 + 4]) for i in range(3)]
    assert widths[0] < 6  # the short rows' group skipped the padding
