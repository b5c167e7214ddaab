"""The `cptlab` command line: one subcommand per pipeline step; Snakemake rules call these."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from cptlab.config import ConfigError, load_config
from cptlab.drift.cli import add_drift_parsers
from cptlab.eval_cli import add_eval_parsers
from cptlab.rows import RowError
from cptlab.train.cli import add_train_stage_parser


def _prepare_data(args: argparse.Namespace) -> None:
    from cptlab.data import prepare_benchmark

    config = load_config(args.config)
    count = prepare_benchmark(config, args.benchmark, args.out)
    logging.info("%s: %d rows -> %s", args.benchmark, count, args.out)


def _build_base(args: argparse.Namespace) -> None:
    from cptlab.base_model import build_base

    config = load_config(args.config)
    manifest = build_base(config, args.data_dir, args.out, threads=args.threads)
    print(json.dumps({"bounds_ok": manifest["bounds_ok"], "seconds": manifest["seconds"]}))


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cptlab", description=__doc__)
    top.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = top.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare-data", help="write one benchmark as canonical JSONL")
    p.add_argument("--config", required=True)
    p.add_argument("--benchmark", required=True, help="registry name, e.g. math_train")
    p.add_argument("--out", required=True, help="output .jsonl file")
    p.set_defaults(run=_prepare_data)

    p = sub.add_parser("build-base", help="build, measure and save the embedded base model")
    p.add_argument("--config", required=True)
    p.add_argument("--data-dir", required=True, help="folder of prepared <benchmark>.jsonl")
    p.add_argument("--out", required=True, help="output model folder (manifest.json last)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
    p.set_defaults(run=_build_base)

    add_train_stage_parser(sub)
    add_eval_parsers(sub)
    add_drift_parsers(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        args.run(args)
    except (ConfigError, RowError, KeyError, FileNotFoundError, ValueError) as err:
        # Bad input: one clear line naming the problem, no traceback.
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"cptlab {args.command}: error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
