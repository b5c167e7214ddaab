"""`python -m cptlab`: the CLI, for launchers that start a module in each process
(`accelerate launch -m cptlab ...`, `torchrun -m cptlab ...`); it ends as the `cptlab` command
does (cptlab.cli.entry_point)."""

from cptlab.cli import entry_point

entry_point()
