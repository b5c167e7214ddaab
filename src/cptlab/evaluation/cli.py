"""The `evaluate` (one benchmark, files of your choice), `evaluate-checkpoint` (the workflow's:
every benchmark of one checkpoint, or one shard of a split benchmark) and `merge-shards` (a
split benchmark's shards into its files) subcommands."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from cptlab.cli import CONFIG, RESULTS_DIR, THREADS, arg, command
from cptlab.errors import InputError

if TYPE_CHECKING:
    from cptlab.layout import Layout

# One checkpoint of the experiment: the base (none of these) or stage k of chain (method, seed).
CHECKPOINT = (
    arg("--method", default=None, help="the chain's method (omit for the base model)"),
    arg("--seed", type=int, default=None, help="the chain's seed"),
    arg("--stage", type=int, default=0, help="the stage k >= 1 (0: the base model)"),
)


@command(
    "evaluate",
    "accuracy of a checkpoint on one benchmark (EVAL.json written last)",
    CONFIG,
    arg("--checkpoint", required=True, help="model folder (weights + tokenizer)"),
    arg("--data", required=True, help="prepared <benchmark>.jsonl"),
    arg("--benchmark", required=True, help="registry name, e.g. math_id"),
    arg("--out", required=True, help="EVAL.json (summary, written last)"),
    arg("--responses", required=True, help="responses JSONL (one line per item)"),
    THREADS,
)
def evaluate(args: argparse.Namespace) -> None:
    from cptlab.evaluation.evaluate import run_evaluation
    from cptlab.validation import load_config

    record = run_evaluation(
        load_config(args.config),
        checkpoint=args.checkpoint,
        data=args.data,
        benchmark=args.benchmark,
        out=args.out,
        responses_out=args.responses,
        threads=args.threads,
    )
    keys = ("benchmark", "accuracy", "ci_low", "ci_high", "n", "seconds")
    print(json.dumps({k: record[k] for k in keys}))


@command(
    "evaluate-checkpoint",
    "one checkpoint of the experiment on every benchmark, the model loaded once",
    CONFIG,
    RESULTS_DIR,
    *CHECKPOINT,
    arg(
        "--shard",
        default=None,
        metavar="BENCHMARK:I",
        help="only shard I (1..n) of a benchmark that evaluation.shards splits in n",
    ),
    arg(
        "--step",
        type=int,
        default=None,
        help="the stage's checkpoint after STEP rollout batches (evaluation.within_stage)",
    ),
    THREADS,
)
def evaluate_checkpoint(args: argparse.Namespace) -> None:
    from cptlab.evaluation.evaluate import evaluate_checkpoint

    config, layout, checkpoint = _experiment_checkpoint(args)
    if args.step is not None and args.method is None:
        raise InputError("--step needs --method, --seed and --stage: a stage's checkpoint")
    records = evaluate_checkpoint(
        config,
        layout,
        *checkpoint,
        threads=args.threads,
        shard=_shard(args.shard),
        step=args.step,
    )
    for record in records:
        keys = ("benchmark", "accuracy", "ci_low", "ci_high", "n", "seconds")
        print(json.dumps({k: record[k] for k in keys}))


def _experiment_checkpoint(args: argparse.Namespace) -> tuple[dict, Layout, tuple]:
    """The config, the results layout and the checkpoint (method, seed, stage) the arguments
    name (`CHECKPOINT`)."""
    from cptlab.layout import Layout
    from cptlab.validation import load_config

    if (args.method is None) != (args.stage == 0) or (args.method is None) != (args.seed is None):
        raise InputError("--method, --seed and --stage >= 1 go together (none: the base model)")
    return load_config(args.config), Layout(args.results_dir), (args.method, args.seed, args.stage)


def _shard(value: str | None) -> tuple[str, int] | None:
    """`BENCHMARK:I` as (benchmark, I)."""
    if value is None:
        return None
    benchmark, _, index = value.rpartition(":")
    if not benchmark or not index.isdigit():
        raise InputError(f"--shard {value!r}: expected BENCHMARK:I, e.g. mmlu_redux:3")
    return benchmark, int(index)


@command(
    "merge-shards",
    "a split benchmark's shard files of one checkpoint into its EVAL.json and responses",
    CONFIG,
    RESULTS_DIR,
    arg("--benchmark", required=True, help="a benchmark that evaluation.shards splits"),
    *CHECKPOINT,
)
def merge_shards(args: argparse.Namespace) -> None:
    from cptlab.evaluation.evaluate import merge_shards

    config, layout, checkpoint = _experiment_checkpoint(args)
    record = merge_shards(config, layout, args.benchmark, *checkpoint)
    keys = ("benchmark", "accuracy", "ci_low", "ci_high", "n", "shards")
    print(json.dumps({k: record[k] for k in keys}))
