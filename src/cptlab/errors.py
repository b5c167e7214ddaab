"""The failures the CLI reports in one line (cptlab.cli.main; `-v` adds the traceback), as
opposed to a bug, which is an internal error. The lowest layer of the package: it imports nothing
of cptlab, so every module can raise them."""


class InputError(ValueError):
    """Bad input a user can fix: a config key, a data row, a missing or malformed file. The
    message names it; `cptlab` exits 2."""


class ConfigError(InputError):
    """The config breaks the schema or names something unknown; the message says where."""


class StageError(RuntimeError):
    """A training stage ended abnormally (non-finite loss or gradient, collapse with action
    `error`); `cptlab train-stage` exits 3."""
