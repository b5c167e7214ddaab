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

A batch's completions are padded to its longest: a tool batch runs to about 40 tokens while its
completions average 12. With `groups` above 1 the rows are sorted by completion length and
forwarded in that many groups, each as wide as its own longest completion, on copies of the one
prompt cache; every kept position sees the same tokens at the same positions, so the result is
again the whole-row forward's up to float rounding, and the padding's share of the work goes.
"""

from __future__ import annotations

import copy
import functools
import inspect

import torch
from torch import nn

# Groups of the forward, rows sorted by completion length: 32 rows each in the
# embedded default's 256-row batch. On a tool batch (completions of 12.7 tokens on average, the
# longest 40) one forward and backward took 1.7-2.2 s in one group, 1.2-1.3 s in 2, 1.1 s in
# 4 and 0.9-1.0 s in 8 (docs/notebook/speed.md).
LENGTH_GROUPS = 8


def completion_hidden_states(
    backbone: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    width: int,
    groups: int = 1,
) -> torch.Tensor:
    """The last hidden state at every position that predicts one of the last `width` tokens
    (the completion), shape (rows, width, hidden): the prompt's last position, then the
    completion's positions but its last. With `groups` > 1, rows of similar completion length
    are forwarded together, each group only as wide as its longest; positions past a row's
    completion hold zeros."""
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
    last_prompt = prompt.last_hidden_state[:, -1:].index_select(0, row_prompt)
    # a row's completion ends at its last attended position (a mask may have holes)
    positions = torch.arange(1, width + 1, device=input_ids.device)
    lengths = (attention_mask[:, prompt_width:] * positions).amax(dim=1)
    order = torch.argsort(lengths, stable=True)
    pieces = []
    for rows in order.tensor_split(max(1, min(groups, len(order)))):
        group_width = max(1, int(lengths[rows].max()))
        cache = rows_cache(returned_cache(prompt), row_prompt.index_select(0, rows))
        completion = backbone(
            input_ids=input_ids[rows, prompt_width : prompt_width + group_width],
            attention_mask=attention_mask[rows, : prompt_width + group_width],
            use_cache=True,
            **{cache_keyword(type(backbone)): cache},
        )
        hidden = completion.last_hidden_state[:, :-1]
        pieces.append(nn.functional.pad(hidden, (0, 0, 0, width - group_width)))
    completion_states = torch.cat(pieces).index_select(0, torch.argsort(order))
    return torch.cat([last_prompt, completion_states], dim=1)


def rows_cache(cache, rows: torch.Tensor):
    """A copy of a key/value cache holding batch rows `rows` of it (repeats allowed), which a
    forward may extend without touching `cache`: its layers re-select their tensors rather than
    writing into them, so shallow copies of the layers suffice."""
    selected = copy.copy(cache)
    selected.layers = [copy.copy(layer) for layer in cache.layers]
    selected.reorder_cache(rows)
    return selected


def completion_logits(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    width: int,
    temperature: float = 1.0,
    groups: int = 1,
) -> torch.Tensor:
    """Temperature-scaled logits for the last `width` tokens of each row, as TRL's SDPO
    `_forward_logits` returns them (rows, width, vocabulary); `groups` as in
    `completion_hidden_states`."""
    backbone = getattr(model, model.base_model_prefix)
    hidden = completion_hidden_states(backbone, input_ids, attention_mask, width, groups)
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
