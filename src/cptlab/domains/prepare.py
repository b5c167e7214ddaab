"""`cptlab prepare-data`: materialise one benchmark as a validated JSONL file, its row count
checked against the published one."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cptlab.artifacts import atomic_write_text
from cptlab.domains import get_benchmark, load_benchmark
from cptlab.domains.registry import Published
from cptlab.errors import InputError
from cptlab.rows import iter_jsonl_text

logger = logging.getLogger(__name__)

# `data.options.<benchmark>.expected_rows`: the range the prepared rows must fall in, in place
# of the published one ([low, high]), or null for none (fixtures, another copy's rows). It is
# read here, not by the loader.
EXPECTED_ROWS = "expected_rows"


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


def published_rows(name: str, options: Mapping[str, Any]) -> Published | None:
    """The published count that holds for benchmark `name` loaded with `options`: a real
    dataset's (`Recipe.published_for`); None for the synthetic ones and other option values."""
    find = getattr(get_benchmark(name).loader, "published_for", None)
    return None if find is None else find(options)


def expected_range(
    name: str, options: Mapping[str, Any], size: int | None
) -> tuple[tuple[int, int] | None, str]:
    """The range benchmark `name`'s prepared rows must fall in (None: unchecked) and what it
    stands on: the config's `expected_rows`, else the published count (capped at `size`)."""
    if EXPECTED_ROWS in options:
        given = options[EXPECTED_ROWS]
        if given is None:
            return None, f"unchecked (data.options.{name}.{EXPECTED_ROWS}: null)"
        if (
            not isinstance(given, list | tuple)
            or len(given) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in given)
            or not 0 <= given[0] <= given[1]
        ):
            raise InputError(
                f"data.options.{name}.{EXPECTED_ROWS}: {given!r} is not [low, high] or null"
            )
        low, high = given
        return (low, high), f"data.options.{name}.{EXPECTED_ROWS}"
    loader_options = {k: v for k, v in options.items() if k != EXPECTED_ROWS}
    published = published_rows(name, loader_options)
    if published is None:
        return None, "unchecked (no count is published for these options)"
    told = f"published {published.rows:,}" if published.rows is not None else "published"
    cap = f", first {size:,} (data.sizes)" if size is not None else ""
    return published.expected(size), f"{told}: {published.source}{cap}"


def count_line(name: str, count: int, expected: tuple[int, int] | None, basis: str) -> str:
    """One line: the benchmark, its row count and the range it is checked against."""
    if expected is None:
        return f"{name}: {count:,} rows, {basis}"
    low, high = expected
    span = f"{low:,}" if low == high else f"{low:,}-{high:,}"
    return f"{name}: {count:,} rows, expected {span} ({basis})"


def prepare_benchmark(config: Mapping, name: str, out: str | Path) -> int:
    """Write benchmark `name` to `out` (atomically); returns the number of rows, whose line
    beside the published count goes to the log. A count outside the expected range is an
    InputError with that line, and nothing is written.

    A verifier other than the benchmark's own (the study's reward set) is written into each
    row's metadata, so training and evaluation score the file's rows the same way.
    """
    spec = data_settings(config, name)
    options = dict(spec["options"])
    expected, basis = expected_range(name, options, spec["size"])
    options.pop(EXPECTED_ROWS, None)
    rows = load_benchmark(name, n=spec["size"], seed=spec["seed"], **options)
    line = count_line(name, len(rows), expected, basis)
    if expected is not None and not expected[0] <= len(rows) <= expected[1]:
        raise InputError(
            f"{line}: outside the expected range; check the source and its revision, or set "
            f"data.options.{name}.{EXPECTED_ROWS}"
        )
    if spec["verifier"] != get_benchmark(name).verifier:
        for row in rows:
            row["metadata"]["verifier"] = spec["verifier"]
    logger.info("%s", line)
    atomic_write_text(out, iter_jsonl_text(rows))
    return len(rows)
