"""The `cptlab` command line: one subcommand per pipeline step; the Snakemake rules call these.

Each stage package declares its subcommands in its own `cli.py` with `@command`; this module
collects them (COMMAND_MODULES) and is the one error path: bad input (cptlab.errors.InputError:
a config key, a data row, a malformed file; or an OSError: a missing file, an output that cannot
be written) exits 2 with one line naming it, and `-v` adds the traceback; a training stage that
ended abnormally (StageError: non-finite loss, collapse with action `error`) exits 3; any other
exception is a bug in cptlab, reported as an internal error with its traceback (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cptlab.errors import InputError, StageError

# The modules whose `@command` functions make up the CLI, in the order `cptlab --help` lists
# them. cptlab.provenance reads the same list to hash each subcommand's code.
COMMAND_MODULES = (
    "cptlab.domains.cli",
    "cptlab.base_model.cli",
    "cptlab.train.cli",
    "cptlab.evaluation.cli",
    "cptlab.results.cli",
    "cptlab.drift.cli",
    "cptlab.config_reference",
    "cptlab.provenance",
    "cptlab.workload",
)


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one line of help, its arguments and the function it runs."""

    name: str
    help: str
    arguments: tuple[tuple[tuple[str, ...], dict[str, Any]], ...]
    run: Callable[[argparse.Namespace], None]


COMMANDS: dict[str, Command] = {}


def arg(*flags: str, **options: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One argument of a subcommand, as `argparse.ArgumentParser.add_argument` takes it."""
    return flags, options


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register the decorated function as subcommand `name`.

    Keep cptlab (and heavy) imports inside the function: every `cptlab` call imports every
    command module, so what one imports at its top level is code of every job, and a change to
    it reruns them all (cptlab.provenance)."""

    def register(run: Callable[[argparse.Namespace], None]) -> Callable:
        if name in COMMANDS:
            raise ValueError(f"cptlab subcommand {name!r} registered twice")
        COMMANDS[name] = Command(name, help, tuple(arguments), run)
        return run

    return register


# Arguments several subcommands share.
CONFIG = arg(
    "--config", required=True, help="experiment config (YAML, or results/<exp>/config.json)"
)
THREADS = arg("--threads", type=int, default=1, help="torch threads (Snakemake threads)")
RESULTS_DIR = arg("--results-dir", required=True, help="the experiment's folder, results/<exp>")


def parser() -> argparse.ArgumentParser:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    top = argparse.ArgumentParser(prog="cptlab", description=__doc__.split("\n")[0])
    top.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = top.add_subparsers(dest="command", required=True)
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        for flags, options in cmd.arguments:
            p.add_argument(*flags, **options)
        p.set_defaults(run=cmd.run)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        args.run(args)
    except StageError as err:
        print(f"cptlab {args.command}: {type(err).__name__}: {err}", file=sys.stderr)
        return 3
    except (InputError, OSError) as err:
        # Bad input or an unwritable output: one clear line naming the file, key or row (with
        # the traceback under -v). OSError: a missing file or a full disk.
        if args.verbose:
            traceback.print_exc()
        print(f"cptlab {args.command}: error: {_message(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        # Anything else is a bug in cptlab, not the user's input: never reported as bad input.
        traceback.print_exc()
        print(
            f"cptlab {args.command}: internal error: {type(err).__name__}: {err}", file=sys.stderr
        )
        return 1
    return 0


def _message(err: Exception) -> str:
    """The error's own words: an OSError without `[Errno N]`."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    return str(err)


if __name__ == "__main__":
    sys.exit(main())
