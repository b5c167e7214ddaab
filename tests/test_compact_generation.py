"""Compact rollout sampling (`training.compact_generation`) against HF `generate`: the same
greedy completions while rows end at different steps (so rows leave the batch), the same
sampled completions while no row ends with generate's draw (so the random streams agree), the
draw's frequencies against its probabilities, and a training step that takes it."""

from __future__ import annotations

import os

import pytest
import torch
from tiny_models import tiny_qwen2
from tiny_world import one_step_world, train_one_step
from transformers import LogitsProcessor, LogitsProcessorList

from cptlab.train import compact_generation
from cptlab.train.compact_generation import sample_completions, sampling_processors

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

VOCAB = 50
PAD = 0


def peaked_model():
    """A tiny random model with an output layer of its own (tied embeddings make a random model
    repeat its last token) and next-token distributions far from uniform, so that greedy
    choices are not near-ties decided by rounding."""
    model = tiny_qwen2(VOCAB, seed=3)
    g = torch.Generator().manual_seed(0)
    model.lm_head.weight = torch.nn.Parameter(0.5 * torch.randn(VOCAB, 16, generator=g))
    return model.eval()


def rollout_prompts():
    """Three prompts of different lengths, each repeated four times, as TRL orders a batch."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in (9, 4, 13)]
    return [p for p in prompts for _ in range(4)]


def hf_completions(model, prompt_ids, max_new_tokens, eos, **sampling):
    """HF `generate` on the left-padded batch, cut after the first end token as TRL cuts it."""
    width = max(len(p) for p in prompt_ids)
    input_ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompt_ids])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids])
    out = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        pad_token_id=PAD,
        eos_token_id=eos or None,
        **sampling,
    )[:, width:]
    completions = []
    for row in out.tolist():
        ends = [i for i, token in enumerate(row) if token in eos]
        completions.append(row[: ends[0] + 1] if ends else row)
    return completions


class KeepArgmax(LogitsProcessor):
    """Leaves only the most likely token, so that sampling is greedy decoding."""

    def __call__(self, input_ids, scores):
        return torch.full_like(scores, float("-inf")).scatter(
            1, scores.argmax(-1, keepdim=True), 0.0
        )


def test_greedy_completions_equal_generate_while_rows_leave_the_batch():
    model = peaked_model()
    prompts = rollout_prompts()
    greedy = hf_completions(model, prompts, 12, [], do_sample=False)
    # End tokens taken from what the rows write, so that rows end at different steps.
    eos = sorted({row[3] for row in greedy})
    expected = hf_completions(model, prompts, 12, eos, do_sample=False)
    got = sample_completions(model, prompts, 12, eos, PAD, LogitsProcessorList([KeepArgmax()]))
    assert got == expected
    lengths = {len(c) for c in got}
    assert len(lengths) > 1 and max(lengths) > min(lengths), "no row left the batch early"


@pytest.mark.parametrize(
    "sampling", [{"temperature": 1.0}, {"temperature": 0.7, "top_p": 0.9, "top_k": 20}]
)
def test_sampled_completions_equal_generate_while_no_row_ends(sampling, monkeypatch):
    """With generate's own draw (`torch.multinomial`) in place of `draw_tokens`, the random
    streams agree while no row ends: each step draws from the distribution generate draws
    from, which `draw_tokens` samples (the next test)."""
    monkeypatch.setattr(
        compact_generation,
        "draw_tokens",
        lambda probs: torch.multinomial(probs, num_samples=1).squeeze(1),
    )
    model = peaked_model()
    prompts = rollout_prompts()
    torch.manual_seed(11)
    expected = hf_completions(
        model, prompts, 8, [], do_sample=True, **{"top_k": 0, "top_p": 1.0, **sampling}
    )
    torch.manual_seed(11)
    got = sample_completions(model, prompts, 8, [], PAD, sampling_processors(**sampling))
    assert got == expected


def test_draw_tokens_draws_each_token_with_its_probability():
    """200,000 draws of each row: every token's frequency within 4.5 standard errors of its
    probability, a token of probability 0 never drawn (top-p's removed tokens), and the same
    draws from the same seed."""
    rows = torch.tensor(
        [
            [0.5, 0.25, 0.125, 0.0625, 0.0625, 0.0],
            [0.0, 1e-3, 0.0, 0.999 - 1e-4, 1e-4, 0.0],
            [1 / 6] * 6,
        ]
    )
    n = 200_000
    torch.manual_seed(0)
    draws = compact_generation.draw_tokens(rows.repeat_interleave(n, dim=0)).view(3, n)
    frequencies = torch.stack([torch.bincount(d, minlength=6) for d in draws]).double() / n
    error = (rows.double() * (1 - rows.double()) / n).sqrt()
    assert ((frequencies - rows).abs() <= 4.5 * error).all(), frequencies
    assert (frequencies[rows == 0] == 0).all()
    torch.manual_seed(0)
    again = compact_generation.draw_tokens(rows.repeat_interleave(n, dim=0)).view(3, n)
    assert torch.equal(draws, again)
    assert not torch.equal(draws[2], compact_generation.draw_tokens(rows[2:].expand(n, 6)))


def test_sampling_needs_a_positive_temperature():
    with pytest.raises(ValueError, match="temperature"):
        sampling_processors(temperature=0.0)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return one_step_world(tmp_path_factory.mktemp("compact_generation"))


@pytest.mark.parametrize("method", ["grpo", "sdpo_frozen"])
def test_a_training_step_samples_its_rollouts_compactly(world, method, monkeypatch):
    calls = []
    original = compact_generation.sample_completions

    def counting(model, prompt_ids, *args, **kwargs):
        calls.append(len(prompt_ids))
        return original(model, prompt_ids, *args, **kwargs)

    monkeypatch.setattr(compact_generation, "sample_completions", counting)
    out = train_one_step(world, method, method, compact_generation=True)
    training = world["config"]["training"]
    assert calls == [training["prompts_per_step"] * training["num_generations"]]
    assert (out / "manifest.json").exists()


def test_settings_it_cannot_reproduce_are_refused_by_name():
    kwargs = {"max_new_tokens": 8, "do_sample": True, "pad_token_id": 0, "eos_token_id": 2}
    assert compact_generation.rollout_sampling({**kwargs, "repetition_penalty": 1.0})[
        "eos_token_ids"
    ] == [2]
    with pytest.raises(ValueError, match="repetition_penalty=1.2"):
        compact_generation.rollout_sampling({**kwargs, "repetition_penalty": 1.2})
    with pytest.raises(ValueError, match="do_sample=False"):
        compact_generation.rollout_sampling({**kwargs, "do_sample": False})


def test_compact_greedy_evaluation_gives_generates_completions(world):
    """`evaluation.compact_generation`: the same greedy completions as HF `generate` (the
    evaluation's batches, sorted by length, left-padded), and the same token count."""
    from cptlab.checkpoints import load_checkpoint
    from cptlab.evaluation.generation import generate
    from cptlab.evaluation.settings import Sampling

    model, tokenizer = load_checkpoint(world["base"])
    prompts = [[{"role": "user", "content": "What is " + "1 + " * n + "1?"}] for n in range(12)]
    sampling = Sampling(max_new_tokens=12)
    stats_hf, stats_compact = {}, {}
    expected = generate(model, tokenizer, prompts, sampling, batch_size=4, stats=stats_hf)
    got = generate(
        model, tokenizer, prompts, sampling, batch_size=4, stats=stats_compact, compact=True
    )
    assert got == expected
    assert stats_compact == stats_hf and stats_hf["tokens_generated"] > len(prompts)
