"""Distances between data sets: MMD between prompt embeddings, a t-SNE map, and gain or
forgetting against distance.

The study explains forgetting by how related the domains are: it embeds every data set's prompts,
measures MMD with an RBF kernel between every pair of data sets (a heatmap), draws a t-SNE map,
and plots gain and forgetting against MMD (an inverted U: partly related domains forget most).

mmd_rbf       unbiased MMD^2 (Gretton et al. 2012, eq. 3) with k(x, y) = exp(-|x-y|^2 / 2s^2);
              s by the median heuristic (median pairwise distance of the pooled sample) unless
              given. Unbiased means E[estimate] = MMD^2, so two samples of one distribution
              give values scattered around 0 (slightly negative ones included), and a set
              against itself gives a small negative number (-2/m for well-separated points).
pairwise_mmd  the symmetric matrix of mmd_rbf over data sets (diagonal 0 by definition).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from cptlab.drift.embedders import Embedder
from cptlab.errors import InputError


def _squared_distances(z: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", z, z)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (z @ z.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return d2


def median_heuristic_bandwidth(points: np.ndarray) -> float:
    """Median of the pairwise Euclidean distances (i < j) of `points`. Falls back to the mean
    positive distance when more than half the pairs coincide, and to 1.0 when all do."""
    z = np.asarray(points, dtype=np.float64)
    if z.shape[0] < 2:
        raise ValueError("the median heuristic needs at least two points")
    d = np.sqrt(_squared_distances(z)[np.triu_indices(z.shape[0], k=1)])
    median = float(np.median(d))
    if median > 0:
        return median
    positive = d[d > 0]
    return float(positive.mean()) if positive.size else 1.0


def mmd_rbf(x: np.ndarray, y: np.ndarray, bandwidth: float | None = None) -> float:
    """Unbiased MMD^2 between samples x (m, d) and y (n, d), RBF kernel of width `bandwidth`
    (None: median heuristic on the pooled sample). Needs m, n >= 2."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"need two (n, d) samples of one dimension, got {x.shape} and {y.shape}")
    m, n = len(x), len(y)
    if m < 2 or n < 2:
        raise ValueError(f"the unbiased MMD needs >= 2 points per sample, got {m} and {n}")
    z = np.concatenate([x, y])
    sigma = median_heuristic_bandwidth(z) if bandwidth is None else float(bandwidth)
    if sigma <= 0:
        raise ValueError(f"bandwidth must be positive, got {sigma}")
    kernel = np.exp(-_squared_distances(z) / (2.0 * sigma**2))
    kxx, kyy, kxy = kernel[:m, :m], kernel[m:, m:], kernel[:m, m:]
    within_x = (kxx.sum() - np.trace(kxx)) / (m * (m - 1))
    within_y = (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
    return float(within_x + within_y - 2.0 * kxy.mean())


def pairwise_mmd(embeddings: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Square DataFrame (index and columns: data set names, in the given order) of mmd_rbf
    between every pair; the diagonal is 0."""
    names = list(embeddings)
    table = pd.DataFrame(0.0, index=names, columns=names)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            value = mmd_rbf(embeddings[a], embeddings[b])
            table.loc[a, b] = table.loc[b, a] = value
    table.index.name = "dataset"
    return table


def tsne_map(
    embeddings: Mapping[str, np.ndarray], seed: int = 0, perplexity: float = 30.0
) -> pd.DataFrame:
    """2-D t-SNE (scikit-learn, PCA init) of all points; columns dataset, item (row in that
    data set's array), x, y. Perplexity is capped at (points - 1) / 3."""
    from sklearn.manifold import TSNE

    names = [n for n in embeddings for _ in range(len(embeddings[n]))]
    items = [i for n in embeddings for i in range(len(embeddings[n]))]
    points = np.concatenate([np.asarray(embeddings[n], dtype=np.float64) for n in embeddings])
    if len(points) < 4:
        raise ValueError(f"t-SNE needs at least 4 points, got {len(points)}")
    tsne = TSNE(
        n_components=2,
        perplexity=min(perplexity, (len(points) - 1) / 3),
        init="pca",
        learning_rate="auto",
        random_state=seed,
    )
    xy = tsne.fit_transform(points)
    return pd.DataFrame({"dataset": names, "item": items, "x": xy[:, 0], "y": xy[:, 1]})


def _subsample(texts: Sequence[str], limit: int | None, rng: np.random.Generator) -> list[str]:
    if limit is None or len(texts) <= limit:
        return list(texts)
    keep = np.sort(rng.choice(len(texts), size=limit, replace=False))
    return [texts[i] for i in keep]


def dataset_distances(
    prompt_sets: Mapping[str, Sequence[str]],
    embedder: Embedder,
    seed: int = 0,
    max_samples: int | None = 1000,
    tsne_points: int | None = 300,
    perplexity: float = 30.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairwise MMD^2 matrix, t-SNE coordinates) of the prompt sets' embeddings.

    Each set is subsampled (seeded) to `max_samples` prompts for the MMD (O(n^2) memory) and
    to `tsne_points` of those for the map. Needs >= 2 prompts per set.
    """
    if len(prompt_sets) < 2:
        raise ValueError(f"need at least two data sets, got {len(prompt_sets)}")
    rng = np.random.default_rng(seed)
    embeddings = {}
    for name, texts in prompt_sets.items():
        if len(texts) < 2:
            raise InputError(f"data set {name!r} has {len(texts)} prompt(s); need >= 2")
        embeddings[name] = np.asarray(embedder(_subsample(texts, max_samples, rng)))
    mmd = pairwise_mmd(embeddings)
    small = {
        name: e if tsne_points is None or len(e) <= tsne_points else e[:tsne_points]
        for name, e in embeddings.items()
    }
    return mmd, tsne_map(small, seed=seed, perplexity=perplexity)


def fit_trend(x: Sequence[float], y: Sequence[float]) -> dict:
    """Least-squares line y = slope * x + intercept with Pearson r and n (NaN where undefined:
    fewer than 2 points, or a constant x or y for r)."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    n = int(xs.size)
    nan = float("nan")
    if n < 2 or np.ptp(xs) == 0:
        return {"slope": nan, "intercept": nan, "r": nan, "n": n}
    slope, intercept = np.polyfit(xs, ys, 1)
    r = float(np.corrcoef(xs, ys)[0, 1]) if np.ptp(ys) > 0 else nan
    return {"slope": float(slope), "intercept": float(intercept), "r": r, "n": n}


def gain_forgetting_vs_mmd(
    mmd: pd.DataFrame,
    relative: pd.DataFrame,
    source: str = "source",
    target: str = "target",
    value: str = "relative",
) -> tuple[pd.DataFrame, dict]:
    """Join relative performance (%) with the MMD between the trained and the evaluated data set.

    `relative` has one row per (source: the data set trained on, target: the benchmark's data
    set, value: relative performance in %). Gain = max(0, relative), forgetting = max(0,
    -relative), as the study defines them. Returns (table with source, target, mmd, relative, gain,
    forgetting; {"gain": fit_trend(mmd, gain), "forgetting": fit_trend(mmd, forgetting)}).
    """
    for column in (source, target, value):
        if column not in relative.columns:
            raise ValueError(f"relative-performance table has no column {column!r}")
    known = set(mmd.index)
    rows = []
    for _, row in relative.iterrows():
        a, b = row[source], row[target]
        for name in (a, b):
            if name not in known:
                raise InputError(f"data set {name!r} is not in the MMD table ({sorted(known)})")
        rel = float(row[value])
        rows.append(
            {
                "source": a,
                "target": b,
                "mmd": float(mmd.loc[a, b]),
                "relative": rel,
                "gain": max(0.0, rel),
                "forgetting": max(0.0, -rel),
            }
        )
    table = pd.DataFrame(
        rows, columns=["source", "target", "mmd", "relative", "gain", "forgetting"]
    )
    trends = {
        "gain": fit_trend(table["mmd"], table["gain"]),
        "forgetting": fit_trend(table["mmd"], table["forgetting"]),
    }
    return table, trends
