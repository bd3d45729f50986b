"""Paired (block) bootstrap: known-answer checks on i.i.d. and autocorrelated differences."""

import math

import numpy as np
import pytest

from stockr1.metrics.stats import block_resamples, default_block, paired_bootstrap


def test_iid_ci_matches_normal_theory_and_verdicts():
    rng = np.random.default_rng(0)
    n = 2000
    common = rng.normal(0, 5, n)  # shared noise: cancels only because the bootstrap is paired
    b = common + rng.normal(0, 1, n)
    a = b - 0.2 + rng.normal(0, 1, n)  # a is 0.2 lower (better when lower is better)
    r = paired_bootstrap(a, b, block=1, n_boot=800, seed=1)
    half = 1.96 * np.std(a - b, ddof=1) / math.sqrt(n)
    assert r.diff == pytest.approx(np.mean(a - b))
    assert (r.hi - r.lo) / 2 == pytest.approx(half, rel=0.15)
    assert r.lo < r.diff < r.hi
    assert r.verdict == "win"
    assert paired_bootstrap(b, a, block=1, n_boot=400).verdict == "loss"
    assert paired_bootstrap(a, b, block=1, n_boot=400, higher_is_better=True).verdict == "loss"
    same = b + rng.normal(0, 1, n)
    assert paired_bootstrap(same, b, block=1, n_boot=400).verdict == "tie"


def test_ci_covers_true_mean_at_nominal_rate():
    rng = np.random.default_rng(5)
    hits = 0
    trials = 120
    for t in range(trials):
        d = rng.normal(0.3, 1.0, 150)
        r = paired_bootstrap(d, np.zeros(150), block=1, n_boot=300, seed=t)
        hits += r.lo <= 0.3 <= r.hi
    assert 0.88 <= hits / trials <= 0.99


def test_block_bootstrap_widens_ci_for_autocorrelated_scores():
    """AR(1) differences with φ = 0.8: the long-run variance is σ²/(1-φ)² = 25× the i.i.d. one,
    so the correct CI is ~sqrt(25 · (1-φ²)) = 3× wider than the i.i.d. bootstrap's."""
    rng = np.random.default_rng(7)
    n, phi = 4000, 0.8
    e = rng.normal(size=n)
    d = np.empty(n)
    d[0] = e[0]
    for t in range(1, n):
        d[t] = phi * d[t - 1] + e[t]
    iid = paired_bootstrap(d, np.zeros(n), block=1, n_boot=400, seed=0)
    blk = paired_bootstrap(d, np.zeros(n), block=50, n_boot=400, seed=0)
    true_half = 1.96 * math.sqrt(1 / (1 - phi) ** 2 / n)
    assert (blk.hi - blk.lo) / 2 == pytest.approx(true_half, rel=0.25)
    assert (blk.hi - blk.lo) / (iid.hi - iid.lo) > 2.0


def test_windows_of_one_date_travel_together_and_block_default():
    dates = np.repeat(np.arange(30), 2)  # two tickers per date
    idx, block = block_resamples(dates, horizon=10, n_boot=5, seed=0)
    assert block == default_block(30, 10) == 10
    for i in idx:
        assert len(i) == 60
        # every resampled date contributes both of its windows
        assert np.all(np.bincount(dates[i], minlength=30) % 2 == 0)


def test_custom_statistic_rmse_and_bad_input():
    a = np.array([4.0, 4.0, 4.0, 4.0])  # squared errors -> RMSE 2
    b = np.array([1.0, 1.0, 1.0, 1.0])  # RMSE 1
    r = paired_bootstrap(a, b, stat=lambda x: float(np.sqrt(np.mean(x))), block=1, n_boot=50)
    assert r.diff == pytest.approx(1.0) and r.lo == pytest.approx(1.0) and r.verdict == "loss"
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap(np.zeros(3), np.zeros(4))
