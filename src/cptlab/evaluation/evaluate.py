"""`cptlab evaluate`: a checkpoint's accuracy on benchmarks, with bootstrap intervals and the
responses kept as JSONL.

Accuracy is avg@k: the mean over items of the mean reward over an item's k samples (k = 1 and
temperature 0 is greedy decoding). The 95% interval is a percentile bootstrap over items. With
k >= 2 samples, pass@1, pass@k and maj@k come from the same samples, each with its bootstrap
interval, and `pass_at` gives pass@j for j = 1, 2, 4, ... and k (cptlab.evaluation.scoring). Where
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
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import torch

from cptlab.artifacts import atomic_write_json, atomic_write_text, read_json_lines
from cptlab.chat import prompt_length
from cptlab.checkpoints import load_checkpoint, load_tokenizer
from cptlab.domains import get_benchmark
from cptlab.errors import InputError
from cptlab.evaluation.generation import generate
from cptlab.evaluation.scoring import (
    PASS_FRACTION_KEYS,
    SAMPLED_KEYS,
    bootstrap_ci,
    item_majority,
    item_pass_at_k,
    score_completions,
)
from cptlab.evaluation.settings import EvalSettings
from cptlab.layout import Layout
from cptlab.plan import Plan, builds_base, eval_benchmarks
from cptlab.rows import RowError, read_jsonl
from cptlab.train.peak_memory import process_memory
from cptlab.train.spec import method_settings, resolve_stage
from cptlab.train.tracking import log_scores
from cptlab.verifiers import Verdict


def _response(row: dict, completions: list[str], verdicts: list[Verdict]) -> dict:
    response = {
        "id": row["id"],
        "completions": completions,
        "rewards": [v.reward for v in verdicts],
        "reasons": [v.reason for v in verdicts],
    }
    if any(v.answer is not None for v in verdicts):  # maj@k's votes
        response["answers"] = [v.answer for v in verdicts]
    if any(v.test_pass_fraction is not None for v in verdicts):
        response["test_pass_fractions"] = [v.test_pass_fraction for v in verdicts]
    return response


def sampled_statistics(responses: list[dict], seed: int = 0) -> dict:
    """pass@1, pass@k and maj@k (k: the items' fewest samples) with their bootstrap intervals,
    `pass_at` (pass@j for j = 1, 2, 4, ... and k) and how maj@k voted; None each where an item
    has fewer than 2 samples (cptlab.evaluation.scoring)."""
    k = min((len(r["rewards"]) for r in responses), default=0)
    if k < 2:
        return {**dict.fromkeys(SAMPLED_KEYS), "pass_at": None, "maj_at_k_vote": None}
    record = {}
    per_metric = {
        "pass_at_1": [item_pass_at_k(r["rewards"], 1) for r in responses],
        "pass_at_k": [item_pass_at_k(r["rewards"], k) for r in responses],
        "maj_at_k": [item_majority(r["rewards"][:k], r.get("answers")) for r in responses],
    }
    for metric, values in per_metric.items():
        record[metric] = float(np.mean(values))
        record[f"{metric}_ci_low"], record[f"{metric}_ci_high"] = bootstrap_ci(values, seed=seed)
    js = sorted({*(2**i for i in range(k.bit_length()) if 2**i < k), k})
    record["pass_at"] = {
        str(j): float(np.mean([item_pass_at_k(r["rewards"], j) for r in responses])) for j in js
    }
    voted = any(a is not None for r in responses for a in r.get("answers") or [])
    record["maj_at_k_vote"] = "answers" if voted else "verdicts"
    return record


def statistics(responses: list[dict], seed: int = 0) -> dict:
    """accuracy (avg@k) with its bootstrap interval, n, pass@1, pass@k and maj@k with theirs
    where items have k >= 2 samples (`sampled_statistics`), and the test pass fraction with its
    interval where any completion ran tests (None each otherwise), from the responses' rewards:
    one function for a whole benchmark and for its merged shards."""
    per_item = np.array([np.mean(r["rewards"]) for r in responses], dtype=float)
    low, high = bootstrap_ci(per_item, seed=seed)
    record = {
        "accuracy": float(np.mean(per_item)) if responses else float("nan"),
        "ci_low": low,
        "ci_high": high,
        "n": len(responses),
        **sampled_statistics(responses, seed),
    }
    if not any("test_pass_fractions" in r for r in responses):
        return {**record, **dict.fromkeys(PASS_FRACTION_KEYS)}
    # A completion whose tests never ran (no program, a scoring failure) passed none of them.
    passed = np.array(
        [np.mean([f or 0.0 for f in r.get("test_pass_fractions") or [0.0]]) for r in responses]
    )
    summary = (float(np.mean(passed)), *bootstrap_ci(passed, seed=seed))
    return {**record, **dict(zip(PASS_FRACTION_KEYS, summary, strict=True))}


Memo = dict[tuple[str, str], Verdict]


def earlier_verdicts(path: str | Path) -> Memo:
    """{(item id, completion): verdict} of an evaluation's responses file, for the verdicts a
    later checkpoint may reuse (`evaluation.reuse_verdicts`): those of ordinary right or wrong
    answers. A verdict with a reason (malformed, too long, or one the verifier could not reach)
    is left out, so that its completion is scored again; so is the feedback, which evaluation
    does not record."""
    memo: Memo = {}
    for response in read_json_lines(Path(path)):
        n = len(response["completions"])
        answers = response.get("answers") or [None] * n
        fractions = response.get("test_pass_fractions") or [None] * n
        verdicts = zip(
            response["completions"],
            response["rewards"],
            response["reasons"],
            answers,
            fractions,
            strict=True,
        )
        for completion, reward, reason, answer, fraction in verdicts:
            if reason is None:
                memo[response["id"], completion] = Verdict(
                    reward, "", test_pass_fraction=fraction, answer=answer
                )
    return memo


def score_responses(
    rows: list[dict], completions: list[list[str]], memo: Memo | None = None
) -> tuple[list[dict], int]:
    """(one response per item: its completions with their rewards and reasons, and the fraction
    of tests each passed where the verifier runs tests; how many verdicts came from `memo`,
    the earlier verdicts of the same items, `earlier_verdicts`)."""
    memo = memo or {}
    unscored = [
        [c for c in item if (row["id"], c) not in memo]
        for row, item in zip(rows, completions, strict=True)
    ]
    fresh = iter(chain.from_iterable(score_completions(rows, unscored)))
    verdicts = [
        [memo.get((row["id"], c)) or next(fresh) for c in item]
        for row, item in zip(rows, completions, strict=True)
    ]
    reused = sum(len(item) - len(new) for item, new in zip(completions, unscored, strict=True))
    responses = [_response(*item) for item in zip(rows, completions, verdicts, strict=True)]
    return responses, reused


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
        compact=settings.compact_generation,
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
    rows: list[dict], checkpoint: str | Path, settings: EvalSettings
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
    return kept, len(rows) - len(kept)


def check_some_scored(benchmark: str, scored: int, too_long: int, settings: EvalSettings) -> None:
    """A benchmark none of whose items could be scored, each prompt being too long, is a
    config error, not an accuracy (checked for the whole benchmark, never for one shard)."""
    if too_long and not scored:
        raise InputError(
            f"{benchmark}: every item's prompt is longer than evaluation.max_prompt_length="
            f"{settings.max_prompt_length} tokens"
        )


def shard_of(rows: list[dict], index: int, count: int) -> list[dict]:
    """Shard `index` (1..count) of `rows`: contiguous, in order, sizes differing by at most one,
    so the shards in order are the rows."""
    if not 1 <= index <= count:
        raise InputError(f"shard {index} of {count}: the index must be in 1..{count}")
    return rows[(index - 1) * len(rows) // count : index * len(rows) // count]


def eval_record(
    benchmark: str,
    checkpoint: str | Path,
    settings: EvalSettings,
    responses: list[dict],
    too_long: int,
    seconds: float,
    tokens_generated: int,
) -> dict:
    """The EVAL.json record of `responses`: their statistics and how they were made."""
    info = get_benchmark(benchmark)
    return {
        "benchmark": benchmark,
        "domain": info.domain,
        "split": info.split,
        "checkpoint": str(checkpoint),
        **statistics(responses, settings.seed),
        "too_long": too_long,
        "samples": settings.samples,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "backend": settings.backend,
        "seed": settings.seed,
        "seconds": round(seconds, 3),
        "tokens_generated": int(tokens_generated),
    }


def write_evaluation(record: dict, responses: list[dict], out: Path, responses_out: Path) -> None:
    """The responses JSONL, then EVAL.json (`out`) last: an EVAL.json on disk is complete."""
    atomic_write_text(responses_out, [json.dumps(r, ensure_ascii=False) + "\n" for r in responses])
    atomic_write_json(out, record)


def evaluate_benchmark(
    generate_completions: Generate,
    settings: EvalSettings,
    checkpoint: str | Path,
    benchmark: str,
    rows: list[dict],
    out: str | Path,
    responses_out: str | Path,
    too_long: int = 0,
    step: int | None = None,
    earlier: Path | None = None,
) -> dict:
    """Score `rows` of `benchmark`; write the responses JSONL, then EVAL.json (`out`) last.
    Returns the EVAL.json record; its `seconds` are this benchmark's (generation and scoring),
    not the model's loading; `too_long` items were left out for their prompt's length; `step`:
    a within-stage checkpoint's rollout batches (its rows are the benchmark's sample);
    `earlier`: the responses file whose verdicts it reuses (`evaluation.reuse_verdicts`)."""
    started = time.perf_counter()
    stats: dict = {"tokens_generated": 0}
    # A shard can be empty (fewer rows than shards): nothing to generate.
    completions = generate_completions([r["prompt"] for r in rows], stats) if rows else []
    memo = earlier_verdicts(earlier) if earlier is not None else None
    responses, reused = score_responses(rows, completions, memo)
    seconds = time.perf_counter() - started
    record = eval_record(
        benchmark, checkpoint, settings, responses, too_long, seconds, stats["tokens_generated"]
    )
    if earlier is not None:
        record["verdicts_reused"] = reused
    if step is not None:
        record["step"] = step
        record["rows_sampled"] = settings.within_stage.rows
    record["memory"] = process_memory()  # the job's so far (cptlab.train.peak_memory)
    write_evaluation(record, responses, Path(out), Path(responses_out))
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
    rows, too_long = within_prompt_limit(rows, checkpoint, settings)
    check_some_scored(benchmark, len(rows), too_long, settings)
    generate_completions = load_generator(checkpoint, settings)
    return evaluate_benchmark(
        generate_completions, settings, checkpoint, benchmark, rows, out, responses_out, too_long
    )


def checkpoint_path(
    config: dict, layout: Layout, method: str | None, seed, stage: int, step: int | None = None
) -> Path:
    """The base's folder (stage 0 or no method), stage `stage` of chain (method, seed), or its
    checkpoint after `step` rollout batches."""
    if method is None or stage == 0:
        return layout.base_dir if builds_base(config) else Path(config["base"]["path"])
    domain = Plan.from_config(config).stage_domain(stage)
    if step is None:
        return layout.stage_dir(method, seed, stage, domain)
    return layout.step_dir(method, seed, stage, domain, step)


@dataclass(frozen=True)
class Task:
    """What one evaluation writes: a benchmark's rows, or shard (index, count) of them."""

    benchmark: str
    out: Path
    responses: Path
    shard: tuple[int, int] | None = None
    earlier: Path | None = None  # the responses whose verdicts it reuses


def checkpoint_tasks(
    settings: EvalSettings,
    layout: Layout,
    benchmarks: list[str],
    checkpoint: tuple[str | None, int | None, int],
    shard: tuple[str, int] | None = None,
    step: int | None = None,
) -> list[Task]:
    """The tasks of one checkpoint (method, seed, stage) of an experiment evaluated on
    `benchmarks`. Without `shard`: each benchmark that `evaluation.shards` does not split.
    With `shard` = (benchmark, index): that shard of a split benchmark. A within-stage
    checkpoint (`step`) is evaluated on every benchmark in one job. Each task names the
    responses whose verdicts it reuses (`EvalSettings.earlier_checkpoint`)."""
    earlier_at = settings.earlier_checkpoint(*checkpoint)

    def earlier(benchmark: str) -> Path | None:
        return None if earlier_at is None else layout.responses_file(benchmark, *earlier_at)

    if step is not None:
        if shard is not None:
            raise InputError("--shard and --step: a within-stage checkpoint is not split")
        at = (*checkpoint, step)
        return [
            Task(b, layout.eval_file(b, *at), layout.responses_file(b, *at), earlier=earlier(b))
            for b in benchmarks
        ]
    whole, split = settings.split(benchmarks)
    if shard is None:
        return [
            Task(
                b,
                layout.eval_file(b, *checkpoint),
                layout.responses_file(b, *checkpoint),
                earlier=earlier(b),
            )
            for b in whole
        ]
    benchmark, index = shard
    if benchmark not in split:
        raise InputError(f"--shard {benchmark}: evaluation.shards does not split it ({split})")
    count = settings.shard_count(benchmark)
    shard_of([], index, count)  # an index outside 1..count fails here, before any load
    out, responses = layout.shard_files(benchmark, index, count, *checkpoint)
    return [Task(benchmark, out, responses, (index, count), earlier(benchmark))]


def evaluate_checkpoint(
    config: dict,
    layout: Layout,
    method: str | None = None,
    seed: int | None = None,
    stage: int = 0,
    threads: int = 1,
    shard: tuple[str, int] | None = None,
    step: int | None = None,
) -> list[dict]:
    """Evaluate one checkpoint of the experiment (the base, stage `stage` of chain
    (method, seed), or its checkpoint after `step` rollout batches on each benchmark's
    within-stage sample of rows), loading it once, on its tasks (`checkpoint_tasks`): each
    benchmark's (shard's) files go where the layout puts them, EVAL.json last. Returns the
    records; with `training.report_to`, their scores also go to the stage's tracker run."""
    base = method is None or stage == 0
    settings = EvalSettings.for_checkpoint(config, None if base else method)
    if step is not None and settings.within_stage is None:
        raise InputError("--step: evaluation.within_stage is not set in the config")
    torch.set_num_threads(max(1, threads))
    checkpoint = checkpoint_path(config, layout, method, seed, stage, step)
    benchmarks = [b.name for b in eval_benchmarks(config)]
    tasks = checkpoint_tasks(settings, layout, benchmarks, (method, seed, stage), shard, step)
    selected = []  # every task's rows, checked before the model loads
    for task in tasks:
        rows = read_benchmark_rows(task.benchmark, layout.data_file(task.benchmark), settings)
        if step is not None:
            rows = settings.within_stage.sample(rows, task.benchmark, settings.seed)
        kept, too_long = within_prompt_limit(
            rows if task.shard is None else shard_of(rows, *task.shard), checkpoint, settings
        )
        if task.shard is None:  # a split benchmark is checked whole, by its merge
            check_some_scored(task.benchmark, len(kept), too_long, settings)
        if task.earlier is not None and not task.earlier.is_file():
            raise FileNotFoundError(
                f"{task.earlier}: no such file (evaluation.reuse_verdicts reuses its verdicts)"
            )
        selected.append((kept, too_long))
    generate_completions = load_generator(checkpoint, settings)
    records = [
        evaluate_benchmark(
            generate_completions,
            settings,
            checkpoint,
            task.benchmark,
            kept,
            task.out,
            task.responses,
            too_long,
            step,
            task.earlier,
        )
        for task, (kept, too_long) in zip(tasks, selected, strict=True)
    ]
    if not base and shard is None:
        track_scores(config, layout, method, seed, stage, step, records)
    return records


def track_scores(
    config: dict,
    layout: Layout,
    method: str,
    seed: int,
    stage: int,
    step: int | None,
    records: list[dict],
) -> None:
    """A checkpoint's scores into its stage's tracker run at its optimizer step (the stage's
    last for its end), where the method's training.report_to names a tracker."""
    _trainer, _params, training = method_settings(config, method)
    if training.report_to == "none":
        return
    domain = Plan.from_config(config).stage_domain(stage)
    stage_settings = resolve_stage(config, method, domain)
    rollout_step = stage_settings.steps if step is None else step
    scores = {}
    for record in records:
        for key in ("accuracy", "pass_at_1", "pass_at_k", "maj_at_k"):
            if record.get(key) is not None and np.isfinite(record[key]):
                scores[f"eval/{record['benchmark']}/{key}"] = float(record[key])
    folder = layout.tracking_dir(method, seed, stage, domain)
    log_scores(training.report_to, folder, rollout_step * stage_settings.updates, scores)


def merge_shards(
    config: dict,
    layout: Layout,
    benchmark: str,
    method: str | None = None,
    seed: int | None = None,
    stage: int = 0,
) -> dict:
    """The EVAL.json and responses of split benchmark `benchmark` on one checkpoint, from its
    shards' files: the responses in shard order (the benchmark's row order), the statistics
    computed from them as for an unsplit benchmark, and the shards' counts and times summed."""
    base = method is None or stage == 0
    settings = EvalSettings.for_checkpoint(config, None if base else method)
    count = settings.shard_count(benchmark)
    if count < 2:
        raise InputError(f"{benchmark}: evaluation.shards does not split it: nothing to merge")
    responses: list[dict] = []
    records = []
    for index in range(1, count + 1):
        out, responses_file = layout.shard_files(benchmark, index, count, method, seed, stage)
        for path in (out, responses_file):
            if not path.is_file():
                raise FileNotFoundError(f"{path}: shard {index} of {count} is missing")
        records.append(json.loads(out.read_text(encoding="utf-8")))
        responses += read_json_lines(responses_file)
    checkpoints = {r["checkpoint"] for r in records}
    if len(checkpoints) != 1 or {r["benchmark"] for r in records} != {benchmark}:
        raise InputError(f"{benchmark}: its shards are of other checkpoints or benchmarks")
    too_long = sum(r["too_long"] for r in records)
    check_some_scored(benchmark, len(responses), too_long, settings)
    record = eval_record(
        benchmark,
        checkpoints.pop(),
        settings,
        responses,
        too_long,
        sum(r["seconds"] for r in records),
        sum(r["tokens_generated"] for r in records),
    )
    record["shards"] = count
    measured = [r["memory"] for r in records if r.get("memory")]
    if measured:  # each shard is a job of its own: the largest
        record["memory"] = max(measured, key=lambda m: m.get("peak_rss_bytes") or 0)
    write_evaluation(
        record,
        responses,
        layout.eval_file(benchmark, method, seed, stage),
        layout.responses_file(benchmark, method, seed, stage),
    )
    if not base:
        track_scores(config, layout, method, seed, stage, None, [record])
    return record
