"""Log-return channels exactly as Stock-R1 §3.1 / App. A.1.

    r_d^N = ln(N_d / C_{d-1})            for N in (open, high, low, close)
    r_d^V = ln((V_d + 1) / (V_{d-1} + 1))

Every price channel is normalised by the *previous close*, so r^H - r^L is the day's range and
r^C is the close-to-close return.
"""

from __future__ import annotations

import numpy as np

from stockr1.types import CLOSE, VOLUME


def log_returns(ohlcv: np.ndarray) -> np.ndarray:
    """Log-return channels of consecutive rows.

    ohlcv: [..., T, 5] prices/volume in CHANNELS order (T >= 2)
    returns: [..., T-1, 5] float64 returns for rows 1..T-1
    """
    a = np.asarray(ohlcv, dtype=np.float64)
    if a.shape[-1] != 5 or a.shape[-2] < 2:
        raise ValueError(f"log_returns expects [..., T>=2, 5] OHLCV, got shape {a.shape}")
    prev_close = a[..., :-1, CLOSE : CLOSE + 1]
    out = np.empty(a.shape[:-2] + (a.shape[-2] - 1, 5), dtype=np.float64)
    out[..., :4] = np.log(a[..., 1:, :4] / prev_close)
    out[..., VOLUME] = np.log((a[..., 1:, VOLUME] + 1.0) / (a[..., :-1, VOLUME] + 1.0))
    return out


def invert_close_returns(last_close: np.ndarray, r_close: np.ndarray) -> np.ndarray:
    """Close path from close log returns. last_close [N], r_close [N, S] -> [N, S]."""
    return np.asarray(last_close, dtype=np.float64)[:, None] * np.exp(np.cumsum(r_close, axis=-1))


def observed_moments(x: np.ndarray, channels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std [V] of ``x [N, V, L]`` per channel over the rows with ``channels [N, V]``
    True, so an absent channel's values (NaN) never enter. A channel no row observes gets 0 and 1, the
    identity scaling. What every input scaler fits when some windows lack a channel."""
    mean, std = np.zeros(x.shape[1]), np.ones(x.shape[1])
    for c in range(x.shape[1]):
        v = x[channels[:, c], c]
        if v.size:
            mean[c], std[c] = v.mean(), v.std()
    return mean, std
