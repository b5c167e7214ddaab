"""`python -m cptlab`: the CLI, for launchers that start a module in each process
(`accelerate launch -m cptlab ...`, `torchrun -m cptlab ...`)."""

from cptlab.cli import main

raise SystemExit(main())
