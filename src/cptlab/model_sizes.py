"""A Qwen2/Qwen3 decoder's sizes, read from its config.json, for the memory model
(cptlab.memory): its parameters, its KV cache per token, what autograd keeps of one layer for
the backward, and the most a layer holds at once without gradient. The activation formulas are
transformers' Qwen3DecoderLayer with SDPA attention on a padded batch, counted on tiny models
(tests/test_memory.py). The architecture comes from a local folder's or the HF cache's
config.json, else from PUBLISHED_ARCHITECTURES. No heavy imports: `cptlab plan-memory` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

FP32 = 4

# Qwen/Qwen3-4B's config.json (huggingface.co/Qwen/Qwen3-4B): the paper's base, which no test
# machine holds. 4,022,468,096 parameters.
PUBLISHED_ARCHITECTURES: dict[str, dict] = {
    "Qwen/Qwen3-4B": {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 2560,
        "num_hidden_layers": 36,
        "intermediate_size": 9728,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "tie_word_embeddings": True,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
    }
}


@dataclass(frozen=True)
class Architecture:
    """A Qwen2/Qwen3 decoder's sizes, from its config.json (`from_config`)."""

    model_type: str
    vocab: int
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    max_positions: int
    dtype: str

    @classmethod
    def from_config(cls, data: Mapping) -> Architecture:
        model_type = data.get("model_type")
        if model_type not in ("qwen2", "qwen3"):
            raise ValueError(f"model_type {model_type!r}: the memory model knows qwen2 and qwen3")
        heads = int(data["num_attention_heads"])
        return cls(
            model_type=model_type,
            vocab=int(data["vocab_size"]),
            hidden=int(data["hidden_size"]),
            layers=int(data["num_hidden_layers"]),
            intermediate=int(data["intermediate_size"]),
            heads=heads,
            kv_heads=int(data.get("num_key_value_heads") or heads),
            head_dim=int(data.get("head_dim") or data["hidden_size"] // heads),
            tied=bool(data.get("tie_word_embeddings", False)),
            max_positions=int(data.get("max_position_embeddings", 0)),
            dtype=str(data.get("torch_dtype") or data.get("dtype") or "float32"),
        )

    @property
    def parameters(self) -> int:
        """Parameters: embeddings, per layer the attention (Qwen3: q/k norms; Qwen2: q/k/v
        biases), the SwiGLU MLP and two norms, the final norm, and an untied output layer."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q + 2 * kv) + q * self.hidden
        attention += 2 * self.head_dim if self.model_type == "qwen3" else q + 2 * kv
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        head = 0 if self.tied else self.vocab * self.hidden
        return self.vocab * self.hidden + self.layers * layer + self.hidden + head

    def kv_cache_per_token(self, b: int) -> int:
        """A KV cache's bytes per token: keys and values of every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * b

    def layer_activations(self, rows: int, tokens: int, b: int) -> float:
        """What autograd keeps of one decoder layer (transformers' Qwen3DecoderLayer, SDPA
        attention, a padded batch) for `rows` x `tokens` in a `b`-byte dtype. Per token: four
        hidden-wide tensors in the dtype and two in fp32 (the RMSNorms compute in fp32), four
        MLP-wide ones; the queries normed (dtype and fp32), rotated, and the attention's output
        (3 in the dtype, 1 in fp32); the keys normed (1 + 1); the keys and values as attention
        reads them, repeated to every query head (a copy, query-wide, unless there is one KV
        head: a view); fp32 statistics per head (two norms' and the attention's log-sum-exp);
        and the attention mask, which SDPA turns from booleans into the dtype for every layer,
        [rows, 1, tokens, tokens]. Counted with saved-tensor hooks (tests/test_memory.py)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        repeated = q if 1 < self.kv_heads < self.heads else kv
        per_token = (
            (4 * b + 2 * FP32) * self.hidden
            + 4 * b * self.intermediate
            + (3 * b + FP32) * q
            + 2 * b * repeated
            + (b + FP32) * kv
            + FP32 * (2 * self.heads + self.kv_heads + 2)
        )
        return rows * tokens * (per_token + b * tokens)

    def no_grad_layer(self, rows: int, tokens: int, b: int) -> float:
        """The most a decoder layer holds at once in a forward without gradient, its larger of
        two moments (counted with TorchBytes, tests/test_memory.py). In the attention: the
        residual and the normed input, the rotated queries and the output, the keys and values
        (and their copies repeated to every head, unless one KV head makes them views), the
        log-sum-exp, and the boolean [rows, 1, tokens, tokens] mask beside SDPA's copy of it in
        the dtype. In the MLP: the residual, the attention's sum and its norm, three MLP-wide
        tensors (SiLU of the gate, the up projection, their product) and the boolean mask."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        copies = 2 * q if 1 < self.kv_heads < self.heads else 0
        attention = 2 * b * (self.hidden + q + kv + copies) + FP32 * self.heads + (1 + b) * tokens
        mlp = 3 * b * (self.hidden + self.intermediate) + tokens
        return rows * tokens * max(attention, mlp)

    def outside_layers(self, rows: int, tokens: int, b: int) -> float:
        """What autograd keeps outside the layers: the token ids, the embeddings' output, the
        final norm's input (dtype and fp32) and the rotary tables."""
        return rows * tokens * (8 + (2 * b + FP32) * self.hidden + FP32 + 2 * b * self.head_dim)

    def describe(self) -> str:
        tied = "tied" if self.tied else "untied"
        return (
            f"{self.parameters:,} parameters ({self.model_type}: vocabulary "
            f"{self.vocab:,}, hidden {self.hidden:,}, {self.layers} layers, MLP "
            f"{self.intermediate:,}, {self.heads} heads / {self.kv_heads} KV heads of "
            f"{self.head_dim}, {tied} embeddings)"
        )


def model_config(name_or_path: str) -> tuple[dict, str] | None:
    """(config.json's content, where it came from) of a local folder, a hub name in the HF
    cache, or a published architecture; None when none has it."""
    folder = Path(name_or_path)
    if (folder / "config.json").is_file():
        return json.loads((folder / "config.json").read_text()), str(folder / "config.json")
    if not name_or_path.startswith(("/", ".")) and name_or_path.count("/") == 1:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name_or_path, "config.json")
        if isinstance(cached, str):
            return json.loads(Path(cached).read_text()), cached
    if name_or_path in PUBLISHED_ARCHITECTURES:
        return PUBLISHED_ARCHITECTURES[name_or_path], "cptlab.model_sizes.PUBLISHED_ARCHITECTURES"
    return None
