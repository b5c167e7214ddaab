"""Streaming access to the tensors of a safetensors checkpoint, one tensor at a time.

A checkpoint is an HF model folder with `model.safetensors`, or a sharded one with
`model.safetensors.index.json` (its "weight_map" names the shard of each tensor), or a single
`.safetensors` file. Tensors are memory-mapped and read on demand, so a 4 B-parameter pair never
needs more memory than its largest matrix (the embedding) a few times over.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from cptlab.errors import InputError

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


class SafetensorsCheckpoint:
    """The tensors of one checkpoint by name; `get` loads one as float32 on a device."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._shard_of: dict[str, Path] = {}
        if self.path.is_file() and self.path.suffix == ".safetensors":
            self._add_file(self.path)
        elif (self.path / INDEX).is_file():
            index_path = self.path / INDEX
            try:
                weight_map = json.loads(index_path.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise InputError(f"{index_path}: not a safetensors index ({err})") from None
            for name, shard in weight_map.items():
                shard_path = self.path / shard
                if not shard_path.is_file():
                    raise FileNotFoundError(f"{index_path}: shard {shard} of {name} is missing")
                self._shard_of[name] = shard_path
        elif (self.path / SINGLE).is_file():
            self._add_file(self.path / SINGLE)
        elif self.path.exists():
            raise FileNotFoundError(f"{self.path}: neither {SINGLE} nor {INDEX} found")
        else:
            raise FileNotFoundError(f"{self.path}: no such checkpoint")
        self._shapes: dict[str, tuple[int, ...]] = {}
        for shard in sorted(set(self._shard_of.values())):
            with safe_open(str(shard), framework="pt") as handle:
                for name in handle.keys():
                    if self._shard_of.get(name) == shard:
                        self._shapes[name] = tuple(handle.get_slice(name).get_shape())
        missing = sorted(set(self._shard_of) - set(self._shapes))
        if missing:
            raise InputError(f"{self.path}: the index names tensors its shards lack: {missing[:5]}")

    def _add_file(self, file: Path) -> None:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():
                    self._shard_of[name] = file
        except Exception as err:  # safetensors raises its own error types
            raise InputError(f"{file}: not a readable safetensors file ({err})") from None

    def keys(self) -> list[str]:
        """Tensor names in a stable order (sorted)."""
        return sorted(self._shapes)

    def __contains__(self, name: str) -> bool:
        return name in self._shapes

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def get(self, name: str, device: str | torch.device = "cpu") -> torch.Tensor:
        """Tensor `name` as float32 on `device` (bf16/fp16 weights are upcast exactly)."""
        if name not in self._shapes:
            raise InputError(f"{self.path}: no tensor {name!r}")
        with safe_open(str(self._shard_of[name]), framework="pt") as handle:
            tensor = handle.get_tensor(name)
        return tensor.to(device=device, dtype=torch.float32)

    @property
    def tie_word_embeddings(self) -> bool | None:
        """`tie_word_embeddings` from the folder's config.json (None when there is none)."""
        config = (self.path if self.path.is_dir() else self.path.parent) / "config.json"
        if not config.is_file():
            return None
        try:
            return bool(json.loads(config.read_text()).get("tie_word_embeddings", False))
        except json.JSONDecodeError:
            return None
