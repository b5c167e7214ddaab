"""`cptlab evaluate`: a checkpoint's accuracy on benchmarks, with bootstrap intervals and the
responses kept as JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from cptlab.generation import Sampling, generate
from cptlab.io import atomic_write_text
from cptlab.metrics import bootstrap_ci, rewards, score_completions
from cptlab.tokenizer import load_tokenizer


def load_checkpoint(path: str | Path):
    """(model, tokenizer) from a local folder, offline."""
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return model, load_tokenizer(str(path))


def evaluate_rows(model, tokenizer, rows: list[dict], sampling: Sampling, seed: int = 0) -> dict:
    """Accuracy (mean over items of the mean reward over samples, i.e. avg@n) with a 95%
    bootstrap interval, and one response record per item."""
    completions = generate(model, tokenizer, [r["prompt"] for r in rows], sampling, seed)
    verdicts = score_completions(rows, completions)
    per_item = rewards(verdicts).mean(axis=1)
    low, high = bootstrap_ci(per_item, seed=seed)
    responses = [
        {
            "id": r["id"],
            "completions": c,
            "rewards": [v.reward for v in vs],
            "reasons": [v.reason for v in vs],
        }
        for r, c, vs in zip(rows, completions, verdicts, strict=True)
    ]
    return {
        "accuracy": float(np.mean(per_item)),
        "ci_low": low,
        "ci_high": high,
        "n": len(rows),
        "responses": responses,
    }


def evaluate_checkpoint(
    checkpoint: str | Path,
    rows: list[dict],
    sampling: Sampling,
    responses_out: str | Path | None = None,
    seed: int = 0,
    threads: int = 1,
) -> dict:
    torch.set_num_threads(threads)
    model, tokenizer = load_checkpoint(checkpoint)
    result = evaluate_rows(model, tokenizer, rows, sampling, seed)
    if responses_out is not None:
        atomic_write_text(responses_out, [json.dumps(r) + "\n" for r in result["responses"]])
    return {k: v for k, v in result.items() if k != "responses"}
