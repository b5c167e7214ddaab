"""The `evaluate` subcommand."""

from __future__ import annotations

import argparse
import json

from cptlab.cli import CONFIG, THREADS, arg, command


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
    from cptlab.config import load_config
    from cptlab.evaluation.evaluate import run_evaluation

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
