"""`cptlab evaluate`: a checkpoint's accuracy on benchmarks, with bootstrap intervals and the
responses kept as JSONL.

Accuracy is avg@k: the mean over items of the mean reward over an item's k samples (k = 1 and
temperature 0 is greedy decoding). The 95% interval is a percentile bootstrap over items.
`run_evaluation` writes the responses file first and the EVAL.json summary last (atomically),
so an EVAL.json on disk means the evaluation completed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from cptlab.artifacts import atomic_write_json, atomic_write_text
from cptlab.checkpoints import load_checkpoint
from cptlab.domains import get_benchmark
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import bootstrap_ci, rewards, score_completions
from cptlab.evaluation.settings import EvalSettings
from cptlab.rows import RowError, read_jsonl


def summarise(rows: list[dict], completions: list[list[str]], seed: int = 0) -> dict:
    """Score completions: accuracy (avg@k), bootstrap interval and one response per item."""
    verdicts = score_completions(rows, completions)
    per_item = rewards(verdicts).mean(axis=1) if rows else np.zeros(0)
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
        "accuracy": float(np.mean(per_item)) if rows else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "n": len(rows),
        "responses": responses,
    }


def _check_rows(rows: list[dict], benchmark: str, data: Path) -> None:
    other = sorted({r["benchmark"] for r in rows} - {benchmark})
    if other:
        raise RowError(f"{data}: rows of benchmark(s) {other}, expected only {benchmark!r}")


def run_evaluation(
    config: dict,
    checkpoint: str | Path,
    data: str | Path,
    benchmark: str,
    out: str | Path,
    responses_out: str | Path,
    threads: int = 1,
) -> dict:
    """Evaluate `checkpoint` on the rows of `data` (the prepared JSONL of `benchmark`) with the
    config's `evaluation` settings; write the responses JSONL, then EVAL.json (`out`) last.
    Returns the EVAL.json record."""
    started = time.perf_counter()
    settings = EvalSettings.from_config(config)
    info = get_benchmark(benchmark)
    data = Path(data)
    if not data.exists():
        raise FileNotFoundError(f"{data}: no such data file")
    rows = read_jsonl(data)
    _check_rows(rows, benchmark, data)
    if settings.n is not None:
        rows = rows[: settings.n]
    torch.set_num_threads(max(1, threads))
    stats: dict = {"tokens_generated": 0}
    prompts = [r["prompt"] for r in rows]
    if settings.backend == "vllm":
        from cptlab.evaluation.vllm_backend import generate_with_vllm

        completions = generate_with_vllm(
            checkpoint,
            prompts,
            settings.sampling,
            settings.seed,
            options=settings.vllm,
            stats=stats,
            chat_template_kwargs=settings.chat_template_kwargs,
        )
    else:
        model, tokenizer = load_checkpoint(checkpoint)
        completions = generate(
            model,
            tokenizer,
            prompts,
            settings.sampling,
            settings.seed,
            batch_size=settings.batch_size,
            stats=stats,
            chat_template_kwargs=settings.chat_template_kwargs,
        )
    result = summarise(rows, completions, settings.seed)
    atomic_write_text(
        responses_out, [json.dumps(r, ensure_ascii=False) + "\n" for r in result["responses"]]
    )
    record = {
        "benchmark": benchmark,
        "domain": info.domain,
        "split": info.split,
        "checkpoint": str(checkpoint),
        "accuracy": result["accuracy"],
        "ci_low": result["ci_low"],
        "ci_high": result["ci_high"],
        "n": result["n"],
        "samples": settings.samples,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "backend": settings.backend,
        "seed": settings.seed,
        "seconds": round(time.perf_counter() - started, 3),
        "tokens_generated": int(stats["tokens_generated"]),
    }
    atomic_write_json(out, record)
    return record
