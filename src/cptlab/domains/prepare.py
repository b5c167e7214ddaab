"""`cptlab prepare-data`: materialise one benchmark as a validated JSONL file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cptlab.artifacts import atomic_write_text
from cptlab.domains import get_benchmark, load_benchmark
from cptlab.rows import iter_jsonl_text


def data_settings(config: Mapping, name: str) -> dict:
    """What preparing benchmark `name` reads of the config's `data` section: the data seed,
    the size of its split (`data.sizes`, or its own under `data.sizes.benchmarks`; None: every
    row), its loader options (`data.options`; none by default) and the verifier of the reward set
    (`data.rewards`)."""
    data = config["data"]
    benchmark = get_benchmark(name)
    sizes = data.get("sizes") or {}
    return {
        "seed": data["seed"],
        "size": (sizes.get("benchmarks") or {}).get(name, sizes.get(benchmark.split)),
        "options": (data.get("options") or {}).get(name, {}),
        "verifier": benchmark.verifier_for(data.get("rewards", "strict")),
    }


def prepare_benchmark(config: Mapping, name: str, out: str | Path) -> int:
    """Write benchmark `name` to `out` (atomically); returns the number of rows.

    A verifier other than the benchmark's own (the study's reward set) is written into each
    row's metadata, so training and evaluation score the file's rows the same way.
    """
    spec = data_settings(config, name)
    rows = load_benchmark(name, n=spec["size"], seed=spec["seed"], **spec["options"])
    if spec["verifier"] != get_benchmark(name).verifier:
        for row in rows:
            row["metadata"]["verifier"] = spec["verifier"]
    atomic_write_text(out, iter_jsonl_text(rows))
    return len(rows)
