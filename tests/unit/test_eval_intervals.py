"""Confidence intervals of the evaluation's figures: bootstrap (plain, paired, AUC) and Wilson."""

from __future__ import annotations

import numpy as np
import pytest

from shared.tools.eval.metrics import (
    auc_bootstrap_ci,
    bootstrap_ci,
    paired_bootstrap,
    roc_curve,
    wilson_interval,
)


def test_a_constant_paired_difference_has_a_point_interval():
    rng = np.random.default_rng(3)
    b = rng.random(80)
    out = paired_bootstrap(b + 0.1, b)
    assert out["diff"] == pytest.approx(0.1)
    assert (out["diff_low"], out["diff_high"]) == pytest.approx((0.1, 0.1))
    # ... while each side alone varies from resample to resample.
    assert out["a_low"] < out["a"] < out["a_high"] and out["b_low"] < out["b"] < out["b_high"]


def test_pairing_narrows_the_difference_interval():
    rng = np.random.default_rng(4)
    base = rng.random(150)
    a, b = base + rng.normal(0.02, 0.02, 150), base
    out = paired_bootstrap(a, b)
    assert out["diff_low"] > 0  # a consistent small gain is resolved
    assert out["diff_high"] - out["diff_low"] < (out["a_high"] - out["a_low"]) / 2


def test_intervals_are_reproducible_and_hold_the_mean():
    values = np.random.default_rng(5).random(60)
    assert bootstrap_ci(values) == bootstrap_ci(values)
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high
    assert bootstrap_ci(values, seed=1) != bootstrap_ci(values, seed=2)


def test_paired_figures_must_cover_the_same_cases():
    with pytest.raises(ValueError, match="same cases: 3 against 2"):
        paired_bootstrap([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least one"):
        bootstrap_ci([])


def test_auc_interval_around_the_auc():
    rng = np.random.default_rng(6)
    labels = rng.random(200) < 0.5
    scores = rng.normal(labels * 1.0, 1.0)
    low, high = auc_bootstrap_ci(scores, labels)
    assert low < roc_curve(scores, labels)["auc"] < high
    assert auc_bootstrap_ci([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == (1.0, 1.0)
    with pytest.raises(ValueError, match="both classes"):
        auc_bootstrap_ci([0.1, 0.2], [True, True])


def test_wilson_interval_by_hand():
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
