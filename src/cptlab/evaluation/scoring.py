"""Scoring completions and the accuracy statistics built on them."""

from __future__ import annotations

from math import comb

import numpy as np

from cptlab.domains import get_benchmark
from cptlab.verifiers import Verdict, score

# A benchmark's test pass fraction and its interval, as EVAL.json and scores.csv name them.
PASS_FRACTION_KEYS = (
    "test_pass_fraction",
    "test_pass_fraction_ci_low",
    "test_pass_fraction_ci_high",
)


def verifier_for(row: dict) -> str:
    """Warm-up rows mix forms and carry their verifier; others use their benchmark's."""
    return row["metadata"].get("verifier") or get_benchmark(row["benchmark"]).verifier


def score_completions(rows: list[dict], completions: list[list[str]]) -> list[list[Verdict]]:
    return [
        [score(verifier_for(row), c, row) for c in row_completions]
        for row, row_completions in zip(rows, completions, strict=True)
    ]


def rewards(verdicts: list[list[Verdict]]) -> np.ndarray:
    """(rows x samples) array of rewards."""
    return np.array([[v.reward for v in row] for row in verdicts], dtype=float)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(reward_matrix: np.ndarray, k: int, threshold: float = 1.0) -> float:
    n = reward_matrix.shape[1]
    correct = (reward_matrix >= threshold).sum(axis=1)
    return float(np.mean([pass_at_k(n, int(c), k) for c in correct]))


def bootstrap_ci(
    per_item: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over items."""
    per_item = np.asarray(per_item, dtype=float)
    if per_item.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = per_item[rng.integers(0, per_item.size, (n_boot, per_item.size))].mean(axis=1)
    alpha = (1 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))
