"""Paired (block) bootstrap: known-answer checks on i.i.d. and autocorrelated differences."""

import math

import numpy as np
import pytest

from stockr1.metrics.stats import (
    block_resamples,
    default_block,
    hierarchical_bootstrap,
    paired_bootstrap,
    stratified_bootstrap,
)
from stockr1.metrics.verdict import claim_line, phrase, target_verdict, verdict


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
    assert r.verdict == "holds"
    assert paired_bootstrap(b, a, block=1, n_boot=400).verdict == "worse"
    assert paired_bootstrap(a, b, block=1, n_boot=400, higher_is_better=True).verdict == "worse"
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
    assert r.diff == pytest.approx(1.0) and r.lo == pytest.approx(1.0) and r.verdict == "worse"
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap(np.zeros(3), np.zeros(4))


def test_verdict_words_for_a_tie_a_clear_win_and_a_clear_loss():
    # a tie: the interval holds 0, however large the point difference
    assert verdict(+3.8, -2.3, +6.0) == "tie"
    assert phrase(verdict(+3.8, -2.3, +6.0)) == "tie (the interval includes 0)"
    assert claim_line("u-GRPO − SFT", 3.8, -2.3, 6.0) == (
        "u-GRPO − SFT: +3.8 [-2.3, +6.0]: **tie** (the interval includes 0)")
    # a clear win, in both directions of "better"
    assert verdict(2.0, 0.5, 3.5) == "holds"
    assert verdict(-0.02, -0.03, -0.01, higher_is_better=False) == "holds"
    assert claim_line("u-GRPO − SFT", 2.0, 0.5, 3.5) == (
        "u-GRPO − SFT: +2.0 [+0.5, +3.5]: **holds** (the interval excludes 0)")
    # a clear loss
    assert verdict(-2.0, -3.5, -0.5) == "worse"
    assert phrase("worse") == "worse (the interval excludes 0 on the other side)"
    # a target is the same rule on value - target: 85% [78, 91] against ">= 80%" is a tie, [82, 88] holds
    assert target_verdict(85.0, 78.0, 91.0, 80.0) == "tie"
    assert target_verdict(85.0, 82.0, 88.0, 80.0) == "holds"
    assert target_verdict(3.0, 1.0, 4.0, 5.0, at_least=False) == "holds"  # unparsed at most 5%
    with pytest.raises(ValueError, match="lo > hi"):
        verdict(0.0, 1.0, -1.0)
    with pytest.raises(ValueError, match="lo is nan"):
        verdict(0.0, float("nan"), 1.0)


def test_hierarchical_bootstrap_carries_the_seed_spread():
    """Per seed the difference is +3.8, -2.3, 0.0 points (the issue's GRPO − SFT) with little question
    noise: a bootstrap over questions of the seed-averaged values calls +0.5 a clear win, the
    seed x question bootstrap a tie."""
    rng = np.random.default_rng(0)
    q = 400
    seed_effect = np.array([3.8, -2.3, 0.0])[:, None]
    d = seed_effect + rng.normal(0, 1.0, (3, q))
    averaged = paired_bootstrap(d.mean(0), np.zeros(q), block=1, n_boot=1000, higher_is_better=True)
    assert averaged.verdict == "holds"  # the question-only interval leaves the seed spread out
    h = hierarchical_bootstrap(d, np.zeros_like(d), n_boot=1000)
    assert h.diff == pytest.approx(d.mean())
    assert h.verdict == "tie" and h.lo < -1.5 and h.hi > 2.5
    # one seed: the ordinary paired bootstrap over questions (same width within noise)
    one = hierarchical_bootstrap(d[:1], np.zeros((1, q)), n_boot=1000)
    ref = paired_bootstrap(d[0], np.zeros(q), block=1, n_boot=1000, higher_is_better=True)
    assert (one.hi - one.lo) == pytest.approx(ref.hi - ref.lo, rel=0.15)
    # pairing: a common per-seed, per-question offset cancels exactly
    base = rng.normal(0, 10, (3, q))
    p = hierarchical_bootstrap(base + 1.0, base, n_boot=200)
    assert p.lo == pytest.approx(1.0) and p.hi == pytest.approx(1.0) and p.verdict == "holds"
    with pytest.raises(ValueError, match="one shape"):
        hierarchical_bootstrap(np.zeros((2, 3)), np.zeros((3, 3)))


def test_stratified_bootstrap_resamples_each_stratum_apart() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(0.5, 1.0, (3, 40))
    # one stratum of weight 1 draws exactly as the two-stage bootstrap does
    one = stratified_bootstrap([d], [1.0], n_boot=300)
    ref = hierarchical_bootstrap(d, np.zeros_like(d), n_boot=300)
    assert (one.diff, one.lo, one.hi, one.verdict) == pytest.approx((ref.diff, ref.lo, ref.hi, ref.verdict))
    # two constant strata of unequal size: resampling within each keeps its mean, so the weighted sum
    # 0.5 * 2 - 0.5 * (-1) = 1.5 has no spread; a pooled resample would change the strata's mix
    a, b = np.full((2, 2), 2.0), np.full((2, 5), -1.0)
    got = stratified_bootstrap([a, b], [0.5, -0.5], n_boot=200)
    assert got.diff == pytest.approx(1.5) and got.lo == pytest.approx(1.5) and got.hi == pytest.approx(1.5)
    assert got.verdict == "holds"
    with pytest.raises(ValueError, match="at least 2 questions per stratum"):
        stratified_bootstrap([a, np.zeros((2, 1))], [0.5, 0.5])
    with pytest.raises(ValueError, match="one weight per"):
        stratified_bootstrap([a, np.zeros((3, 4))], [0.5, 0.5])
