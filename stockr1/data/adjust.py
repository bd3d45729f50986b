"""As-of-t corporate-action adjustment: no future split or dividend leaks into the past.

Frames hold *as-traded* prices plus optional ``splits`` (ratio, e.g. 2.0 for 2-for-1; 0 or 1 = none)
and ``dividends`` (cash per share on the ex-date) columns. Each action on day e has a price factor

    f_e = (1 / split_e) * (1 - div_e / (C_{e-1} / split_e))

(the usual back-adjustment: the prior close re-expressed per post-split share). With
``logG_d = sum_{e > d} ln f_e``, the prices of a window whose decision day is t are

    P_d^{(t)} = P_d * exp(logG_d - logG_t) = P_d * prod_{d < e <= t} f_e

so history days d <= t use only actions on days (d, t] -- never one after t -- and the decision-day
close is the as-traded close. Label days d > t are put on the same basis (multiplied by
prod_{t < e <= d} 1/f_e), which uses future actions, but only for labels. Volume is adjusted for
splits only. Log returns are computed from these as-of-t prices, so x is consistent with hist.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.types import VOLUME


def action_log_factors(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per-day log factors (price, volume) of the corporate actions in ``frame``: [T], [T].

    Both are 0 on days without an action (and everywhere for frames without action columns)."""
    n = len(frame)
    log_f = np.zeros(n)
    log_fv = np.zeros(n)
    if "splits" in frame:
        s = frame["splits"].fillna(0.0).to_numpy(dtype=np.float64)
        s = np.where(s > 0, s, 1.0)
        log_f -= np.log(s)
        log_fv += np.log(s)
    else:
        s = np.ones(n)
    if "dividends" in frame:
        div = frame["dividends"].fillna(0.0).to_numpy(dtype=np.float64)
        prev_close = np.concatenate([[np.nan], frame["close"].to_numpy(dtype=np.float64)[:-1]]) / s
        has = div > 0
        if has[0]:
            raise ValueError(f"dividend on the first row ({frame.index[0].date()}) cannot be adjusted")
        ratio = np.ones(n)
        ratio[has] = 1.0 - div[has] / prev_close[has]
        if np.any(ratio <= 0):
            bad = frame.index[ratio <= 0][0].date()
            raise ValueError(f"dividend on {bad} is >= the previous close; corrupt action data")
        log_f += np.log(ratio)
    return log_f, log_fv


def window_prices(raw: np.ndarray, log_f: np.ndarray, log_fv: np.ndarray, rows: np.ndarray, t_pos: int) -> np.ndarray:
    """Rows ``rows`` [N, K] of ``raw`` [T, 5] on the basis of the row at column ``t_pos`` -> [N, K, 5].

    The factor of day d is exp(sum of log f over (d, t]) (or its inverse for d > t), summed forward
    *within the window*, so history values depend only on the actions inside the window up to t and
    are bit-identical whatever happens after t.
    """
    c = np.cumsum(log_f[rows], axis=1)
    cv = np.cumsum(log_fv[rows], axis=1)
    out = raw[rows].copy()
    out[..., :VOLUME] *= np.exp(c[:, t_pos : t_pos + 1] - c)[..., None]
    out[..., VOLUME] *= np.exp(cv[:, t_pos : t_pos + 1] - cv)
    return out
