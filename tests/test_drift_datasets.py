"""Dataset distances: the unbiased RBF MMD against a direct O(n^2) double loop, the median
heuristic against scipy, constructed cases (same distribution ~0, separated large), the trend
fit against scipy.stats.linregress, t-SNE output, and the `dataset-distance` subcommand."""

import itertools
import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest
import scipy.spatial.distance
import scipy.stats

from cptlab.cli import parser as cli_parser
from cptlab.drift.distances import (
    dataset_distances,
    fit_trend,
    gain_forgetting_vs_mmd,
    median_heuristic_bandwidth,
    mmd_rbf,
    pairwise_mmd,
    tsne_map,
)
from cptlab.drift.embedders import HashingEmbedder


def direct_mmd(x, y) -> float:
    """Gretton et al. (2012) eq. 3, term by term, bandwidth from an explicit list of distances."""
    z = list(x) + list(y)
    sigma = statistics.median(math.dist(a, b) for a, b in itertools.combinations(z, 2))

    def k(a, b):
        return math.exp(-(math.dist(a, b) ** 2) / (2 * sigma**2))

    m, n = len(x), len(y)
    xx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    yy = sum(k(y[i], y[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    xy = sum(k(a, b) for a in x for b in y) / (m * n)
    return xx + yy - 2 * xy


def test_mmd_matches_the_direct_double_loop():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((15, 3)), rng.standard_normal((11, 3)) + 0.7
    assert mmd_rbf(x, y) == pytest.approx(direct_mmd(x, y), rel=1e-10)
    assert mmd_rbf(x, y, bandwidth=2.0) != pytest.approx(mmd_rbf(x, y))


def test_median_heuristic_matches_scipy():
    z = np.random.default_rng(1).standard_normal((30, 4))
    assert median_heuristic_bandwidth(z) == pytest.approx(
        np.median(scipy.spatial.distance.pdist(z)), rel=1e-12
    )
    assert median_heuristic_bandwidth(np.ones((5, 2))) == 1.0  # all points equal


def test_same_distribution_gives_mmd_near_zero_and_separated_sets_a_large_one():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((150, 5)), rng.standard_normal((150, 5))
    far = rng.standard_normal((150, 5)) + 4.0
    assert abs(mmd_rbf(a, b)) < 0.02
    assert mmd_rbf(a, far) > 0.5
    # A set against itself: the unbiased estimate is <= 0 and ~ -2/m.
    assert -2 / 150 - 1e-9 <= mmd_rbf(a, a) <= 0.0


def test_pairwise_mmd_is_symmetric_with_a_zero_diagonal():
    rng = np.random.default_rng(3)
    sets = {n: rng.standard_normal((12, 3)) + shift for n, shift in (("a", 0), ("b", 1), ("c", 3))}
    table = pairwise_mmd(sets)
    assert list(table.index) == list(table.columns) == ["a", "b", "c"]
    np.testing.assert_allclose(table.to_numpy(), table.to_numpy().T)
    assert (np.diag(table.to_numpy()) == 0).all()
    assert table.loc["a", "c"] == pytest.approx(mmd_rbf(sets["a"], sets["c"]))
    assert table.loc["a", "b"] < table.loc["a", "c"]


def test_fit_trend_matches_linregress():
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, 20)
    y = 3 * x - 1 + 0.1 * rng.standard_normal(20)
    fit, ref = fit_trend(x, y), scipy.stats.linregress(x, y)
    assert fit["n"] == 20
    assert fit["slope"] == pytest.approx(ref.slope, rel=1e-10)
    assert fit["intercept"] == pytest.approx(ref.intercept, rel=1e-10)
    assert fit["r"] == pytest.approx(ref.rvalue, rel=1e-10)
    assert math.isnan(fit_trend([1.0], [2.0])["slope"])
    assert math.isnan(fit_trend([1.0, 2.0], [3.0, 3.0])["r"])  # constant y: r undefined


def test_gain_and_forgetting_against_mmd():
    mmd = pd.DataFrame([[0, 0.1, 0.5], [0.1, 0, 0.3], [0.5, 0.3, 0]],
                       index=list("abc"), columns=list("abc"))  # fmt: skip
    relative = pd.DataFrame(
        {"source": ["a", "a", "b"], "target": ["b", "c", "c"], "relative": [10.0, -20.0, 5.0]}
    )
    table, trends = gain_forgetting_vs_mmd(mmd, relative)
    assert list(table["mmd"]) == [0.1, 0.5, 0.3]
    assert list(table["gain"]) == [10.0, 0.0, 5.0]
    assert list(table["forgetting"]) == [0.0, 20.0, 0.0]
    ref = scipy.stats.linregress(table["mmd"], table["forgetting"])
    assert trends["forgetting"]["slope"] == pytest.approx(ref.slope)
    assert trends["gain"]["n"] == 3
    with pytest.raises(ValueError, match="'z'"):
        gain_forgetting_vs_mmd(mmd, pd.DataFrame({"source": ["z"], "target": ["a"],
                                                  "relative": [1.0]}))  # fmt: skip


def test_tsne_map_has_one_row_per_point():
    rng = np.random.default_rng(5)
    sets = {"a": rng.standard_normal((10, 6)), "b": rng.standard_normal((8, 6)) + 5}
    xy = tsne_map(sets, seed=0, perplexity=5)
    assert list(xy.columns) == ["dataset", "item", "x", "y"]
    assert len(xy) == 18 and list(xy["item"][:10]) == list(range(10))
    again = tsne_map(sets, seed=0, perplexity=5)
    np.testing.assert_allclose(xy[["x", "y"]], again[["x", "y"]])  # seeded
    centre = xy.groupby("dataset")[["x", "y"]].mean()
    spread = xy.groupby("dataset")[["x", "y"]].std().to_numpy().max()
    assert np.linalg.norm(centre.loc["a"] - centre.loc["b"]) > spread  # separated clusters


def math_prompts(n, seed):
    rng = np.random.default_rng(seed)
    return [f"What is {a} plus {b}?" for a, b in rng.integers(0, 100, (n, 2))]


def code_prompts(n, seed):
    rng = np.random.default_rng(seed)
    verbs = ["returns", "prints", "sorts", "reverses"]
    return [f"Write a Python function that {verbs[i % 4]} the list x{a}" for i, a in
            enumerate(rng.integers(0, 100, n))]  # fmt: skip


def test_dataset_distances_rank_related_sets_closer():
    sets = {"math_a": math_prompts(30, 0), "math_b": math_prompts(30, 1),
            "code": code_prompts(30, 2)}  # fmt: skip
    mmd, xy = dataset_distances(sets, HashingEmbedder(), seed=0, max_samples=25, tsne_points=10)
    assert mmd.loc["math_a", "math_b"] < 0.1 * mmd.loc["math_a", "code"]
    assert len(xy) == 30 and set(xy["dataset"]) == set(sets)
    with pytest.raises(ValueError, match="'tiny'"):
        dataset_distances({"tiny": ["x"], "code": code_prompts(3, 0)}, HashingEmbedder())


def write_rows(path, prompts):
    rows = [{"id": f"{path.stem}-{i}", "domain": "d", "benchmark": path.stem, "answer": "1",
             "metadata": {}, "prompt": [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": p}]}
            for i, p in enumerate(prompts)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cli_dataset_distance(tmp_path):

    write_rows(tmp_path / "math_train.jsonl", math_prompts(12, 0))
    write_rows(tmp_path / "aime.jsonl", math_prompts(12, 1))
    write_rows(tmp_path / "code.jsonl", code_prompts(12, 2))
    pd.DataFrame({"source": ["math_train", "math_train"], "target": ["aime", "code"],
                  "relative": [30.0, -10.0]}).to_csv(tmp_path / "rel.csv", index=False)  # fmt: skip
    parser = cli_parser()
    out = tmp_path / "out"
    args = parser.parse_args(
        ["dataset-mmd", "--data", str(tmp_path / "math_train.jsonl"),
         f"aime={tmp_path / 'aime.jsonl'}", str(tmp_path / "code.jsonl"), "--embedder", "hashing",
         "--mmd-out", str(out / "mmd.csv"), "--tsne-out", str(out / "tsne.csv"),
         "--relative", str(tmp_path / "rel.csv"), "--trend-out", str(out / "trend.json"),
         "--trend-table-out", str(out / "trend.csv")]
    )  # fmt: skip
    args.run(args)
    mmd = pd.read_csv(out / "mmd.csv", index_col=0)
    assert list(mmd.index) == ["math_train", "aime", "code"]
    assert mmd.loc["math_train", "aime"] < mmd.loc["math_train", "code"]
    assert len(pd.read_csv(out / "tsne.csv")) == 36
    assert json.loads((out / "trend.json").read_text())["forgetting"]["n"] == 2
    args = parser.parse_args(
        [
            "dataset-mmd",
            "--data",
            str(tmp_path / "nope.jsonl"),
            str(tmp_path / "code.jsonl"),
            "--mmd-out",
            "m",
            "--tsne-out",
            "t",
        ]
    )
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        args.run(args)
