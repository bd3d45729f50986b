"""Synthetic context aligned with synthetic frames: macro, quarterly fundamentals, news, profiles.

Every record is generated from the seed and from prices up to its own stamp: macro paths are
cumulative sums of position-indexed draws (prefix-stable), a statement for period end P uses closes
up to P and is filed 25-50 days later, a price headline for day d uses closes up to d and is stamped
16:30 on d, and corporate-event headlines are pure seeded noise stamped 09:00 on their day.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.data.providers.base import NEWS_COLUMNS, MacroSeries, Profile
from stockr1.data.sources.frames import trading_calendar

SECTORS = ("Technology", "Health Care", "Financials", "Industrials", "Energy", "Consumer Staples")
EVENTS = (
    ("announces a share buyback programme", "positive"),
    ("beats analyst earnings expectations", "positive"),
    ("wins a multi-year supply contract", "positive"),
    ("names a new chief financial officer", "neutral"),
    ("faces a regulatory inquiry", "negative"),
    ("cuts its full-year guidance", "negative"),
)


def synthetic_macro(calendar: pd.DatetimeIndex, seed: int) -> dict[str, MacroSeries]:
    rng = np.random.default_rng([seed, 10])
    n = len(calendar)
    y10 = np.clip(2.5 + np.cumsum(0.04 * rng.standard_normal(n)), 0.1, 9.0)
    y2 = np.clip(y10 - 0.8 + np.cumsum(0.02 * rng.standard_normal(n)), 0.05, 9.0)
    months = pd.date_range(calendar[0] - pd.DateOffset(months=13), calendar[-1], freq="MS")
    cpi = 100.0 * np.exp(np.cumsum(0.002 + 0.0015 * np.random.default_rng([seed, 11]).standard_normal(len(months))))
    return {
        "us2y": MacroSeries("us2y", "US 2Y Treasury yield", pd.Series(y2, index=calendar), "%"),
        "us10y": MacroSeries("us10y", "US 10Y Treasury yield", pd.Series(y10, index=calendar), "%"),
        "cpi": MacroSeries("cpi", "US CPI inflation (YoY)", pd.Series(cpi, index=months), release="cpi", yoy=True),
    }


def synthetic_fundamentals(frames: dict[str, pd.DataFrame], seed: int) -> pd.DataFrame:
    rows = []
    for k, tk in enumerate(sorted(frames)):
        close = frames[tk]["close"]
        rng = np.random.default_rng([seed, 20, k])
        base = rng.uniform(0.5e9, 20e9)
        for q, pe in enumerate(pd.date_range(close.index[0], close.index[-1], freq="QE")):
            past = close.loc[:pe]  # information up to the period end only
            if len(past) < 2:
                continue
            growth = float(past.iloc[-1] / past.iloc[max(0, len(past) - 63)])
            e = np.random.default_rng([seed, 21, k, q]).standard_normal(8)
            rev = base * growth * (1 + 0.03 * e[0])
            gm, om = 0.4 + 0.05 * e[1], 0.12 + 0.04 * e[2] + 0.2 * (growth - 1)
            assets = rev * (6 + 0.3 * e[3])
            liab = assets * (0.55 + 0.05 * e[4])
            ca, cl = assets * 0.3, assets * 0.3 / (1.6 + 0.2 * e[5])
            pretax = rev * om * 0.95
            rows.append({
                "ticker": tk, "period_end": pe, "filed": pe + pd.Timedelta(days=int(rng.integers(25, 51))),
                "revenue": rev, "gross_profit": rev * gm, "operating_income": rev * om, "pretax_income": pretax,
                "tax_provision": pretax * 0.21, "net_income": pretax * 0.79, "total_assets": assets,
                "total_liabilities": liab, "equity": assets - liab, "current_assets": ca, "current_liabilities": cl,
                "inventory": ca * 0.2, "operating_cash_flow": rev * (om + 0.05), "investing_cash_flow": -rev * 0.08 * (1 + e[6] ** 2),
                "financing_cash_flow": rev * 0.05 * e[7],
            })  # fmt: skip
    return pd.DataFrame(rows)


def synthetic_news(frames: dict[str, pd.DataFrame], seed: int, profiles: dict[str, Profile]) -> pd.DataFrame:
    rows = []
    for k, tk in enumerate(sorted(frames)):
        f = frames[tk]
        r = f["close"].pct_change().to_numpy()
        name = profiles[tk].name
        for d, rd, c in zip(f.index[1:], r[1:], f["close"].to_numpy()[1:], strict=True):
            if abs(rd) >= 0.025:
                verb = "jump" if rd > 0 else "drop"
                rows.append((tk, d + pd.Timedelta(hours=16, minutes=30), f"{tk} shares {verb} {abs(rd) * 100:.1f}% to {c:.2f}",
                             f"Shares of {name} moved sharply in today's session.", "positive" if rd > 0 else "negative"))
        rng = np.random.default_rng([seed, 30, k])
        hit, which = rng.random(len(f)) < 0.03, rng.integers(0, len(EVENTS), len(f))
        for d, h, w in zip(f.index, hit, which, strict=True):
            if h:
                text, sent = EVENTS[w]
                rows.append((tk, d + pd.Timedelta(hours=9), f"{name} {text}", f"{tk}: {name} {text}.", sent))
    return pd.DataFrame(rows, columns=list(NEWS_COLUMNS))


def synthetic_profiles(tickers: list[str]) -> dict[str, Profile]:
    return {
        tk: Profile(f"Synthetic Co {tk[-2:]} Inc.", f"A synthetic {SECTORS[k % len(SECTORS)].lower()} company used for tests.",
                    SECTORS[k % len(SECTORS)])
        for k, tk in enumerate(sorted(tickers))
    }


def synthetic_context(frames: dict[str, pd.DataFrame], seed: int = 0):
    """(macro, fundamentals, news, profiles) for PointInTimeStore."""
    profiles = synthetic_profiles(list(frames))
    return (synthetic_macro(trading_calendar(frames), seed), synthetic_fundamentals(frames, seed),
            synthetic_news(frames, seed, profiles), profiles)
