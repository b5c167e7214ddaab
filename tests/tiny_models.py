"""Tiny random Qwen2 and Qwen3 models for tests that need real checkpoints (HF names, tied
embeddings)."""

from __future__ import annotations

import torch

# 2 layers, width 16, tied embeddings: the shape both families share here.
TINY_SHAPE = {
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
}


def tiny_qwen2(vocab_size: int, seed: int = 0):
    """A 2-layer, width-16 Qwen2ForCausalLM with tied embeddings, seeded."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=vocab_size, **TINY_SHAPE)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def tiny_qwen3(vocab_size: int, seed: int = 0):
    """The same shape as a Qwen3ForCausalLM (per-head q/k norms, no attention biases), as the
    paper's base is built, seeded."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=vocab_size, head_dim=4, **TINY_SHAPE)
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)
