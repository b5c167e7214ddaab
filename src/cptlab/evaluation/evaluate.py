"""`cptlab evaluate`: a checkpoint's accuracy on benchmarks, with bootstrap intervals and the
responses kept as JSONL.

Accuracy is avg@k: the mean over items of the mean reward over an item's k samples (k = 1 and
temperature 0 is greedy decoding). The 95% interval is a percentile bootstrap over items. Where
the verifier runs tests (code), `test_pass_fraction` is the same average of the fraction of
tests each completion passed, with its interval: the metric the study's verl reports for code
(`acc`), beside the all-pass accuracy that is its reward; null for other benchmarks.
`run_evaluation` writes the responses file first and the EVAL.json summary last (atomically),
so an EVAL.json on disk means the evaluation completed.

Completions are scored as finished (not truncated): in the study truncation changes only the
feedback, never a reward or a pass fraction (tests/test_train_rewards.py), and evaluation
records no feedback.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from cptlab.artifacts import atomic_write_json, atomic_write_text
from cptlab.chat import prompt_length
from cptlab.checkpoints import load_checkpoint, load_tokenizer
from cptlab.domains import get_benchmark
from cptlab.errors import InputError
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import (
    PASS_FRACTION_KEYS,
    bootstrap_ci,
    pass_fractions,
    rewards,
    score_completions,
)
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import Layout
from cptlab.plan import Plan, builds_base, eval_benchmarks
from cptlab.rows import RowError, read_jsonl
from cptlab.verifiers import Verdict


def _pass_fraction_summary(verdicts: list[list[Verdict]], seed: int) -> dict:
    """test_pass_fraction (avg@k) and its bootstrap interval; None each without tests."""
    fractions = pass_fractions(verdicts)
    if fractions is None:
        return dict.fromkeys(PASS_FRACTION_KEYS)
    per_item = fractions.mean(axis=1)
    low, high = bootstrap_ci(per_item, seed=seed)
    return dict(zip(PASS_FRACTION_KEYS, (float(np.mean(per_item)), low, high), strict=True))


def _response(row: dict, completions: list[str], verdicts: list[Verdict]) -> dict:
    response = {
        "id": row["id"],
        "completions": completions,
        "rewards": [v.reward for v in verdicts],
        "reasons": [v.reason for v in verdicts],
    }
    if any(v.test_pass_fraction is not None for v in verdicts):
        response["test_pass_fractions"] = [v.test_pass_fraction for v in verdicts]
    return response


def summarise(rows: list[dict], completions: list[list[str]], seed: int = 0) -> dict:
    """Score completions: accuracy (avg@k), bootstrap interval, the test pass fraction where
    the verifier runs tests, and one response per item."""
    verdicts = score_completions(rows, completions)
    per_item = rewards(verdicts).mean(axis=1) if rows else np.zeros(0)
    low, high = bootstrap_ci(per_item, seed=seed)
    return {
        "accuracy": float(np.mean(per_item)) if rows else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "n": len(rows),
        **_pass_fraction_summary(verdicts, seed),
        "responses": [_response(*item) for item in zip(rows, completions, verdicts, strict=True)],
    }


def _check_rows(rows: list[dict], benchmark: str, data: Path) -> None:
    other = sorted({r["benchmark"] for r in rows} - {benchmark})
    if other:
        raise RowError(f"{data}: rows of benchmark(s) {other}, expected only {benchmark!r}")


Generate = Callable[[list[list[dict]], dict], list[list[str]]]


def load_generator(checkpoint: str | Path, settings: EvalSettings) -> Generate:
    """`generate(prompts, stats)`: completions of `checkpoint` with the evaluation settings,
    the model (HF) or the engine (vLLM) loaded once for every benchmark."""
    template = settings.chat_template_kwargs or {}
    if settings.backend == "vllm":
        from cptlab.evaluation.vllm_backend import build_llm, generate_vllm

        llm = build_llm(checkpoint, settings.vllm, settings.seed)
        return lambda prompts, stats: generate_vllm(
            llm,
            prompts,
            settings.sampling,
            settings.seed,
            stats=stats,
            chat_template_kwargs=template,
        )
    model, tokenizer = load_checkpoint(checkpoint)
    return lambda prompts, stats: generate(
        model,
        tokenizer,
        prompts,
        settings.sampling,
        settings.seed,
        batch_size=settings.batch_size,
        stats=stats,
        chat_template_kwargs=template,
    )


def read_benchmark_rows(benchmark: str, data: str | Path, settings: EvalSettings) -> list[dict]:
    """The rows of `data` (the prepared JSONL of `benchmark`) that the evaluation scores: the
    first `evaluation.n`. Checked before any model loads."""
    get_benchmark(benchmark)  # an unknown name is an error naming it
    data = Path(data)
    if not data.exists():
        raise FileNotFoundError(f"{data}: no such data file")
    rows = read_jsonl(data)
    _check_rows(rows, benchmark, data)
    return rows if settings.n is None else rows[: settings.n]


def within_prompt_limit(
    rows: list[dict], benchmark: str, checkpoint: str | Path, settings: EvalSettings
) -> tuple[list[dict], int]:
    """(the rows whose templated prompt fits `evaluation.max_prompt_length`, how many do not).
    The study drops longer test prompts (verl's filter_overlong_prompts, on its validation set
    too); they are counted, not scored."""
    if settings.max_prompt_length is None:
        return rows, 0
    tokenizer = load_tokenizer(checkpoint)
    template = settings.chat_template_kwargs or {}
    kept = [
        r
        for r in rows
        if prompt_length(tokenizer, r["prompt"], template) <= settings.max_prompt_length
    ]
    if rows and not kept:
        raise InputError(
            f"{benchmark}: every item's prompt is longer than evaluation.max_prompt_length="
            f"{settings.max_prompt_length} tokens"
        )
    return kept, len(rows) - len(kept)


def evaluate_benchmark(
    generate_completions: Generate,
    settings: EvalSettings,
    checkpoint: str | Path,
    benchmark: str,
    rows: list[dict],
    out: str | Path,
    responses_out: str | Path,
    too_long: int = 0,
) -> dict:
    """Score `rows` of `benchmark`; write the responses JSONL, then EVAL.json (`out`) last.
    Returns the EVAL.json record; its `seconds` are this benchmark's (generation and scoring),
    not the model's loading; `too_long` items were left out for their prompt's length."""
    started = time.perf_counter()
    info = get_benchmark(benchmark)
    stats: dict = {"tokens_generated": 0}
    completions = generate_completions([r["prompt"] for r in rows], stats)
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
        "too_long": too_long,
        **{key: result[key] for key in PASS_FRACTION_KEYS},
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


def run_evaluation(
    config: dict,
    checkpoint: str | Path,
    data: str | Path,
    benchmark: str,
    out: str | Path,
    responses_out: str | Path,
    threads: int = 1,
) -> dict:
    """Evaluate `checkpoint` on one benchmark with the config's `evaluation` settings
    (evaluate_benchmark). Returns the EVAL.json record."""
    settings = EvalSettings.for_checkpoint(config)
    torch.set_num_threads(max(1, threads))
    rows = read_benchmark_rows(benchmark, data, settings)
    rows, too_long = within_prompt_limit(rows, benchmark, checkpoint, settings)
    generate_completions = load_generator(checkpoint, settings)
    return evaluate_benchmark(
        generate_completions, settings, checkpoint, benchmark, rows, out, responses_out, too_long
    )


def evaluate_checkpoint(
    config: dict,
    layout: Layout,
    method: str | None = None,
    seed: int | None = None,
    stage: int = 0,
    threads: int = 1,
) -> list[dict]:
    """Evaluate one checkpoint of the experiment (the base, or stage `stage` of chain
    (method, seed)) on every benchmark of the config, loading it once; each benchmark's files
    go where the layout puts them, EVAL.json last. Returns the records."""
    base = method is None or stage == 0
    settings = EvalSettings.for_checkpoint(config, None if base else method)
    torch.set_num_threads(max(1, threads))
    if base:
        checkpoint = layout.base_dir if builds_base(config) else config["base"]["path"]
    else:
        domain = Plan.from_config(config).stage_domain(stage)
        checkpoint = layout.stage_dir(method, seed, stage, domain)
    rows = {
        b.name: within_prompt_limit(
            read_benchmark_rows(b.name, layout.data_file(b.name), settings),
            b.name,
            checkpoint,
            settings,
        )
        for b in eval_benchmarks(config)
    }
    generate_completions = load_generator(checkpoint, settings)
    return [
        evaluate_benchmark(
            generate_completions,
            settings,
            checkpoint,
            benchmark,
            benchmark_rows,
            layout.eval_file(benchmark, method, seed, stage),
            layout.responses_file(benchmark, method, seed, stage),
            too_long,
        )
        for benchmark, (benchmark_rows, too_long) in rows.items()
    ]
