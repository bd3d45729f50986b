"""Trading-R1 volatility-aware five-class labels (Algorithm 1, §3.5).

Algorithm 1, line by line: ``EMA = P.ewm(span=3).mean()``; for tau in (3, 7, 15):
``R_tau = (EMA - EMA.shift(tau)) / EMA.shift(tau)``, ``V_tau = R_tau.rolling(20).std()``,
``S_tau = R_tau / V_tau``; ``W = 0.3 S_3 + 0.5 S_7 + 0.2 S_15``; thresholds are the
3/15/53/85% quantiles of the valid W; ``W >= q85`` STRONG BUY, ``>= q53`` BUY, ``>= q15`` HOLD,
``>= q3`` SELL, else STRONG SELL.

Alignment (the one choice the algorithm leaves implicit): ``EMA.shift(tau)`` is the EMA *tau days
before*, so the literal ``S_tau`` at day u scores the move over (u - tau, u]. The text calls these
"forward returns" and the label is a target for a decision made at t, so the label of day t uses
``S_tau`` evaluated at ``t + tau`` (``S_tau.shift(-tau)``): the EMA move over (t, t + tau] divided by
the volatility of tau-day EMA returns over the 20 days ending at t + tau. ``weighted_signal`` keeps
the literal series (``forward=False``) for the line-by-line test.

Thresholds are fitted per asset (§4.2: "labels are calibrated to each asset's return
distribution") on the training split only, then applied unchanged to val and test.

Look-ahead: the label of t reads prices up to t + max(tau) = t + 15, past the windows' horizon
(10). Trading-R1's windows are therefore built with an embargo of ``label_lookahead(cfg)``
(``sample_label_windows``), and ``labels_for_windows`` leaves undefined (-1) any label that would
read a day of a later split, so shared windows with a shorter embargo (``bench compare`` uses
Stock-R1's) cannot leak either; thresholds are fitted on the remaining train labels only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stockr1.types import SPLITS, train_only

ACTIONS: tuple[str, ...] = ("STRONG SELL", "SELL", "HOLD", "BUY", "STRONG BUY")
# Table 2 of the paper, in ACTIONS order.
PAPER_DISTRIBUTION: tuple[float, ...] = (0.03, 0.12, 0.38, 0.32, 0.15)


@dataclass(frozen=True)
class LabelConfig:
    span: int = 3
    horizons: tuple[int, ...] = (3, 7, 15)
    weights: tuple[float, ...] = (0.3, 0.5, 0.2)
    vol_window: int = 20
    quantiles: tuple[float, ...] = (0.03, 0.15, 0.53, 0.85)


def weighted_signal(prices: pd.Series, cfg: LabelConfig = LabelConfig(), forward: bool = True) -> pd.Series:
    """Composite signal W [T] (NaN where not defined). ``forward`` aligns it to the decision day."""
    if len(cfg.horizons) != len(cfg.weights):
        raise ValueError(f"horizons {cfg.horizons} and weights {cfg.weights} differ in length")
    ema = prices.astype(float).ewm(span=cfg.span).mean()
    total = pd.Series(0.0, index=prices.index)
    for tau, w in zip(cfg.horizons, cfg.weights, strict=True):
        r = (ema - ema.shift(tau)) / ema.shift(tau)
        s = r / r.rolling(cfg.vol_window).std()
        total = total + w * (s.shift(-tau) if forward else s)
    return total.replace([np.inf, -np.inf], np.nan)


def label_lookahead(cfg: LabelConfig = LabelConfig()) -> int:
    """Trading days after t that the label of t reads: each S_tau is read at t + tau and is built
    from the EMA (causal) and a rolling std ending at t + tau, so the farthest price is t + max(tau)."""
    return max(cfg.horizons)


def fit_thresholds(signal: pd.Series, cfg: LabelConfig = LabelConfig()) -> np.ndarray:
    """[4] quantile thresholds of the valid signal (pandas linear interpolation, as in Alg. 1)."""
    valid = signal.dropna()
    if valid.empty:
        raise ValueError("no valid signal values to fit thresholds on (series too short?)")
    return np.array([valid.quantile(q) for q in cfg.quantiles])


def assign_classes(signal: pd.Series, thresholds: np.ndarray) -> pd.Series:
    """Class index 0..4 (ACTIONS order) per day; -1 where the signal is NaN."""
    x = signal.to_numpy(dtype=np.float64)
    cls = np.searchsorted(np.asarray(thresholds), x, side="right")  # x >= thr_i moves up a class
    cls[np.isnan(x)] = -1
    return pd.Series(cls.astype(int), index=signal.index)


def label_series(
    prices: pd.Series, train_end: pd.Timestamp | str | None = None, cfg: LabelConfig = LabelConfig()
) -> tuple[pd.Series, np.ndarray]:
    """Labels of one asset with thresholds fitted on decision days ``<= train_end`` (all if None)."""
    w = weighted_signal(prices, cfg)
    fit_on = w if train_end is None else w[w.index <= pd.Timestamp(train_end)]
    thr = fit_thresholds(fit_on, cfg)
    return assign_classes(w, thr), thr


def class_distribution(classes: pd.Series | np.ndarray) -> np.ndarray:
    """[5] share of each class among valid labels."""
    c = np.asarray(classes)
    c = c[c >= 0]
    return np.bincount(c, minlength=5)[:5] / max(len(c), 1)


def _later_split_start(windows) -> np.ndarray:
    """[N] first decision day of the next split after each window's own (NaT for the last split)."""
    firsts = [windows.date[windows.split == s].min() if (windows.split == s).any() else None for s in SPLITS]
    out = np.full(len(windows), np.datetime64("NaT"), dtype="datetime64[ns]")
    for k, s in enumerate(SPLITS):
        later = [d for d in firsts[k + 1:] if d is not None]
        if later:
            out[windows.split == s] = min(later)
    return out


def _stays_in_split(dates: np.ndarray, cal: pd.DatetimeIndex, limit: np.ndarray, lookahead: int) -> np.ndarray:
    """[n] whether the last price day a label reads (``lookahead`` rows of ``cal`` after its decision
    day) is before ``limit``, the next split's first decision day (NaT = no later split). A day
    missing from ``cal`` has no label anyway: False."""
    row = cal.get_indexer(pd.DatetimeIndex(dates))
    pos = row + lookahead
    last = cal[np.clip(pos, 0, len(cal) - 1)].to_numpy()
    return (row >= 0) & (np.isnat(limit) | (pos >= len(cal)) | (last < limit))


def labels_for_windows(windows, frames: dict[str, pd.DataFrame], cfg: LabelConfig = LabelConfig()) -> np.ndarray:
    """[N] class index per window (-1 = undefined), thresholds per ticker from its train windows.

    ``frames`` are the daily OHLCV frames the windows were built from (the 15-day horizon reaches
    past the windows' S-day future, so labels come from the full series); ``windows`` is the full
    set (all splits), which tells where each split starts. A label that would read a price on or
    after the first decision day of a later split is -1 and takes no part in the threshold fit: the
    embargo is at least the label's look-ahead whatever the windows' own embargo.
    """
    out = np.full(len(windows), -1, dtype=int)
    limit, la = _later_split_start(windows), label_lookahead(cfg)
    for t in sorted(set(windows.ticker.tolist())):
        if t not in frames:
            raise KeyError(f"no price frame for ticker {t!r}")
        idx = np.flatnonzero(windows.ticker == t)
        prices = frames[t]["close"]
        ok = _stays_in_split(windows.date[idx], pd.DatetimeIndex(prices.index), limit[idx], la)
        train = train_only(windows.select(idx[ok]))  # the thresholds fit on these rows' labels only
        if len(train) == 0:
            raise ValueError(f"ticker {t!r} has no train windows to fit label thresholds on")
        classes, _ = label_series(prices, pd.Timestamp(train.date.max()), cfg)
        got = classes.reindex(pd.DatetimeIndex(windows.date[idx])).fillna(-1).to_numpy(dtype=int)
        out[idx] = np.where(ok, got, -1)
    return out


def sample_label_windows(cfg: LabelConfig = LabelConfig(), context: bool = False):
    """The offline sample's windows for Trading-R1: Stock-R1's layout (L = 90, S = 10) with the
    embargo computed from the label look-ahead, so every train/val label is defined. Test rows are
    Stock-R1's (the test split starts at the same day for any embargo)."""
    from stockr1.data import sample_windows

    return sample_windows(context=context, label_lookahead=label_lookahead(cfg))


def distribution_table(windows, frames: dict[str, pd.DataFrame], cfg: LabelConfig = LabelConfig()) -> str:
    """Markdown: class shares per split next to the paper's Table 2."""
    labels = labels_for_windows(windows, frames, cfg)
    head = "| split | n | " + " | ".join(ACTIONS) + " |\n|---|---|" + "---|" * 5 + "\n"
    rows = ["| paper Table 2 | - | " + " | ".join(f"{100 * p:.0f}%" for p in PAPER_DISTRIBUTION) + " |"]
    for split in ("train", "val", "test"):
        c = labels[(windows.split == split) & (labels >= 0)]
        dist = class_distribution(c)
        rows.append(f"| {split} | {len(c)} | " + " | ".join(f"{100 * p:.1f}%" for p in dist) + " |")
    return head + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m rl.methods.trading_r1.labels --out DIR``: class distribution on the offline sample."""
    import argparse
    from pathlib import Path

    ap = argparse.ArgumentParser(prog="trading_r1.labels")
    ap.add_argument("--out", default="results/methods/trading_r1")
    a = ap.parse_args(argv)
    from stockr1.data import load_source

    table = distribution_table(sample_label_windows(), load_source("sample"))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "label_distribution.md").write_text(
        "# Trading-R1 label distribution (Algorithm 1) on the offline sample\n\n"
        "Thresholds fitted per ticker on the train split, applied unchanged to val/test. Windows:\n"
        "`sample_label_windows()` (embargo = the 15-day label look-ahead).\n\n" + table
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
