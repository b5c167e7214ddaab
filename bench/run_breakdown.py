"""Where a workflow run's time went, by rule kind, from Snakemake's `benchmark:` files.

    .venv/bin/python bench/run_breakdown.py results/embedded

For each kind of job (data, base, train, evaluate, aggregate, figures, drift): the number of
jobs, their summed wall seconds and CPU seconds, and the wall time during which at least one of
them ran (each job spans [its file's modification time - its seconds, that time]). The run's
wall time is from the first job's start to the last job's end, so installation and Snakemake's
own start are not in it.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from cptlab.layout import Layout


def jobs(results: Path) -> list[dict]:
    """One record per benchmark file: kind, name, seconds, cpu seconds, start, end."""
    root = Layout(results).benchmark_file("x").parent
    found = []
    for path in sorted(root.rglob("*.tsv")):
        with open(path) as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if not rows:
            continue
        seconds = float(rows[-1]["s"])
        cpu = float(rows[-1].get("cpu_time") or "nan")
        end = path.stat().st_mtime
        name = path.relative_to(root).with_suffix("").as_posix()
        found.append(
            {"kind": name.split("/")[0], "job": name, "seconds": seconds, "cpu": cpu,
             "start": end - seconds, "end": end}
        )  # fmt: skip
    return found


def covered(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of intervals."""
    total, last = 0.0, float("-inf")
    for start, end in sorted(intervals):
        start = max(start, last)
        if end > start:
            total += end - start
            last = end
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="results/<experiment>")
    args = parser.parse_args()
    found = jobs(args.results)
    if not found:
        raise SystemExit(f"{args.results}: no benchmark files")
    wall = max(j["end"] for j in found) - min(j["start"] for j in found)
    total = sum(j["seconds"] for j in found)
    print(f"run: {len(found)} jobs, {wall:.0f} s wall from the first job to the last, "
          f"{total:.0f} s of job time")  # fmt: skip
    print(f"{'kind':10s} {'jobs':>5s} {'job s':>8s} {'cpu s':>8s} {'share':>6s} "
          f"{'wall s':>7s} {'wall %':>6s} {'s / job':>8s}")  # fmt: skip
    for kind in dict.fromkeys(j["kind"] for j in sorted(found, key=lambda j: j["start"])):
        mine = [j for j in found if j["kind"] == kind]
        seconds = sum(j["seconds"] for j in mine)
        busy = covered([(j["start"], j["end"]) for j in mine])
        print(
            f"{kind:10s} {len(mine):5d} {seconds:8.0f} {sum(j['cpu'] for j in mine):8.0f} "
            f"{seconds / total:6.1%} {busy:7.0f} {busy / wall:6.1%} {seconds / len(mine):8.1f}"
        )


if __name__ == "__main__":
    main()
