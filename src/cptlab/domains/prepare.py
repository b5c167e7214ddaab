"""`cptlab prepare-data`: materialise one benchmark as a validated JSONL file."""

from __future__ import annotations

from pathlib import Path

from cptlab.artifacts import atomic_write_text
from cptlab.domains import get_benchmark, load_benchmark
from cptlab.rows import iter_jsonl_text


def prepare_benchmark(config: dict, name: str, out: str | Path) -> int:
    """Write benchmark `name` to `out` (atomically); returns the number of rows."""
    benchmark = get_benchmark(name)
    data = config["data"]
    n = data.get("sizes", {}).get(benchmark.split)
    rows = load_benchmark(name, n=n, seed=data["seed"], **data.get("options", {}).get(name, {}))
    atomic_write_text(out, iter_jsonl_text(rows))
    return len(rows)
