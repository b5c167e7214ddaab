"""The `cptlab` command line: one subcommand per pipeline step; the Snakemake rules call these.

Each stage package declares its subcommands in its own `cli.py` with `@command`; this module
collects them (COMMAND_MODULES) and is the one error path: bad input (an InputError, such as a
ConfigError: a config key, a data row, a malformed file; or a missing or unreadable file, an
output that cannot be written) exits 2 with one line naming it; a training stage that ended
abnormally (StageError: non-finite loss, collapse with action `error`) exits 3; `-v` adds the
traceback to either. Any other exception is a bug in cptlab, not in the input: an internal
error, reported with its traceback, exit 1.

The `cptlab` command and `python -m cptlab` (what launchers such as `accelerate launch -m cptlab`
start in each process) both run `entry_point`: a process that returns from `main` has written all
it writes (a checkpoint and its manifest, EVAL.json, its log lines), so it then ends at once,
without the interpreter's teardown of its modules. That teardown, the garbage collector walking
the heap of torch and transformers (and TRL, vLLM) as the interpreter frees about 3,000 modules,
took 0.7 s of every evaluation job on the 2-core machine and about 5 s of each rehearsal
training stage (with the colocated vLLM engine's own shutdown); no output depends on it.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import gc
import importlib
import logging
import multiprocessing
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

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
    "cptlab.claims",
    "cptlab.workload",
    "cptlab.memory",
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

# The OSErrors about the user's files or disk rather than a bug: a missing, unreadable or
# misplaced file, and an output that cannot be written (a full disk or quota, a read-only
# file system).
FILE_ERRORS = (
    FileNotFoundError | FileExistsError | IsADirectoryError | NotADirectoryError | PermissionError
)
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def parser() -> argparse.ArgumentParser:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    top = argparse.ArgumentParser(prog="cptlab", description=__doc__.split("\n")[0])
    top.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging; a reported error's traceback"
    )
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
        _report(args, err, f"{type(err).__name__}: {err}")
        return 3
    except Exception as err:
        if _is_bad_input(err):
            _report(args, err, f"error: {_message(err)}")
            return 2
        traceback.print_exc()
        print(
            f"cptlab {args.command}: internal error (a bug in cptlab, not in the input): "
            f"{type(err).__name__}: {err}",
            file=sys.stderr,
        )
        return 1
    return 0


def _is_bad_input(err: Exception) -> bool:
    """Whether `err` is the user's to fix (exit 2), rather than a bug in cptlab."""
    if isinstance(err, InputError | FILE_ERRORS):
        return True
    return isinstance(err, OSError) and err.errno in DISK_ERRNOS


def _report(args: argparse.Namespace, err: Exception, line: str) -> None:
    """One line naming the problem; with `-v`, the traceback before it."""
    if args.verbose:
        traceback.print_exception(err)
    print(f"cptlab {args.command}: {line}", file=sys.stderr)


def _message(err: Exception) -> str:
    """The error's own words: an OSError without `[Errno N]`."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.filename}: {err.strerror}" if err.filename else err.strerror
    return str(err)


def entry_point() -> NoReturn:
    """`main`, then the end of the process without the interpreter's teardown (module
    docstring). What a job needs of an exit still happens: the log handlers are flushed, the
    processes it started through multiprocessing (math-verify's workers) are ended, so that none
    outlives the job or holds its log open, and Python's and C's stdio buffers are flushed
    (native libraries' printf into a redirected log). The atexit callbacks do not run: with vLLM
    loaded they shut its engine and ZeroMQ down, part of the teardown's cost. An error ends the
    same way, with the exit code `main` returns (it has printed the message, and an internal
    error's traceback); argparse's exit still takes the ordinary way out.

    The collector runs after every 10,000 new container objects, not Python's 700: importing
    torch and transformers makes about 370,000, and each collection walks the generations it
    collects, so the default spent 0.5-0.7 s of a model job's 3.0-3.7 s of imports (a training
    stage's steps were as fast either way)."""
    gc.set_threshold(10_000)
    code = main()
    logging.shutdown()
    for child in multiprocessing.active_children():
        child.terminate()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(code)


if __name__ == "__main__":
    entry_point()
