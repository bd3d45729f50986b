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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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


def labels_for_windows(windows, frames: dict[str, pd.DataFrame], cfg: LabelConfig = LabelConfig()) -> np.ndarray:
    """[N] class index per window (-1 = undefined), thresholds per ticker from its train windows.

    ``frames`` are the daily OHLCV frames the windows were built from (the 15-day horizon reaches
    past the windows' S-day future, so labels come from the full series).
    """
    out = np.full(len(windows), -1, dtype=int)
    for t in sorted(set(windows.ticker.tolist())):
        if t not in frames:
            raise KeyError(f"no price frame for ticker {t!r}")
        idx = np.flatnonzero(windows.ticker == t)
        train_dates = windows.date[idx][windows.split[idx] == "train"]
        if len(train_dates) == 0:
            raise ValueError(f"ticker {t!r} has no train windows to fit label thresholds on")
        classes, _ = label_series(frames[t]["close"], pd.Timestamp(train_dates.max()), cfg)
        out[idx] = classes.reindex(pd.DatetimeIndex(windows.date[idx])).fillna(-1).to_numpy(dtype=int)
    return out


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
    from stockr1.data import load_source, sample_windows

    table = distribution_table(sample_windows(), load_source("sample"))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "label_distribution.md").write_text(
        "# Trading-R1 label distribution (Algorithm 1) on the offline sample\n\n"
        "Thresholds fitted per ticker on the train split, applied unchanged to val/test.\n\n" + table
    )
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
