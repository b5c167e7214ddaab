"""Continual-learning metrics over accuracies (pure functions, no I/O).

Conventions: accuracies are fractions in [0, 1] (or percentages: the relative measures do not
care); stage 0 is the base model, stage k (1..K) the checkpoint after the k-th training stage.

- relative performance (%) = 100 * (acc - acc_base) / acc_base, as in "Denser != Better"
  (base 32.71 -> 56.42 gives +72.5). When the base accuracy is 0 (or NaN) the ratio is
  undefined: the result is NaN, never an infinity; callers record why (`note` column of
  cl_metrics.csv).
- gain = max(0, relative), forgetting = max(0, -relative), per (stage, benchmark); NaN stays NaN.
- classic forgetting (Chaudhry et al., 2018, "Riemannian Walk"): for a task j learnt before the
  last stage, f_j = max over the earlier trained stages l < K of a_{l,j} - a_{K,j}.
- backward transfer (Lopez-Paz & Ranzato, 2017): BWT = mean over tasks j < T of
  R[T, j] - R[j, j], with R[i, j] the accuracy on task j after stage i.
- forward transfer: FWT = mean over tasks j > 1 of R[j-1, j] - b_j, with b_j the base accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

_T975 = (  # two-sided 95% Student t quantiles, df = 1..30
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def relative_performance(acc, base):
    """100 * (acc - base) / base, elementwise; NaN where base is 0 or NaN (undefined).

    Returns a float for scalar inputs, an array otherwise."""
    acc_a = np.asarray(acc, dtype=float)
    base_a = np.asarray(base, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = 100.0 * (acc_a - base_a) / base_a
    rel = np.where((base_a == 0) | np.isnan(base_a), np.nan, rel)
    return float(rel) if rel.ndim == 0 else rel


def gain(rel):
    """max(0, relative performance); NaN stays NaN."""
    out = np.where(np.isnan(np.asarray(rel, dtype=float)), np.nan, np.maximum(0.0, rel))
    return float(out) if out.ndim == 0 else out


def forgetting(rel):
    """max(0, -relative performance) (the paper's forgetting); NaN stays NaN."""
    out = np.where(
        np.isnan(np.asarray(rel, dtype=float)), np.nan, np.maximum(0.0, -np.asarray(rel))
    )
    return float(out) if out.ndim == 0 else out


def average_accuracy(accs: Sequence[float]) -> float:
    """Mean accuracy over benchmarks; NaN for an empty selection."""
    values = np.asarray(list(accs), dtype=float)
    return float(values.mean()) if values.size else float("nan")


def nan_mean(values: Sequence[float]) -> float:
    """Mean over the finite values (NaN if none): e.g. the OOD mean relative performance when
    some benchmark's base accuracy is 0."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()) if arr.size else float("nan")


def max_forgetting(history: Sequence[float]) -> float:
    """Classic (Chaudhry et al.) forgetting of one task: max over the earlier stages of its
    accuracy minus its accuracy at the last stage of `history`.

    history: the task's accuracies after stages l..k in order (the last one is the current
    stage); at least two values, else NaN. Positive means forgotten, negative means improved.
    """
    values = np.asarray(list(history), dtype=float)
    if values.size < 2:
        return float("nan")
    return float(values[:-1].max() - values[-1])


def backward_transfer(matrix) -> float:
    """BWT of a T x T task matrix, R[i, j] = accuracy on task j after training stage i
    (0-based, task i trained at stage i): mean over j < T-1 of R[T-1, j] - R[j, j].

    Negative means forgetting. NaN when T < 2."""
    r = np.asarray(matrix, dtype=float)
    if r.ndim != 2 or r.shape[0] != r.shape[1]:
        raise ValueError(f"backward_transfer needs a square matrix, got shape {r.shape}")
    t = r.shape[0]
    if t < 2:
        return float("nan")
    return float(np.mean([r[t - 1, j] - r[j, j] for j in range(t - 1)]))


def forward_transfer(matrix, base: Sequence[float]) -> float:
    """FWT of a T x T task matrix (as in `backward_transfer`) and the base accuracies b_j:
    mean over j >= 1 of R[j-1, j] - b_j (how much earlier stages help a task before it is
    trained). NaN when T < 2."""
    r = np.asarray(matrix, dtype=float)
    b = np.asarray(list(base), dtype=float)
    t = r.shape[0]
    if t < 2:
        return float("nan")
    return float(np.mean([r[j - 1, j] - b[j] for j in range(1, t)]))


def t_quantile_975(df: int) -> float:
    """Two-sided 95% Student t quantile (table for df <= 30, Cornish-Fisher expansion above)."""
    if df < 1:
        return float("nan")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def mean_ci(values: Sequence[float]) -> tuple[float, float, float, float, int]:
    """(mean, std, ci_low, ci_high, n) over the finite values with a t-based 95% interval
    (NaN interval for fewer than 2 values)."""
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    n = int(arr.size)
    if n == 0:
        nan = float("nan")
        return nan, nan, nan, nan, 0
    mean = float(arr.mean())
    if n < 2:
        return mean, float("nan"), float("nan"), float("nan"), n
    std = float(arr.std(ddof=1))
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return mean, std, mean - half, mean + half, n
