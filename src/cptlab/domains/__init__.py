"""Benchmarks as declarative registry entries (loader or generator, split, verifier).

Adding a benchmark is adding an entry: see `embedded.py` for the synthetic testbed.
"""

from cptlab.domains.registry import (
    BENCHMARKS,
    Benchmark,
    benchmarks_of,
    get_benchmark,
    load_benchmark,
    register_benchmark,
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
]
