"""Seeded multi-asset OHLCV generator for tests: a two-state market regime (Markov switching between
calm and stressed drift/volatility), per-ticker beta and idiosyncratic noise, Poisson jumps, and
volume that rises with the size of the day's move. Generated day by day, so day d depends only on
the seed and days <= d (prefix-stable: a longer run has the same first days).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stockr1.types import CHANNELS


@dataclass(frozen=True)
class SyntheticConfig:
    n_tickers: int = 4
    n_days: int = 600
    seed: int = 0
    start: str = "2015-01-02"
    calm: tuple[float, float] = (0.0005, 0.008)  # (daily drift, vol) of the market factor
    stress: tuple[float, float] = (-0.0010, 0.022)
    p_stay: tuple[float, float] = (0.985, 0.95)  # P(stay calm), P(stay stressed)
    jump_rate: float = 0.01  # expected jumps per ticker-day
    jump_scale: float = 0.05  # |jump| stays well below split size (quality.py flags > ln 1.8)


def synthetic_tickers(n: int) -> list[str]:
    return [f"SYN{i:02d}" for i in range(n)]


def load_synthetic(n_tickers: int = 4, n_days: int = 600, seed: int = 0, start: str = "2015-01-02",
                   tickers: list[str] | None = None) -> dict[str, pd.DataFrame]:
    cfg = SyntheticConfig(n_tickers=n_tickers, n_days=n_days, seed=seed, start=start)
    frames = generate(cfg)
    return {t: frames[t] for t in tickers} if tickers else frames


def market_regimes(cfg: SyntheticConfig) -> np.ndarray:
    """[n_days] int regime path (0 calm, 1 stressed), drawn from its own seeded stream."""
    rng = np.random.default_rng([cfg.seed, 0])
    u = rng.random(cfg.n_days)
    reg = np.zeros(cfg.n_days, dtype=int)
    for d in range(1, cfg.n_days):
        stay = cfg.p_stay[reg[d - 1]]
        reg[d] = reg[d - 1] if u[d] < stay else 1 - reg[d - 1]
    return reg


def generate(cfg: SyntheticConfig) -> dict[str, pd.DataFrame]:
    dates = pd.bdate_range(cfg.start, periods=cfg.n_days, name="date")
    reg = market_regimes(cfg)
    mrng = np.random.default_rng([cfg.seed, 1])
    drift = np.where(reg == 1, cfg.stress[0], cfg.calm[0])
    vol = np.where(reg == 1, cfg.stress[1], cfg.calm[1])
    market = drift + vol * mrng.standard_normal(cfg.n_days)
    out: dict[str, pd.DataFrame] = {}
    for k, ticker in enumerate(synthetic_tickers(cfg.n_tickers)):
        rng = np.random.default_rng([cfg.seed, 2, k])
        beta, idio, price0 = rng.uniform(0.6, 1.4), rng.uniform(0.006, 0.018), rng.uniform(20, 200)
        eps = rng.standard_normal((cfg.n_days, 5))
        jumps = (rng.random(cfg.n_days) < cfg.jump_rate) * rng.normal(-0.01, cfg.jump_scale, cfg.n_days)
        r = beta * market + idio * eps[:, 0] + np.clip(jumps, -0.25, 0.25)
        r[0] = 0.0
        close = price0 * np.exp(np.cumsum(r))
        prev = np.concatenate([[price0], close[:-1]])
        sig = vol * beta + idio
        open_ = prev * np.exp(0.3 * r + 0.2 * sig * eps[:, 1])
        high = np.maximum(open_, close) * np.exp(np.abs(0.5 * sig * eps[:, 2]))
        low = np.minimum(open_, close) * np.exp(-np.abs(0.5 * sig * eps[:, 3]))
        log_v = np.empty(cfg.n_days)
        dev = 0.0
        for d in range(cfg.n_days):  # AR(1) log volume, excited by the size of the move
            dev = 0.8 * dev + 0.25 * eps[d, 4] + 8.0 * abs(r[d])
            log_v[d] = 13.0 + 0.3 * k + dev
        volume = np.round(np.exp(log_v))
        out[ticker] = pd.DataFrame(dict(zip(CHANNELS, (open_, high, low, close, volume), strict=True)), index=dates)
    return out
