"""The `prepare-data` subcommand."""

from __future__ import annotations

import argparse
import logging

from cptlab.cli import CONFIG, arg, command


@command(
    "prepare-data",
    "write one benchmark as canonical JSONL",
    CONFIG,
    arg("--benchmark", required=True, help="registry name, e.g. math_train"),
    arg("--out", required=True, help="output .jsonl file"),
)
def prepare_data(args: argparse.Namespace) -> None:
    from cptlab.domains.prepare import prepare_benchmark
    from cptlab.validation import load_config

    count = prepare_benchmark(load_config(args.config), args.benchmark, args.out)
    logging.info("%s: %d rows -> %s", args.benchmark, count, args.out)
