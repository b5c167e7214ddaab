"""The two kinds of failure the CLI reports without a traceback (cptlab.cli.main)."""


class InputError(ValueError):
    """Bad input a user can fix: a config key, a data row, a missing or malformed file. The
    message names it; `cptlab` exits 2."""


class StageError(RuntimeError):
    """A training stage ended abnormally (non-finite loss or gradient, collapse with action
    `error`); `cptlab train-stage` exits 3."""
