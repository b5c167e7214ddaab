"""A rollout batch's forward with each distinct prompt computed once (`shared_prompt_forward`).

A GRPO or SDPO batch holds `num_generations` completions of every prompt, and TRL forwards each
row whole, prompt included. On the embedded testbed a prompt is 15-33 tokens and a completion
5-13 on average, so most of the forward and backward is the same prompt computed again. Here
each distinct prompt is forwarded once with its key/value cache, the cache is repeated for the
prompt's completions, and the completions are forwarded on top of it.

The result equals the whole-row forward up to float rounding: positions, masks and every layer
are the model's own (a prompt row is left-padded, so equal prompts are equal tensors), and the
gradient reaches each prompt token from all of its completions, summed by the repeat's backward.
The head's output is materialised as full logits (batch x completion x vocabulary), as TRL's
SDPO does and its fused GRPO head avoids: right for the embedded model, not for a 150k vocabulary
with 8k-token completions (config/paper.yaml leaves it off).
"""

from __future__ import annotations

import functools
import inspect

import torch
from torch import nn


def completion_hidden_states(
    backbone: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, width: int
) -> torch.Tensor:
    """The last hidden state at every position that predicts one of the last `width` tokens
    (the completion), shape (rows, width, hidden): the prompt's last position, then the
    completion's positions but its last."""
    prompt_width = input_ids.size(1) - width
    if prompt_width < 1 or width < 1:
        raise ValueError(f"need a prompt and a completion, got {prompt_width} + {width} columns")
    prompts = torch.cat([input_ids[:, :prompt_width], attention_mask[:, :prompt_width]], dim=1)
    distinct, row_prompt = torch.unique(prompts, dim=0, return_inverse=True)
    # one row that carries each distinct prompt (any will do: they are equal)
    carrier = torch.empty(len(distinct), dtype=torch.long, device=input_ids.device)
    carrier.scatter_(0, row_prompt, torch.arange(len(row_prompt), device=input_ids.device))
    prompt = backbone(
        input_ids=input_ids[carrier, :prompt_width],
        attention_mask=attention_mask[carrier, :prompt_width],
        use_cache=True,
    )
    cache = returned_cache(prompt)
    cache.reorder_cache(row_prompt)  # one copy of its prompt's keys and values per row
    completion = backbone(
        input_ids=input_ids[:, prompt_width:],
        attention_mask=attention_mask,
        use_cache=True,
        **{cache_keyword(type(backbone)): cache},
    )
    last_prompt = prompt.last_hidden_state[:, -1:].index_select(0, row_prompt)
    return torch.cat([last_prompt, completion.last_hidden_state[:, :-1]], dim=1)


def completion_logits(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    width: int,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Temperature-scaled logits for the last `width` tokens of each row, as TRL's SDPO
    `_forward_logits` returns them (rows, width, vocabulary)."""
    backbone = getattr(model, model.base_model_prefix)
    hidden = completion_hidden_states(backbone, input_ids, attention_mask, width)
    return model.get_output_embeddings()(hidden) / temperature


def shareable(model: nn.Module, unwrapped: nn.Module) -> bool:
    """Whether the shared-prompt forward can stand in for `model(...)`: a plain causal LM,
    called unwrapped (a DDP or DeepSpeed wrapper must see the forward to reduce the gradients)
    and without activation checkpointing (which turns the key/value cache off)."""
    return (
        model is unwrapped
        and hasattr(model, getattr(model, "base_model_prefix", "") or "\0")
        and not _checkpointing(model)
        and not hasattr(model, "peft_config")
    )


def _checkpointing(model: nn.Module) -> bool:
    # transformers 5.20 renamed gradient to activation checkpointing (the old name warns)
    if hasattr(type(model), "is_activation_checkpointing"):
        return bool(model.is_activation_checkpointing)
    return bool(getattr(model, "is_gradient_checkpointing", False))


@functools.cache
def cache_keyword(backbone: type[nn.Module]) -> str:
    # transformers 5.24 renamed `past_key_values` to `cache` (the old name warns until 5.40); the
    # vLLM environment's 5.19 has only the old one. Read once per class, not per forward.
    parameters = inspect.signature(backbone.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def returned_cache(output):
    """The key/value cache a forward returned: `cache` in transformers 5.24, `past_key_values`
    in 5.19 (the vLLM environment)."""
    return output.cache if "cache" in output else output.past_key_values
