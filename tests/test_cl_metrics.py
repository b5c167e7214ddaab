"""The continual-learning metrics on hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cptlab.results import cl_metrics as clm


def test_relative_performance_matches_the_paper():
    # "Denser != Better": base AIME 32.71 -> 56.42 is +72.5 %
    assert round(clm.relative_performance(56.42, 32.71), 1) == 72.5
    assert clm.relative_performance(0.3, 0.4) == pytest.approx(-25.0)
    assert clm.relative_performance([0.5, 0.2], [0.25, 0.4]) == pytest.approx([100.0, -50.0])


def test_relative_performance_is_nan_when_the_base_is_zero():
    assert math.isnan(clm.relative_performance(0.3, 0.0))
    assert math.isnan(clm.relative_performance(0.0, 0.0))
    assert math.isnan(clm.relative_performance(0.3, float("nan")))
    rel = clm.relative_performance([0.3, 0.6], [0.0, 0.3])
    assert math.isnan(rel[0]) and rel[1] == pytest.approx(100.0)


def test_gain_and_forgetting():
    rel = np.array([72.5, -26.0, 0.0, np.nan])
    g, f = clm.gain(rel), clm.forgetting(rel)
    assert g[:3] == pytest.approx([72.5, 0.0, 0.0]) and math.isnan(g[3])
    assert f[:3] == pytest.approx([0.0, 26.0, 0.0]) and math.isnan(f[3])
    assert clm.gain(-80.0) == 0.0 and clm.forgetting(-80.0) == 80.0


# Task matrix R[i, j]: accuracy on task j after stage i (stage i trains task i).
R = np.array(
    [
        [0.60, 0.10, 0.20],
        [0.40, 0.70, 0.25],
        [0.50, 0.30, 0.80],
    ]
)
BASE = [0.2, 0.1, 0.15]


def test_backward_transfer():
    # ((0.50 - 0.60) + (0.30 - 0.70)) / 2 = -0.25
    assert clm.backward_transfer(R) == pytest.approx(-0.25)
    # after two stages: 0.40 - 0.60
    assert clm.backward_transfer(R[:2, :2]) == pytest.approx(-0.20)
    assert math.isnan(clm.backward_transfer(R[:1, :1]))
    with pytest.raises(ValueError, match="square"):
        clm.backward_transfer(R[:2])


def test_forward_transfer():
    # ((0.10 - 0.10) + (0.25 - 0.15)) / 2 = 0.05
    assert clm.forward_transfer(R, BASE) == pytest.approx(0.05)


def test_max_forgetting_is_chaudhry():
    # task 0 over stages 0..2: best earlier 0.60, final 0.50
    assert clm.max_forgetting(R[:, 0]) == pytest.approx(0.10)
    # task 1 from the stage that trained it: best earlier 0.70, final 0.30
    assert clm.max_forgetting(R[1:, 1]) == pytest.approx(0.40)
    # improvement is negative forgetting
    assert clm.max_forgetting([0.2, 0.5]) == pytest.approx(-0.3)
    assert math.isnan(clm.max_forgetting([0.5]))


def test_averages():
    assert clm.average_accuracy([0.2, 0.4, 0.9]) == pytest.approx(0.5)
    assert math.isnan(clm.average_accuracy([]))
    assert clm.nan_mean([10.0, float("nan"), -30.0]) == pytest.approx(-10.0)
    assert math.isnan(clm.nan_mean([float("nan")]))


def test_mean_ci_across_seeds():
    mean, std, low, high, n = clm.mean_ci([1.0, 2.0, 3.0])
    assert (mean, std, n) == (2.0, 1.0, 3)
    half = 4.303 * 1.0 / math.sqrt(3)  # t(0.975, df=2)
    assert (low, high) == pytest.approx((2.0 - half, 2.0 + half))
    assert math.isnan(clm.mean_ci([5.0])[2])
    assert clm.t_quantile_975(40) == pytest.approx(2.021, abs=2e-3)  # tables: 2.021
    assert clm.t_quantile_975(120) == pytest.approx(1.980, abs=2e-3)
