"""Benchmarks as declarative registry entries (loader or generator, split, verifier).

registry.py  Benchmark, the registry (BENCHMARKS) and how an entry is loaded
embedded/    the synthetic testbed: its domains, registered by `register_domain`
paper/       the study's datasets: one `Recipe` per split, run by one pipeline
prepare.py   `cptlab prepare-data`: one benchmark as a validated JSONL file, its row count checked
             against the published one
fetch.py     `cptlab fetch-data`: every hub dataset a config reads, into the HF cache
cli.py       the `prepare-data` and `fetch-data` subcommands

Adding a benchmark is adding an entry (docs/extending.md).
"""

from cptlab.domains.registry import (
    BENCHMARKS,
    Benchmark,
    benchmarks_of,
    get_benchmark,
    load_benchmark,
    register_benchmark,
    verifier_for,
)

# Importing the modules registers their benchmarks.
from cptlab.domains import embedded, paper  # noqa: E402,F401  isort: skip

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "benchmarks_of",
    "get_benchmark",
    "load_benchmark",
    "register_benchmark",
    "verifier_for",
]
