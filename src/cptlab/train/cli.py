"""The `cptlab train-stage` subcommand. Hook it into cptlab/cli.py's parser():

from cptlab.train.cli import add_train_stage_parser
add_train_stage_parser(sub)
"""

from __future__ import annotations

import argparse
import json
import sys


def _train_stage(args: argparse.Namespace) -> None:
    from cptlab.config import load_config
    from cptlab.train import StageError, train_stage

    config = load_config(args.config)
    try:
        manifest = train_stage(
            config,
            method=args.method,
            domain=args.domain,
            seed=args.seed,
            start=args.start,
            out=args.out,
            state_dir=args.state_dir,
            anchor=args.anchor,
            threads=args.threads,
            data_dir=args.data_dir,
        )
    except StageError as err:  # non-finite loss/gradient, collapse with action `error`
        print(f"cptlab train-stage: {type(err).__name__}: {err}", file=sys.stderr)
        raise SystemExit(3) from None
    if manifest:  # only the main process writes and reports
        keys = ("status", "steps_done", "weights_step", "train_seconds")
        print(json.dumps({k: manifest[k] for k in keys}))


def add_train_stage_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add `train-stage` to `subparsers` (the parser's `add_subparsers()` result)."""
    p = subparsers.add_parser(
        "train-stage", help="train one continual-learning stage (GRPO or SDPO) from a checkpoint"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--method", required=True, help="a key of `methods` in the config")
    p.add_argument("--domain", required=True, help="the domain trained in this stage")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--start", required=True, help="checkpoint the stage starts from")
    p.add_argument("--out", required=True, help="output folder (manifest.json written last)")
    p.add_argument("--state-dir", required=True, help="resumable trainer state, outside --out")
    p.add_argument("--anchor", default=None, help="the original base model (teacher anchor `base`)")
    p.add_argument("--data-dir", default=None, help="folder of prepared <benchmark>.jsonl")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_train_stage)
    return p
