"""The tiny base model: a Qwen2-architecture causal LM built from a config, no hub."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

if TYPE_CHECKING:  # annotations only: the weights' code does not read the config
    from cptlab.base_model.settings import ArchitectureSettings


def build_model(
    spec: ArchitectureSettings, tokenizer: PreTrainedTokenizerFast, seed: int
) -> Qwen2ForCausalLM:
    """A freshly initialised Qwen2 model of architecture `spec`, seeded."""
    return seeded_model(
        Qwen2Config,
        Qwen2ForCausalLM,
        tokenizer,
        seed,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=spec.tie_word_embeddings,
    )


def seeded_model(
    config_class: type[PretrainedConfig],
    model_class: type[PreTrainedModel],
    tokenizer: PreTrainedTokenizerFast,
    seed: int,
    **shape,
) -> PreTrainedModel:
    """A freshly initialised `model_class` of `shape` (its config's keyword arguments), with the
    tokenizer's vocabulary and special tokens, seeded: the same arguments give the same
    weights."""
    config = config_class(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
        **shape,
    )
    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
