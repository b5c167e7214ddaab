"""Scoring completions and the accuracy statistics built on them.

From an item's k samples (`evaluation.samples`), beside avg@k (the mean reward):

    pass@j   the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
             Trained on Code", eq. 1): 1 - C(n - c, j) / C(n, j) for n samples of which c are
             correct, averaged over items; pass@1 is c / n, pass@n whether any sample is correct
    maj@k    majority voting over the verifier's normalised answers (`Verdict.answer`): the
             answer most of the item's samples give (a tie goes to the one given first; samples
             without an answer do not vote) is correct when a sample giving it is. Where no
             sample of the item has an answer to compare (programs: the code verifiers give
             none), the vote is over the verdicts: correct when more than half are

A sample is correct when its reward is 1 (`SUCCESS`): for a verifier with partial credit (the
ZebraLogic grid's cell share) only a fully right answer counts. The same success drives the item
ledger (cptlab.results.ledger).
"""

from __future__ import annotations

from math import comb

import numpy as np

from cptlab.domains import verifier_for
from cptlab.verifiers import Verdict, score

# A benchmark's test pass fraction and its interval, as EVAL.json and scores.csv name them.
PASS_FRACTION_KEYS = (
    "test_pass_fraction",
    "test_pass_fraction_ci_low",
    "test_pass_fraction_ci_high",
)
# pass@1, pass@k and maj@k (k = evaluation.samples) with their intervals, as EVAL.json and
# scores.csv name them; null / NaN where an item has fewer than 2 samples (pass@1 too: with one
# greedy sample it is the accuracy of a binary reward).
SAMPLED_KEYS = tuple(
    f"{metric}{suffix}"
    for metric in ("pass_at_1", "pass_at_k", "maj_at_k")
    for suffix in ("", "_ci_low", "_ci_high")
)


def score_completions(rows: list[dict], completions: list[list[str]]) -> list[list[Verdict]]:
    return [
        [score(verifier_for(row), c, row) for c in row_completions]
        for row, row_completions in zip(rows, completions, strict=True)
    ]


SUCCESS = 1.0


def rewards(verdicts: list[list[Verdict]]) -> np.ndarray:
    """(rows x samples) array of rewards."""
    return np.array([[v.reward for v in row] for row in verdicts], dtype=float)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def item_pass_at_k(item_rewards: list[float], k: int) -> float:
    """pass@k of one item from its samples' rewards (k at most their number)."""
    correct = sum(1 for r in item_rewards if r >= SUCCESS)
    return pass_at_k(len(item_rewards), correct, k)


def item_majority(item_rewards: list[float], answers: list[str | None] | None) -> float:
    """maj@k of one item (module docstring): 1.0 when its vote's winner is correct, else 0.0."""
    votes = [(a, r) for a, r in zip(answers or [], item_rewards, strict=False) if a is not None]
    if not votes:  # nothing to compare: the verdicts vote
        return float(sum(1 for r in item_rewards if r >= SUCCESS) > len(item_rewards) / 2)
    counts: dict[str, int] = {}
    first_reward: dict[str, float] = {}
    for answer, reward in votes:
        counts[answer] = counts.get(answer, 0) + 1
        first_reward.setdefault(answer, reward)
    winner = max(counts, key=counts.get)  # dicts keep insertion order: ties go to the first
    return float(first_reward[winner] >= SUCCESS)


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
