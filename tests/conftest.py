"""Shared test helpers: the `cptlab` CLI in-process, and the markers.

Markers (pyproject.toml): `slow` (opt-in, `make test-slow`: builds the full embedded base) and
`integration` (runs Snakemake or several processes; part of `make test`).
"""

from __future__ import annotations

import os

from cptlab.claims import RUN_ENV
from cptlab.cli import main, parser
from cptlab.layout import RESULTS_ENV

# The tests' workflows write into their own folders: not into a shared results folder that the
# caller's environment names, nor as jobs of the caller's run.
for _name in (RESULTS_ENV, RUN_ENV):
    os.environ.pop(_name, None)


def run_command(argv: list[str]) -> None:
    """Run one `cptlab` subcommand in this process, letting its exceptions through."""
    args = parser().parse_args(argv)
    args.run(args)


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """(exit code, stderr) of `cptlab <argv>` as the command line reports it."""
    code = main(argv)
    return code, capsys.readouterr().err


# The files whose tests take minutes (whole workflow runs, several processes), longest first:
# pytest-xdist's `--dist loadfile` (`make test`) hands files out in collection order, so these
# start at once on both workers instead of one of them ending the suite alone.
LONG_FILES = (
    "test_preview.py",
    "test_workflow.py",
    "test_shared_results.py",
    "test_deepspeed.py",
    "test_config_errors.py",
    "test_slurm_profile.py",
    "test_train_stage.py",
    "test_multiprocess.py",
)


def pytest_collection_modifyitems(items: list) -> None:
    def rank(item) -> int:
        name = item.path.name
        return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)  # stable: each file's tests keep their order
