"""Sampling a rollout batch with each distinct prompt prefilled once and finished rows dropped
from the decode batch (`training.compact_generation`).

HF `generate` decodes every row of the batch until the longest is done: a finished row keeps
being forwarded and receives padding. On the embedded testbed a tool rollout batch runs to 33-64
tokens while its completions average 12.5, and a decode step costs in proportion to the rows it
forwards, so most of generation is spent on finished rows. A rollout batch also holds every prompt
`num_generations` times, and the prefill computes each copy. Here the distinct prompts are
prefilled once, their key/value cache is repeated for their rows, and a row leaves the batch (and
the cache) at its end token.

Each row is sampled from the distribution HF `generate` samples from: the same positions (from
the attention mask, as `generate` makes them), the same logits processors in the same order, the
same softmax. The draw is not `generate`'s `torch.multinomial` but the inverse of the row's
cumulative distribution at one uniform number (`draw_tokens`): the same distribution, and a
decode step's draw in about 1/25 of the time (`torch.multinomial` makes an exponential number
per vocabulary entry: 9.4 ms for 256 rows of 2,048, a tenth of a tool step on the embedded
testbed). So the draws are not `generate`'s: same seed, same completions, either way; but
turning the option on changes which completions a seed gives.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from cptlab.errors import ConfigError
from cptlab.train.shared_prompt import cache_keyword, returned_cache


def sampling_processors(
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = 1.0,
    min_p: float | None = None,
) -> LogitsProcessorList:
    """The warpers HF `generate` applies when sampling, in its order (temperature, top-k, top-p,
    min-p), for the settings that need one."""
    if temperature <= 0:
        raise ValueError(f"sampling needs a temperature above 0, got {temperature}")
    processors = LogitsProcessorList()
    if temperature != 1.0:
        processors.append(TemperatureLogitsWarper(temperature))
    if top_k:
        processors.append(TopKLogitsWarper(top_k=top_k))
    if top_p is not None and top_p < 1.0:
        processors.append(TopPLogitsWarper(top_p=top_p))
    if min_p is not None:
        processors.append(MinPLogitsWarper(min_p=min_p))
    return processors


# TRL's generation keywords that compact sampling reproduces, and the values of those it does not
# implement at which they do nothing (anything else is refused rather than silently ignored).
_REPRODUCED = {
    "max_new_tokens",
    "do_sample",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
}
_INERT = {"repetition_penalty": (None, 1.0), "cache_implementation": (None,)}


def rollout_sampling(generation_kwargs: dict) -> dict:
    """`sample_completions`' keyword arguments for a TRL trainer's `generation_kwargs` (the
    settings it passes to `generate`); a ConfigError names any setting it cannot reproduce."""
    unsupported = sorted(
        key
        for key, value in generation_kwargs.items()
        if key not in _REPRODUCED and value not in _INERT.get(key, ())
    )
    if unsupported or not generation_kwargs.get("do_sample", True):
        what = ", ".join(f"{k}={generation_kwargs[k]!r}" for k in unsupported) or "do_sample=False"
        raise ConfigError(f"compact generation does not reproduce {what}; turn it off")
    eos = generation_kwargs.get("eos_token_id")
    temperature = generation_kwargs.get("temperature")
    return {
        "max_new_tokens": generation_kwargs["max_new_tokens"],
        "eos_token_ids": [] if eos is None else [eos] if isinstance(eos, int) else list(eos),
        "pad_token_id": generation_kwargs["pad_token_id"],
        "processors": sampling_processors(
            temperature=1.0 if temperature is None else temperature,
            top_k=generation_kwargs.get("top_k"),
            top_p=generation_kwargs.get("top_p"),
            min_p=generation_kwargs.get("min_p"),
        ),
    }


def draw_tokens(probs: torch.Tensor) -> torch.Tensor:
    """One token index per row of `probs` (rows of probabilities summing to 1): the first whose
    cumulative probability passes a uniform number scaled to the row's total, drawn from torch's
    global generator, one per row. A token's chance is its probability up to the float32
    rounding of the running sum (at most 6e-8 on the embedded vocabulary of 2,048); a token of
    probability 0 is never drawn."""
    cumulative = probs.cumsum(dim=-1)
    uniform = torch.rand(len(probs), 1, dtype=cumulative.dtype, device=probs.device)
    tokens = torch.searchsorted(cumulative, uniform * cumulative[:, -1:], right=True)
    return tokens.squeeze(1).clamp_(max=probs.shape[-1] - 1)


@torch.no_grad()
def sample_completions(
    model: nn.Module,
    prompt_ids: list[list[int]],
    max_new_tokens: int,
    eos_token_ids: list[int],
    pad_token_id: int,
    processors: LogitsProcessorList | None = None,
    greedy: bool = False,
) -> list[list[int]]:
    """One sampled completion per prompt row, as token ids up to and including the first end
    token (or `max_new_tokens` ids when there is none), as TRL cuts `generate`'s output.

    `prompt_ids` may repeat a prompt (a rollout batch holds each `num_generations` times); each
    distinct prompt is prefilled once. Draws from torch's global generator; `greedy` takes each
    row's most likely token instead (after `processors`), as `generate` without sampling."""
    if not prompt_ids or any(len(ids) == 0 for ids in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    processors = processors if processors is not None else LogitsProcessorList()
    device = next(model.parameters()).device
    distinct: dict[tuple[int, ...], int] = {}
    row_prompt = torch.tensor(
        [distinct.setdefault(tuple(ids), len(distinct)) for ids in prompt_ids], device=device
    )
    width = max(len(ids) for ids in distinct)
    input_ids = torch.full((len(distinct), width), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(distinct), width), dtype=torch.long, device=device)
    for i, ids in enumerate(distinct):  # left padding, as TRL pads the prompts for `generate`
        input_ids[i, width - len(ids) :] = torch.tensor(ids, device=device)
        mask[i, width - len(ids) :] = 1
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    out = model(
        input_ids=input_ids,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
    )
    cache = returned_cache(out)
    cache.reorder_cache(row_prompt)  # one copy of its prompt's keys and values per row
    logits = out.logits[:, -1].float().index_select(0, row_prompt)
    mask = mask.index_select(0, row_prompt)
    position = positions[:, -1:].index_select(0, row_prompt)
    # The sequence so far per active row: what the logits processors see, as in `generate`.
    sequences = input_ids.index_select(0, row_prompt)

    completions: list[list[int]] = [[] for _ in prompt_ids]
    active = torch.arange(len(prompt_ids), device=device)  # the prompt row of each batch row
    eos = torch.tensor(eos_token_ids, device=device)
    for step in range(max_new_tokens):
        scores = processors(sequences, logits)
        if greedy:
            tokens = scores.argmax(dim=-1)
        else:
            tokens = draw_tokens(torch.softmax(scores, dim=-1))
        for row, token in zip(active.tolist(), tokens.tolist(), strict=True):
            completions[row].append(token)
        if step == max_new_tokens - 1:
            break
        going = ~torch.isin(tokens, eos)
        if not going.all():
            if not going.any():
                break
            keep = going.nonzero().squeeze(1)
            cache.reorder_cache(keep)  # the finished rows leave the batch
            active, tokens = active[keep], tokens[keep]
            mask, position, sequences = mask[keep], position[keep], sequences[keep]
        mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
        position = position + 1
        sequences = torch.cat([sequences, tokens[:, None]], dim=1)
        out = model(
            input_ids=tokens[:, None],
            attention_mask=mask,
            position_ids=position,
            use_cache=True,
            **{cache_keyword(type(model)): cache},
        )
        cache = returned_cache(out)
        logits = out.logits[:, -1].float()
    return completions
