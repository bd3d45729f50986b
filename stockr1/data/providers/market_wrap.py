"""Price-derived "market wrap" headlines for the offline sample.

THIS IS NOT REAL NEWS. The offline sample (arch S&P 500 / NASDAQ indices) ships no news, so, to
give news-type questions some text, we write one wire-style headline per index per trading day
from that index's own OHLCV up to and including that day (e.g. "S&P 500 slides 2.1% to 1,234.56;
hits 52-week low"). Each item is stamped 16:30 on its day (after the close), so under the news
rule (stamped before the close of t-1) a decision on day t sees wraps up to day t-2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stockr1.data.price_frame import AS_TRADED, price_basis
from stockr1.data.providers.base import NEWS_COLUMNS, Profile

SAMPLE_PROFILES = {
    "SP500": Profile(
        "S&P 500 Index",
        "The S&P 500 is a capitalization-weighted index of about 500 leading large-cap US companies across "
        "all sectors, widely used as the benchmark for the US equity market.",
        "US large-cap equity index",
        keywords=("S&P 500",),
    ),
    "NASDAQ": Profile(
        "NASDAQ Composite Index",
        "The NASDAQ Composite is a capitalization-weighted index of the common stocks listed on the Nasdaq "
        "exchange, heavily weighted towards technology and internet companies.",
        "US equity index (technology-heavy)",
        keywords=("Nasdaq Composite",),
    ),
}
PUBLISHED_AFTER_CLOSE = pd.Timedelta(hours=16, minutes=30)


def _title(display: str, r: float, close: float | None) -> str:
    """``close`` None: no level (a back-adjusted source's level holds later splits and dividends)."""
    to, at = ("", "") if close is None else (f" to {close:,.2f}", f" at {close:,.2f}")
    for lim, up, down in ((0.02, "surges", "slides"), (0.01, "rallies", "falls"), (0.0025, "edges up", "edges down")):
        if abs(r) >= lim:
            return f"{display} {up if r > 0 else down} {abs(r) * 100:.1f}%{to}"
    return f"{display} is little changed{at}"


def wrap_frame(display: str, frame: pd.DataFrame) -> pd.DataFrame:
    """One headline per row (from the second), each from rows up to and including its own day. Levels
    are written only for as-traded prices: a headline is stamped on its own day, so it cannot be put in
    the frame of a later decision day, and a back-adjusted level would leak the actions after it
    (``stockr1.data.price_frame``); percentages are the same in every frame."""
    levels = price_basis(frame) == AS_TRADED
    c, v = frame["close"], frame["volume"]
    cols = {
        "c": c, "r": c.pct_change(), "r5": c.pct_change(5), "r20": c.pct_change(20),
        "hi": c.rolling(252, min_periods=60).max(), "lo": c.rolling(252, min_periods=60).min(),
        "vr": v / v.rolling(20, min_periods=5).mean(), "rng": (frame["high"] - frame["low"]) / c.shift(1),
    }  # fmt: skip
    a = {k: s.to_numpy(dtype=float) for k, s in cols.items()}
    rows = []
    for k in range(1, len(frame)):
        rk, ck = a["r"][k], a["c"][k]
        title = _title(display, rk, ck if levels else None)
        if ck >= a["hi"][k]:
            title += "; hits 52-week high"
        elif ck <= a["lo"][k]:
            title += "; hits 52-week low"
        if a["vr"][k] > 1.5:
            title += f" on heavy volume ({a['vr'][k]:.1f}x 20-day average)"
        moves = [f"{rk * 100:+.2f}% on the day"]
        moves += [f"{a[key][k] * 100:+.1f}% over {n} sessions" for key, n in (("r5", 5), ("r20", 20)) if np.isfinite(a[key][k])]
        summary = (f"{display} closed at {ck:,.2f} ({', '.join(moves)})" if levels else
                   f"{display} closed {', '.join(moves)}")
        if np.isfinite(a["rng"][k]):  # a close-only series has no intraday range
            summary += f"; intraday range {a['rng'][k] * 100:.1f}% of the prior close"
        summary += ". [price-derived market wrap]"
        sentiment = "positive" if rk >= 0.005 else "negative" if rk <= -0.005 else "neutral"
        rows.append(("", frame.index[k].normalize() + PUBLISHED_AFTER_CLOSE, title, summary, sentiment))
    return pd.DataFrame(rows, columns=list(NEWS_COLUMNS))


def market_wrap_news(frames: dict[str, pd.DataFrame], profiles: dict[str, Profile]) -> pd.DataFrame:
    """Wraps for every ticker that has a profile; matched to tickers by name keywords, not tags."""
    parts = [wrap_frame((profiles[t].keywords or (profiles[t].name,))[0], frames[t]) for t in sorted(frames) if t in profiles]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(NEWS_COLUMNS))
