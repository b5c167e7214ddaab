"""The `cptlab evaluate`, `cptlab aggregate` and `cptlab figures` subcommands. Hook them into
cptlab/cli.py's parser():

from cptlab.eval_cli import add_eval_parsers
add_eval_parsers(sub)

Bad input exits 2 with one line on stderr: a missing file (FileNotFoundError, reported by
cptlab.cli.main), an EVAL.json that does not match its path, or the vLLM backend not installed.
"""

from __future__ import annotations

import argparse
import json
import sys

from cptlab.config import load_config


def _fail(command: str, err: Exception) -> None:
    print(f"cptlab {command}: error: {err}", file=sys.stderr)
    raise SystemExit(2) from None


def _evaluate(args: argparse.Namespace) -> None:
    from cptlab.backends.vllm_backend import BackendError
    from cptlab.evaluate import run_evaluation

    config = load_config(args.config)
    try:
        record = run_evaluation(
            config,
            checkpoint=args.checkpoint,
            data=args.data,
            benchmark=args.benchmark,
            out=args.out,
            responses_out=args.responses,
            threads=args.threads,
        )
    except BackendError as err:
        _fail("evaluate", err)
    keys = ("benchmark", "accuracy", "ci_low", "ci_high", "n", "seconds")
    print(json.dumps({k: record[k] for k in keys}))


def _aggregate(args: argparse.Namespace) -> None:
    from cptlab.aggregate import AggregateError, aggregate

    config = load_config(args.config)
    try:
        paths = aggregate(config, args.eval_dir, args.out_dir)
    except AggregateError as err:
        _fail("aggregate", err)
    print(json.dumps({k: str(v) for k, v in paths.items()}))


def _figures(args: argparse.Namespace) -> None:
    from cptlab.figures import make_figures

    config = load_config(args.config)
    metrics = [m for m in (args.train_metrics or "").split(",") if m] or None
    manifest = make_figures(
        config, args.scores, args.metrics, args.train_logs_dir, args.out_dir, metrics
    )
    print(json.dumps({"files": len(manifest["files"]), "out_dir": args.out_dir}))


def add_eval_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Add `evaluate`, `aggregate` and `figures` to `subparsers` (an `add_subparsers()`
    result)."""
    p = subparsers.add_parser(
        "evaluate", help="accuracy of a checkpoint on one benchmark (EVAL.json written last)"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--checkpoint", required=True, help="model folder (weights + tokenizer)")
    p.add_argument("--data", required=True, help="prepared <benchmark>.jsonl")
    p.add_argument("--benchmark", required=True, help="registry name, e.g. math_id")
    p.add_argument("--out", required=True, help="EVAL.json (summary, written last)")
    p.add_argument("--responses", required=True, help="responses JSONL (one line per item)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_evaluate)

    p = subparsers.add_parser(
        "aggregate", help="scores.csv, cl_metrics.csv, cl_summary.csv from the EVAL.json tree"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--eval-dir", required=True, help="results/<exp>/eval")
    p.add_argument("--out-dir", required=True, help="results/<exp>")
    p.set_defaults(run=_aggregate)

    p = subparsers.add_parser("figures", help="plots (PNG + PDF) and figures/manifest.json")
    p.add_argument("--config", required=True)
    p.add_argument("--scores", required=True, help="scores.csv")
    p.add_argument("--metrics", required=True, help="cl_metrics.csv")
    p.add_argument("--train-logs-dir", required=True, help="results/<exp>/runs")
    p.add_argument("--out-dir", required=True, help="results/<exp>/figures")
    p.add_argument(
        "--train-metrics",
        default=None,
        help="comma-separated train-log keys to plot (default: cptlab.figures.TRAIN_METRICS)",
    )
    p.set_defaults(run=_figures)
