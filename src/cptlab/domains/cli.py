"""The `prepare-data` and `fetch-data` subcommands."""

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


@command(
    "fetch-data",
    "download every hub dataset the config reads, at its revision, into the HF cache "
    "(on a node with internet; prepare-data then runs offline)",
    CONFIG,
)
def fetch_data(args: argparse.Namespace) -> None:
    from cptlab.domains.fetch import fetch_data as fetch
    from cptlab.errors import InputError
    from cptlab.validation import load_config

    for name in ("httpx", "httpx2"):  # one line per request otherwise, under -v too
        logging.getLogger(name).setLevel(logging.WARNING)
    problems = fetch(load_config(args.config))
    if problems:
        raise InputError(f"{len(problems)} hub source(s) cannot be fetched (named above)")
