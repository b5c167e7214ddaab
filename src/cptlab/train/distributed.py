"""Helpers for code that runs the same way on one process and under a distributed launcher."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch


def gathered_parameters(
    params: Iterable[torch.nn.Parameter], modifier_rank: int | None = None
) -> contextlib.AbstractContextManager:
    """A context in which `params` hold their full values on every process.

    Under DeepSpeed ZeRO-3 each process keeps only a shard of every parameter (the others are
    empty), so reading the weights (a digest, a saved EMA teacher) or writing them (a restored
    teacher, from `modifier_rank`) needs them gathered first; elsewhere they are whole already
    and this is a no-op.
    """
    from transformers.integrations import is_deepspeed_zero3_enabled

    if is_deepspeed_zero3_enabled():
        import deepspeed

        return deepspeed.zero.GatheredParameters(params, modifier_rank=modifier_rank)
    return contextlib.nullcontext()
