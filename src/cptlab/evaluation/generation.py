"""Batched generation with the KV cache (HF `generate`, or the training loop's compact decode
loop), the embedded-scale backend."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from cptlab.evaluation.settings import Sampling
from cptlab.train.compact_generation import sample_completions, sampling_processors


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[list[dict]],
    sampling: Sampling,
    seed: int = 0,
    batch_size: int = 64,
    stats: dict | None = None,
    chat_template_kwargs: dict | None = None,
    compact: bool = False,
) -> list[list[str]]:
    """Completions for each chat prompt: a list of `sampling.n` strings per prompt.

    Prompts are sorted by length so that batches carry little padding; each batch reseeds from
    (seed, batch index), so results do not depend on what ran before.

    stats:                if given, `stats["tokens_generated"]` is increased by the number of
                          tokens generated (up to and including each completion's end token;
                          padding after it is not counted).
    chat_template_kwargs: extra keyword arguments of `apply_chat_template` (for example
                          `{"enable_thinking": False}` for Qwen3).
    compact:              decode each batch with cptlab.train.compact_generation (a row leaves
                          the batch at its end token) rather than `generate`: greedy, the same
                          completions up to float rounding; sampled, the same distribution
                          with other draws.
    """
    extra = chat_template_kwargs or {}
    texts = [
        tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True, **extra)
        for p in prompts
    ]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    results: list[list[str]] = [[] for _ in texts]
    was_training = model.training
    model.eval()
    per_batch = max(1, batch_size // sampling.n)
    for b, start in enumerate(range(0, len(order), per_batch)):
        index = order[start : start + per_batch]
        encoded = tokenizer(
            [texts[i] for i in index], return_tensors="pt", padding=True, add_special_tokens=False
        )
        torch.manual_seed(seed * 100_003 + b)
        sample = sampling.temperature > 0
        if compact:
            completions = _compact_batch(model, tokenizer, encoded, sampling, stats)
            for j, i in enumerate(index):
                results[i] = completions[j * sampling.n : (j + 1) * sampling.n]
            continue
        output = model.generate(
            **encoded,
            do_sample=sample,
            temperature=sampling.temperature if sample else None,
            top_p=sampling.top_p if sample else None,
            top_k=0 if sample else None,
            num_return_sequences=sampling.n,
            max_new_tokens=sampling.max_new_tokens,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        generated = output[:, encoded["input_ids"].shape[1] :]
        if stats is not None:
            stats["tokens_generated"] = stats.get("tokens_generated", 0) + count_generated(
                generated, _eos_ids(model, tokenizer)
            )
        completions = tokenizer.batch_decode(generated, skip_special_tokens=True)
        for j, i in enumerate(index):
            results[i] = completions[j * sampling.n : (j + 1) * sampling.n]
    model.train(was_training)
    return results


def _compact_batch(model, tokenizer, encoded, sampling: Sampling, stats: dict | None) -> list[str]:
    """One batch's completions from the compact decode loop, `num_return_sequences` rows per
    prompt in `generate`'s order."""
    rows = [
        ids[mask.bool()].tolist()
        for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"], strict=True)
    ]
    sample = sampling.temperature > 0
    completions = sample_completions(
        model,
        [ids for ids in rows for _ in range(sampling.n)],
        max_new_tokens=sampling.max_new_tokens,
        eos_token_ids=_eos_ids(model, tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        processors=sampling_processors(sampling.temperature, top_p=sampling.top_p)
        if sample
        else None,
        greedy=not sample,
    )
    if stats is not None:
        stats["tokens_generated"] = stats.get("tokens_generated", 0) + sum(map(len, completions))
    return tokenizer.batch_decode(completions, skip_special_tokens=True)


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast) -> list[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    ids = eos if isinstance(eos, list | tuple) else [eos]
    return [int(i) for i in ids if i is not None]


def count_generated(generated: torch.Tensor, eos_ids: list[int]) -> int:
    """Tokens generated in a (sequences x new tokens) batch: each row up to and including its
    first end token, or the whole row when it has none (it hit the length limit)."""
    if generated.numel() == 0:
        return 0
    length = generated.shape[1]
    if not eos_ids:
        return int(generated.shape[0] * length)
    is_end = torch.isin(generated, torch.tensor(eos_ids, device=generated.device))
    has_end = is_end.any(dim=1)
    first_end = is_end.int().argmax(dim=1)
    counts = torch.where(has_end, first_end + 1, torch.full_like(first_end, length))
    return int(counts.sum())
