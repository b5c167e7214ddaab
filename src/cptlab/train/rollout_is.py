"""Rollout importance sampling: the correction for rollouts sampled by an engine (vLLM) whose
probabilities differ from the training model's.

The weight of a completion token is p_train(token) / p_rollout(token), with p_train the training
model's probability before the update and p_rollout the sampler's. TRL's GRPOTrainer computes it
itself (`vllm_importance_sampling_*`); TRL's SDPOTrainer has none, so cptlab's SDPO uses this
module with the same keys and modes, and multiplies the weight into its per-token distillation
loss as the study does (verl's `rollout_is`, applied in its SDPO loss).
"""

from __future__ import annotations

import math

import torch

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def sampling_logps(logprobs: list[list[list[float | None]]]) -> list[list[float]]:
    """The sampled token's log-probability per completion token, from vLLM's per-token lists
    (TRL's `VLLMGeneration.generate`: the sampled token's entry comes first). A missing value
    becomes NaN, which `rollout_is_weights` treats as no correction."""
    return [[math.nan if lp[0] is None else lp[0] for lp in sequence] for sequence in logprobs]


def rollout_is_weights(
    train_logps: torch.Tensor,
    rollout_logps: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> torch.Tensor:
    """Detached importance weights, [batch, tokens] for token modes, [batch, 1] for sequence
    modes, with TRL's semantics: `*_truncate` clamps the ratio into [clip_min, clip_max]; `*_mask`
    zeroes ratios outside it. Tokens without a rollout log-prob (NaN) count as ratio 1."""
    if mode not in MODES:
        raise ValueError(f"vllm_importance_sampling_mode must be one of {MODES}, got {mode!r}")
    diff = torch.nan_to_num((train_logps - rollout_logps) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff.clamp(-20.0, 20.0))  # as verl: a bound against overflow only
    if mode.endswith("truncate"):
        ratio = ratio.clamp(min=clip_min, max=clip_max)
    else:
        low = -math.inf if clip_min is None else clip_min
        high = math.inf if clip_max is None else clip_max
        ratio = ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    return ratio.detach()
