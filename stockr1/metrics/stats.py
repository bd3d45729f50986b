"""Paired bootstrap confidence intervals for the difference of a metric between two forecasters.

Both forecasters are scored on the SAME windows, so we resample windows (not the two score sets
independently): the difference keeps the pairing and common noise cancels.

Why a block bootstrap over dates: windows from a sliding split overlap (consecutive decision days
share S-1 of their S future days) and tickers on the same date move together (S&P 500 and NASDAQ),
so per-window scores are far from independent. An i.i.d. bootstrap would give intervals that are
too narrow and call noise a win. We use the circular moving-block bootstrap over the sorted unique
dates (Künsch 1989; Politis & Romano 1992): draw ``ceil(D / b)`` blocks of ``b`` consecutive dates
with uniform random starts (wrapping around), keep every window whose date is in a block (all
tickers of a date travel together), and recompute the statistic on the resample. Block length
default ``b = max(horizon, ceil(D ** (1/3)))``: at least the overlap length, growing with D like the
MSE-optimal rate. ``block=1`` with one window per date is the ordinary i.i.d. paired bootstrap.

CI: percentile interval of the bootstrap distribution of ``stat(model) - stat(baseline)``.
Verdict: ``stockr1.metrics.verdict.verdict`` of the interval ("holds" / "tie" / "worse" from the first
argument's side, by the metric's direction): a tie whenever the interval includes 0.

Trained rows (several training seeds): ``hierarchical_bootstrap`` resamples the seeds and, within the
resample, the questions (a two-stage bootstrap, Davison & Hinkley 1997 §3.8), so the interval carries the
training-seed variance as well as the question sampling; an interval over questions alone with the
seeds averaged per question leaves the seed spread out. ``stratified_bootstrap`` does the same for a
weighted sum of stratum means (e.g. golds weighted equally), resampling each stratum's questions apart so
every resample keeps the strata's sizes and weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stockr1.metrics.verdict import verdict as verdict_of


@dataclass(frozen=True)
class PairedDiff:
    """``diff = stat(a) - stat(b)`` on the full sample, its bootstrap CI, and the verdict for ``a``."""

    diff: float
    lo: float
    hi: float
    verdict: str  # "holds" | "tie" | "worse" from a's point of view (stockr1.metrics.verdict)
    level: float
    n_boot: int
    block: int


def default_block(n_dates: int, horizon: int = 1) -> int:
    """``max(horizon, ceil(D ** (1/3)))``, capped at D."""
    return min(max(int(horizon), math.ceil(n_dates ** (1 / 3)), 1), n_dates)


def block_resamples(
    dates: np.ndarray, block: int | None = None, horizon: int = 1, n_boot: int = 1000, seed: int = 0
) -> tuple[list[np.ndarray], int]:
    """Window indices of ``n_boot`` circular moving-block resamples of the unique dates.

    Compute once and pass to ``paired_bootstrap(resamples=...)`` for every metric and baseline, so
    all differences of one run share the same resamples. Returns ``(resamples, block)``.
    """
    dates = np.asarray(dates)
    uniq, inv = np.unique(dates, return_inverse=True)
    d = len(uniq)
    block = default_block(d, horizon) if block is None else min(max(int(block), 1), d)
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(d + 1))
    by_date = [order[bounds[i] : bounds[i + 1]] for i in range(d)]
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, d, size=(n_boot, math.ceil(d / block)))
    offs = np.arange(block)
    out = []
    for b in range(n_boot):
        date_idx = ((starts[b][:, None] + offs[None, :]) % d).ravel()[:d]
        out.append(np.concatenate([by_date[i] for i in date_idx]))
    return out, block


def paired_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    stat: Callable[[np.ndarray], float] = lambda x: float(np.mean(x)),
    dates: np.ndarray | None = None,
    block: int | None = None,
    horizon: int = 1,
    n_boot: int = 1000,
    level: float = 0.95,
    higher_is_better: bool = False,
    seed: int = 0,
    resamples: tuple[list[np.ndarray], int] | None = None,
) -> PairedDiff:
    """Paired (block) bootstrap CI of ``stat(a) - stat(b)``.

    a, b:   [N] or [N, k] per-window ingredients of the two forecasters on the same windows
    stat:   reduces an array like ``a`` (rows resampled) to the metric, e.g. sqrt(mean) for RMSE
    dates:  [N] the window's decision date (time order for blocks); None = windows already in time
            order, one per step
    block:  block length in dates; None = ``max(horizon, ceil(D ** (1/3)))``
    resamples: precomputed ``block_resamples(...)`` (then dates/block/n_boot/seed are ignored)
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"paired arrays must have the same shape, got {a.shape} and {b.shape}")
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"need at least 2 windows for a bootstrap, got {n}")
    if resamples is None:
        dates = np.arange(n) if dates is None else np.asarray(dates)
        if dates.shape[0] != n:
            raise ValueError(f"dates has {dates.shape[0]} entries for {n} windows")
        resamples = block_resamples(dates, block, horizon, n_boot, seed)
    idx, block = resamples
    boots = np.array([stat(a[i]) - stat(b[i]) for i in idx])
    alpha = (1.0 - level) / 2.0
    lo, hi = (float(v) for v in np.quantile(boots, [alpha, 1.0 - alpha]))
    diff = float(stat(a) - stat(b))
    return PairedDiff(diff, lo, hi, verdict_of(diff, lo, hi, higher_is_better), level, len(idx), block)


def hierarchical_bootstrap(
    a: np.ndarray,
    b: np.ndarray | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    higher_is_better: bool = True,
    seed: int = 0,
) -> PairedDiff:
    """Two-stage (seed x question) paired bootstrap CI of ``mean(a) - mean(b)``.

    a, b: [S, Q] per-seed, per-question values (row s of ``a`` and of ``b`` come from the same training
          seed s, column q is the same question); b = None: the interval of ``mean(a)`` itself.
    Each resample draws S seeds with replacement, then Q questions with replacement (the same draws for
    ``a`` and ``b``, so the pairing is kept), and takes the mean over the drawn [S, Q] block. With one
    seed it is the ordinary paired bootstrap over questions. ``block`` of the result is 1."""
    a = np.asarray(a, dtype=np.float64)
    b = np.zeros_like(a) if b is None else np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"hierarchical_bootstrap needs two [S seeds, Q questions] arrays of one shape, got "
                         f"{a.shape} and {b.shape}")
    s, q = a.shape
    if q < 2:
        raise ValueError(f"need at least 2 questions for a bootstrap, got {q}")
    d = a - b
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, s, size=(n_boot, s))
    cols = rng.integers(0, q, size=(n_boot, q))
    boots = np.array([d[seeds[i]][:, cols[i]].mean() for i in range(n_boot)])
    alpha = (1.0 - level) / 2.0
    lo, hi = (float(v) for v in np.quantile(boots, [alpha, 1.0 - alpha]))
    diff = float(d.mean())
    return PairedDiff(diff, lo, hi, verdict_of(diff, lo, hi, higher_is_better), level, n_boot, 1)


def stratified_bootstrap(
    strata: list[np.ndarray],
    weights: list[float],
    n_boot: int = 2000,
    level: float = 0.95,
    higher_is_better: bool = True,
    seed: int = 0,
) -> PairedDiff:
    """Two-stage bootstrap CI of ``sum_k weights[k] * mean(strata[k])``.

    strata: [S, Q_k] per-seed, per-question values (paired differences already taken), the same S seeds in
            every stratum. Each resample draws S seeds with replacement, then each stratum's Q_k questions
            with replacement within that stratum. With one seed (``x.mean(0, keepdims=True)``) it is the
            questions-only interval. ``block`` of the result is 1."""
    strata = [np.asarray(x, dtype=np.float64) for x in strata]
    if len(strata) != len(weights) or any(x.ndim != 2 or x.shape[0] != strata[0].shape[0] for x in strata):
        raise ValueError(f"stratified_bootstrap needs one weight per [S, Q_k] stratum with one S, got "
                         f"{[x.shape for x in strata]} and {len(weights)} weights")
    if min(x.shape[1] for x in strata) < 2:
        raise ValueError(f"need at least 2 questions per stratum, got {[x.shape[1] for x in strata]}")
    rng = np.random.default_rng(seed)
    s = strata[0].shape[0]
    seeds = rng.integers(0, s, size=(n_boot, s))
    cols = [rng.integers(0, x.shape[1], size=(n_boot, x.shape[1])) for x in strata]
    boots = np.array([sum(w * x[seeds[i]][:, c[i]].mean() for w, x, c in zip(weights, strata, cols, strict=True))
                      for i in range(n_boot)])
    alpha = (1.0 - level) / 2.0
    lo, hi = (float(v) for v in np.quantile(boots, [alpha, 1.0 - alpha]))
    diff = float(sum(w * x.mean() for w, x in zip(weights, strata, strict=True)))
    return PairedDiff(diff, lo, hi, verdict_of(diff, lo, hi, higher_is_better), level, n_boot, 1)


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (nan for n = 0).

    For independent trials; use ``block_resamples`` where trials share dates (overlapping windows)."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
