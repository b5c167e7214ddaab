"""Loading a checkpoint folder (weights and tokenizer) for evaluation, training and the drift
analyses. Nothing here downloads: a hub name must already be in the local HF cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from cptlab.errors import InputError


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """The tokenizer saved in `path` (AutoTokenizer may swap in another class for a locally
    trained tokenizer), padded on the left for decoder-only generation."""
    try:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    except Exception as err:
        message = " ".join(str(err).split())[:300]
        raise InputError(
            f"{path}: no loadable tokenizer ({type(err).__name__}: {message})"
        ) from None
    tokenizer.padding_side = "left"  # not always restored from tokenizer_config.json
    return tokenizer


def load_model(path: str | Path, **options: Any):
    """The model in `path` (a local folder, or a hub name already in the HF cache: fill the
    cache once on a machine with internet). A folder that does not hold a loadable model (a
    truncated or corrupt weights file, a broken config) is an InputError naming it."""
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, **options)
    except Exception as err:  # safetensors, json and transformers each raise their own types
        message = " ".join(str(err).split())[:300]
        raise InputError(
            f"{path}: not a loadable checkpoint ({type(err).__name__}: {message})"
        ) from None


def load_checkpoint(path: str | Path):
    """(model, tokenizer) of a checkpoint folder (load_model)."""
    return load_model(path), load_tokenizer(path)


def model_folder(name_or_path: str | Path) -> Path:
    """The local folder of a model's weights: `name_or_path` itself, or a hub name's snapshot
    in the local HF cache (the drift analyses read the safetensors files directly)."""
    if Path(name_or_path).exists():
        return Path(name_or_path)
    from huggingface_hub import snapshot_download

    patterns = ["*.safetensors", "*.safetensors.index.json", "config.json"]
    try:
        return Path(
            snapshot_download(str(name_or_path), allow_patterns=patterns, local_files_only=True)
        )
    except Exception as err:  # not cached (huggingface_hub raises several error types)
        raise InputError(
            f"{name_or_path}: not a folder and not in the local HF cache ({type(err).__name__}); "
            "download it once on a machine with internet (README: the paper config on a "
            "SLURM cluster)"
        ) from None
