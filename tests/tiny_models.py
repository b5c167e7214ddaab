"""Tiny random Qwen2 models for tests that need real checkpoints (HF names, tied embeddings)."""

from __future__ import annotations

import torch


def tiny_qwen2(vocab_size: int, seed: int = 0):
    """A 2-layer, width-16 Qwen2ForCausalLM with tied embeddings, seeded."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)
