"""Synthetic OHLCV windows with a known data-generating process, to check baselines are calibrated.

A geometric random walk (optionally GARCH(1,1) volatility) gives a known answer: the 90% interval
of a correct forecaster covers 90% of outcomes and the zero-return forecast is optimal.
"""

from __future__ import annotations

import numpy as np

from stockr1.types import CLOSE, Windows


def random_walk_windows(
    n_tickers: int = 2,
    n_days: int = 700,
    lookback: int = 90,
    horizon: int = 10,
    sigma: float = 0.01,
    garch: tuple[float, float, float] | None = None,
    seed: int = 0,
) -> Windows:
    """Stride-1 windows over ``n_tickers`` simulated series, chronological 60/20/20 split with an
    embargo of ``horizon`` days between splits (so no label of one split is an input of the next).

    garch: (omega, alpha, beta) of daily log-return variance; None = constant ``sigma``.
    """
    rng = np.random.default_rng(seed)
    names = ("ticker", "date", "x", "y", "hist", "future", "split")
    parts: dict[str, list] = {k: [] for k in names}
    dates = np.datetime64("2001-01-01") + np.arange(n_days + 1).astype("timedelta64[D]")
    for k in range(n_tickers):
        z = rng.standard_normal(n_days + 1)
        if garch is None:
            vol = np.full(n_days + 1, sigma)
        else:
            om, al, be = garch
            var = np.empty(n_days + 1)
            var[0] = om / (1 - al - be)
            for t in range(1, n_days + 1):
                var[t] = om + al * var[t - 1] * z[t - 1] ** 2 + be * var[t - 1]
            vol = np.sqrt(var)
        r = vol * z - 0.5 * vol**2
        close = 100.0 * np.exp(np.cumsum(r))
        prev = np.concatenate([[100.0], close[:-1]])
        open_ = prev * np.exp(0.1 * vol * rng.standard_normal(n_days + 1))
        high = np.maximum(open_, close) * np.exp(np.abs(0.5 * vol * rng.standard_normal(n_days + 1)))
        low = np.minimum(open_, close) * np.exp(-np.abs(0.5 * vol * rng.standard_normal(n_days + 1)))
        logv = np.empty(n_days + 1)
        logv[0] = 15.0
        for t in range(1, n_days + 1):
            logv[t] = 15.0 + 0.7 * (logv[t - 1] - 15.0) + 0.2 * rng.standard_normal()
        ohlcv = np.stack([open_, high, low, close, np.exp(logv)], 1)  # [D+1, 5]
        prev_c = ohlcv[:-1, CLOSE]
        rets = np.concatenate(
            [np.log(ohlcv[1:, :4] / prev_c[:, None]), np.log((ohlcv[1:, 4:] + 1) / (ohlcv[:-1, 4:] + 1))], 1
        )  # [D, 5], day d+1 vs d
        raw = ohlcv[1:]
        n_win = n_days - lookback - horizon + 1
        t_idx = np.arange(lookback - 1, lookback - 1 + n_win)  # decision days
        n_tr, n_va = int(0.6 * n_win), int(0.2 * n_win)
        split = np.full(n_win, "test", dtype=object)
        split[:n_tr] = "train"
        split[n_tr : n_tr + n_va] = "val"
        keep = np.ones(n_win, bool)
        keep[n_tr : n_tr + horizon] = False  # embargo
        keep[n_tr + n_va : n_tr + n_va + horizon] = False
        for t, sp in zip(t_idx[keep], split[keep], strict=True):
            parts["ticker"].append(f"SYN{k}")
            parts["date"].append(dates[t + 1])
            parts["x"].append(rets[t - lookback + 1 : t + 1].T)
            parts["y"].append(rets[t + 1 : t + 1 + horizon].T)
            parts["hist"].append(raw[t - lookback + 1 : t + 1])
            parts["future"].append(raw[t + 1 : t + 1 + horizon])
            parts["split"].append(sp)
    return Windows(
        ticker=np.array(parts["ticker"], dtype=object),
        date=np.array(parts["date"], dtype="datetime64[ns]"),
        x=np.array(parts["x"], dtype=np.float32),
        y=np.array(parts["y"], dtype=np.float32),
        hist=np.array(parts["hist"], dtype=np.float64),
        future=np.array(parts["future"], dtype=np.float64),
        split=np.array(parts["split"], dtype=object),
    )
