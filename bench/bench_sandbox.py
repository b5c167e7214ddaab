"""The code sandbox's cost per program run, with the launcher server and without it, side by side.

    .venv/bin/python bench/bench_sandbox.py --data results/embedded/data/code_train.jsonl
        [--compare-with REV]

Each round scores the same rows' reference solutions with their verifier (one sandbox run per
row, as a code reward does), once with launchers forked by the server and once with each
launcher started on its own, alternating, so that both see the same load. It prints the wall
time and the CPU time per row of each, and the on/off ratios. The CPU time is that of every
process of the runs: this process's reaped children, plus the server and its reaped children.
With --compare-with REV, each round also scores with the launcher server of the sandbox as it
was at git revision REV (bench_sandbox_floor.py breaks the cost down).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

from bench_sandbox_floor import sandbox_at, server_cpu, switch_off

from cptlab import sandbox
from cptlab.evaluation.scoring import verifier_for
from cptlab.rows import read_jsonl
from cptlab.verifiers import code as code_verifiers
from cptlab.verifiers import score


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(rows: list[dict], served: bool, module=sandbox) -> tuple[float, float]:
    switch_off(module, frozenset() if served else frozenset({"launcher_server"}))
    code_verifiers.run_python = module.run_python  # the verifiers' own reference to it
    cpu0, server0, t0 = children_cpu(), server_cpu(module), time.perf_counter()
    try:
        for row in rows:
            verdict = score(verifier_for(row), row["answer"], row)
            if verdict.reward != 1.0:
                raise SystemExit(f"{row['id']}: its reference answer failed: {verdict}")
    finally:
        code_verifiers.run_python = sandbox.run_python
    wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0 + server_cpu(module) - server0
    return 1000 * wall / len(rows), 1000 * cpu / len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a code benchmark's JSONL")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-with", metavar="REV", help="an older sandbox, interleaved")
    args = parser.parse_args()
    rows = read_jsonl(args.data)[: args.rows]
    older = sandbox_at(args.compare_with) if args.compare_with else None
    one_round(rows[:4], True)  # start the server and compile the launchers outside the timing
    one_round(rows[:4], False)
    if older is not None:
        one_round(rows[:4], True, older)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    at_rev: list[tuple[float, float]] = []
    for _ in range(args.rounds):
        for served in (False, True):
            results[served].append(one_round(rows, served))
        if older is not None:
            at_rev.append(one_round(rows, True, older))
    print(f"{len(rows)} rows x {args.rounds} rounds; per row, median over rounds:")
    medians = {}
    for served, label in ((False, "launcher started per run"), (True, "launcher server")):
        wall = statistics.median(r[0] for r in results[served])
        cpu = statistics.median(r[1] for r in results[served])
        medians[served] = (wall, cpu)
        print(f"  {label:26s} wall {wall:6.1f} ms   cpu {cpu:6.1f} ms")
    print(
        f"  server / per run           wall {medians[True][0] / medians[False][0]:.2f}"
        f"        cpu {medians[True][1] / medians[False][1]:.2f}"
    )
    if at_rev:
        wall = statistics.median(r[0] for r in at_rev)
        cpu = statistics.median(r[1] for r in at_rev)
        label = f"launcher server at {args.compare_with}"
        print(f"  {label:26s} wall {wall:6.1f} ms   cpu {cpu:6.1f} ms")
        print(
            f"  server / server at REV     wall {medians[True][0] / wall:.2f}"
            f"        cpu {medians[True][1] / cpu:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
