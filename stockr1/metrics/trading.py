"""Trading metrics (Trading-R1 App. 8.2, Stock-R1 App. C.5 Table 6): one home for every backtest.

All functions take per-period (daily) *simple* returns ``r [N]`` of a strategy and return plain
floats. Conventions (chosen where the papers leave room, and tested against empyrical-reloaded):

- Risk-free rate: 4% a year as in Trading-R1 (US10Y). The per-period rate is the geometric
  de-annualisation ``(1 + 0.04) ** (1 / 252) - 1`` so that compounding it for a year gives
  exactly 4%.
- Sharpe: ``sqrt(K) * mean(r - rf) / std(r - rf, ddof=1)`` (App. 8.2), K = 252. NaN when the
  excess returns have no spread (a strategy that never trades has a constant excess return).
- Annualised return: geometric, ``(1 + CR) ** (K / N) - 1``.
- Max drawdown: a positive fraction, ``max_t 1 - V_t / max_{u<=t} V_u`` with the starting value
  ``V_0 = 1`` included in the running peak, so a loss on the first day already counts.
- Beta: ``cov(r, b) / var(b)`` against benchmark returns ``b``.
- Win rate: share of closed trades whose net P&L (after costs) is > 0.
- Hit rate: share of directional calls whose side matches the sign of the underlying's move over
  the holding period (Trading-R1's HR; gross of costs, so a right call eaten by costs is a hit
  but not a win).
"""

from __future__ import annotations

import math

import numpy as np

PERIODS_PER_YEAR = 252
RISK_FREE_ANNUAL = 0.04

TRADING_METRICS: tuple[str, ...] = (
    "sharpe",
    "annual_return",
    "cumulative_return",
    "max_drawdown",
    "beta",
    "n_trades",
    "win_rate",
    "hit_rate",
)


def _as_1d(x: np.ndarray | list[float], name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D per-period returns, got shape {a.shape}")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN at positions {np.flatnonzero(np.isnan(a))[:5].tolist()}")
    return a


def per_period_rate(annual: float = RISK_FREE_ANNUAL, periods: int = PERIODS_PER_YEAR) -> float:
    """Geometric per-period equivalent of an annual rate."""
    return (1.0 + annual) ** (1.0 / periods) - 1.0


def equity_curve(returns: np.ndarray, start: float = 1.0) -> np.ndarray:
    """``V_t = V_0 * prod_{u<=t}(1 + r_u)``; returns [N] (V_1..V_N)."""
    return start * np.cumprod(1.0 + _as_1d(returns, "returns"))


def cumulative_return(returns: np.ndarray) -> float:
    r = _as_1d(returns, "returns")
    return float(np.prod(1.0 + r) - 1.0) if len(r) else 0.0


def annual_return(returns: np.ndarray, periods: int = PERIODS_PER_YEAR) -> float:
    r = _as_1d(returns, "returns")
    if len(r) == 0:
        return float("nan")
    growth = float(np.prod(1.0 + r))
    if growth <= 0.0:
        return -1.0
    return growth ** (periods / len(r)) - 1.0


def sharpe_ratio(
    returns: np.ndarray, risk_free_annual: float = RISK_FREE_ANNUAL, periods: int = PERIODS_PER_YEAR
) -> float:
    r = _as_1d(returns, "returns")
    if len(r) < 2:
        return float("nan")
    x = r - per_period_rate(risk_free_annual, periods)
    sd = float(np.std(x, ddof=1))
    if sd < 1e-15:
        return float("nan")
    return math.sqrt(periods) * float(np.mean(x)) / sd


def max_drawdown(returns: np.ndarray) -> float:
    r = _as_1d(returns, "returns")
    if len(r) == 0:
        return 0.0
    v = np.concatenate([[1.0], np.cumprod(1.0 + r)])
    peak = np.maximum.accumulate(v)
    return float(np.max(1.0 - v / peak))


def beta(returns: np.ndarray, benchmark: np.ndarray) -> float:
    r, b = _as_1d(returns, "returns"), _as_1d(benchmark, "benchmark")
    if r.shape != b.shape:
        raise ValueError(f"returns {r.shape} and benchmark {b.shape} must be aligned")
    if len(r) < 2:
        return float("nan")
    var = float(np.var(b))
    if var < 1e-20:
        return float("nan")
    return float(np.mean((r - r.mean()) * (b - b.mean()))) / var


def win_rate(trade_net_returns: np.ndarray) -> float:
    t = _as_1d(trade_net_returns, "trade_net_returns")
    return float(np.mean(t > 0.0)) if len(t) else float("nan")


def hit_rate(directions: np.ndarray, realized: np.ndarray) -> float:
    """Share of calls with ``sign(direction) == sign(realized)``; flat calls (0) are skipped."""
    d, m = _as_1d(directions, "directions"), _as_1d(realized, "realized")
    if d.shape != m.shape:
        raise ValueError(f"directions {d.shape} and realized {m.shape} must be aligned")
    keep = d != 0
    if not keep.any():
        return float("nan")
    return float(np.mean(np.sign(d[keep]) == np.sign(m[keep])))


def trading_metrics(
    returns: np.ndarray,
    benchmark: np.ndarray | None = None,
    trade_net_returns: np.ndarray | None = None,
    trade_directions: np.ndarray | None = None,
    trade_underlying: np.ndarray | None = None,
    risk_free_annual: float = RISK_FREE_ANNUAL,
    periods: int = PERIODS_PER_YEAR,
) -> dict[str, float]:
    """All of ``TRADING_METRICS`` for one strategy (fractions, not percent)."""
    tnr = np.zeros(0) if trade_net_returns is None else trade_net_returns
    out = {
        "sharpe": sharpe_ratio(returns, risk_free_annual, periods),
        "annual_return": annual_return(returns, periods),
        "cumulative_return": cumulative_return(returns),
        "max_drawdown": max_drawdown(returns),
        "beta": float("nan") if benchmark is None else beta(returns, benchmark),
        "n_trades": float(len(tnr)),
        "win_rate": win_rate(tnr),
        "hit_rate": float("nan"),
    }
    if trade_directions is not None and trade_underlying is not None:
        out["hit_rate"] = hit_rate(trade_directions, trade_underlying)
    return out
