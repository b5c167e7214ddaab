"""Loading a checkpoint folder (weights and tokenizer) for evaluation, training and the drift
analyses. Nothing here downloads: a hub name must already be in the local HF cache."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from cptlab.errors import InputError


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """The tokenizer saved in `path` (AutoTokenizer may swap in another class for a locally
    trained tokenizer), padded on the left for decoder-only generation."""
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    tokenizer.padding_side = "left"  # not always restored from tokenizer_config.json
    return tokenizer


def load_checkpoint(path: str | Path):
    """(model, tokenizer) from a local folder, or a hub name already in the HF cache (fill the
    cache once on a machine with internet)."""
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return model, load_tokenizer(path)


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
