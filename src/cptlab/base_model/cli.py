"""The `build-base` subcommand."""

from __future__ import annotations

import argparse
import json

from cptlab.cli import CONFIG, THREADS, arg, command


@command(
    "build-base",
    "build, measure and save the embedded base model",
    CONFIG,
    arg("--data-dir", required=True, help="folder of prepared <benchmark>.jsonl"),
    arg("--out", required=True, help="output model folder (manifest.json last)"),
    arg("--shipped", help="a shipped base folder, copied where its recipe is this build's"),
    THREADS,
)
def build_base(args: argparse.Namespace) -> None:
    from cptlab.base_model.build import build_base
    from cptlab.validation import load_config

    config = load_config(args.config)
    manifest = build_base(config, args.data_dir, args.out, args.threads, args.shipped)
    print(json.dumps({key: manifest[key] for key in ("bounds_ok", "shipped", "seconds")}))


@command(
    "build-rehearsal-base",
    "build the rehearsal's tiny Qwen3 base (config/rehearsal.yaml's base.path)",
    arg("--out", required=True, help="output model folder"),
    arg("--fixtures", default="tests/fixtures/paper", help="rows to train the tokenizer on"),
    arg("--seed", type=int, default=0, help="the model's initialisation seed"),
)
def build_rehearsal_base(args: argparse.Namespace) -> None:
    from cptlab.base_model.rehearsal import RehearsalBase, build_rehearsal_base

    built = build_rehearsal_base(args.out, RehearsalBase(seed=args.seed), args.fixtures)
    print(json.dumps(built, sort_keys=True))
