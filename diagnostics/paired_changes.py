"""One run's changes between checkpoints, with paired bootstrap 95% intervals over items.

The embedded results table of docs/notebook/results.md: for one method and seed of an experiment,
- the gain of each stage: its domain's id accuracy after the stage minus before it;
- the forgetting of each earlier stage's domain: its id accuracy after the last stage minus
  after its own stage;
- the OOD mean after the last stage minus the base's (every OOD benchmark weighs the same).

Both checkpoints answered the same items, so each interval resamples items and keeps their
pairs: it is narrower than one built from the two accuracies' own intervals.

    .venv/bin/python diagnostics/paired_changes.py results/embedded --method grpo --seed 0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from cptlab.drift.tables import read_responses
from cptlab.layout import Layout
from cptlab.plan import eval_benchmarks


def item_rewards(path: Path) -> dict[str, float]:
    """Mean reward per item id of one evaluation's responses file."""
    return {rid: float(np.mean(r["rewards"])) for rid, r in read_responses(path).items()}


def paired_differences(before: Path, after: Path) -> np.ndarray:
    a, b = item_rewards(before), item_rewards(after)
    if set(a) != set(b):
        raise ValueError(f"{before} and {after} answered different items")
    return np.array([b[i] - a[i] for i in sorted(a)])


def mean_change(
    differences: list[np.ndarray], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean over benchmarks of the mean paired difference, with a percentile bootstrap 95%
    interval that resamples items within each benchmark."""
    rng = np.random.default_rng(seed)
    boot = np.zeros(n_boot)
    for d in differences:
        boot += d[rng.integers(0, d.size, (n_boot, d.size))].mean(axis=1)
    boot /= len(differences)
    point = float(np.mean([d.mean() for d in differences]))
    return point, float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def run_changes(experiment: Path, method: str, seed: int) -> dict[str, tuple[float, float, float]]:
    layout = Layout(experiment)
    config = json.loads(layout.config_file.read_text())
    sequence = config["run"]["sequence"]
    domains = config["data"]["domains"]
    ood = [b.name for b in eval_benchmarks(config) if b.split == "ood"]

    def responses(stage: int, benchmark: str) -> Path:
        return layout.responses_file(benchmark, method, seed, stage)

    changes = {}
    for stage, domain in enumerate(sequence, start=1):
        bench = domains[domain]["id"][0]
        changes[f"gain {domain}"] = mean_change(
            [paired_differences(responses(stage - 1, bench), responses(stage, bench))]
        )
    last = len(sequence)
    for stage, domain in enumerate(sequence[:-1], start=1):
        bench = domains[domain]["id"][0]
        changes[f"{bench}, stage {last} - stage {stage}"] = mean_change(
            [paired_differences(responses(stage, bench), responses(last, bench))]
        )
    changes[f"OOD mean, stage {last} - base"] = mean_change(
        [paired_differences(responses(0, b), responses(last, b)) for b in ood]
    )
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--method", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, (point, low, high) in run_changes(args.experiment, args.method, args.seed).items():
        print(f"{name:32s} {100 * point:+6.1f} [{100 * low:+6.1f}, {100 * high:+6.1f}] points")


if __name__ == "__main__":
    main()
