"""Serialise a point-in-time context into the prompt block of Stock-R1 App. A.4.

Beside the paper's blocks, the context opens with the price frame and the last close in it (two lines,
``PointInTimeStore.price_block``): the rationale a policy writes cites these numbers, and a policy
can only cite what its prompt shows in text (the encoded history is not readable as digits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import pandas as pd

from stockr1.data.providers.base import MacroObs, Profile, Statement

_MONEY_ITEMS = {"revenue", "gross_profit", "operating_income", "net_income", "total_assets", "total_liabilities",
                "equity", "operating_cash_flow", "investing_cash_flow", "financing_cash_flow"}
_SHOWN_ITEMS = ("revenue", "gross_profit", "operating_income", "net_income", "total_assets", "total_liabilities",
                "equity", "operating_cash_flow", "investing_cash_flow", "financing_cash_flow")
_PCT_RATIOS = {"gross margin", "operating margin", "net margin", "operating cash flow margin", "effective tax rate"}


def human(x: float) -> str:
    """5.77e9 -> '5.77B', 3.293e8 -> '329.30M', -1.21e9 -> '-1.21B'."""
    if not np.isfinite(x):
        return "n/a"
    for div, suf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.2f}{suf}"
    return f"{x:.2f}"


def _macro_value(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:.2f}%"
    if unit == "$":
        return f"${value:,.2f}"
    return f"{value:,.2f}"


class ContextQueries(Protocol):
    """What ``render`` reads of a point-in-time store (``stockr1.data.context.PointInTimeStore``)."""

    profiles: Mapping[str, Profile]
    n_news: int

    def macro_asof(self, t) -> dict[str, MacroObs]: ...

    def fundamentals_asof(self, ticker: str, t) -> Statement | None: ...

    def news_before(self, ticker: str, t, n: int = 10) -> list[dict]: ...

    def price_block(self, ticker: str, t) -> list[str]: ...


def render(store: ContextQueries, ticker: str, t: pd.Timestamp) -> str:
    prof = store.profiles.get(ticker)
    lines = [f"Ticker: {ticker}", f"Date: {t.date()}", *store.price_block(ticker, t)]
    if prof is not None:
        lines.append(f"Company: {prof.name} ({ticker})")
        if prof.sector:
            lines.append(f"Sector: {prof.sector}")
        if prof.summary:
            lines.append(f"Business Summary: {prof.summary}")
    macro = store.macro_asof(t)
    if macro:
        lines.append("Macro Snapshot:")
        for m in macro.values():
            lines.append(f"• {m.label}: {_macro_value(m.value, m.unit)} (as of {m.period.date()})")
    st = store.fundamentals_asof(ticker, t)
    if st is not None:
        lines.append(f"Fundamentals ({st.quarter}, published {st.published.date()}):")
        for k in _SHOWN_ITEMS:
            if k in st.items:
                lines.append(f"• {k.replace('_', ' ')}: {human(st.items[k])}")
        for k, v in st.ratios().items():
            if np.isfinite(v):
                lines.append(f"• {k}: {v * 100:.2f}%" if k in _PCT_RATIOS else f"• {k}: {human(v) if abs(v) >= 1e3 else f'{v:.2f}'}")
    news = store.news_before(ticker, t, store.n_news)
    if news:
        lines.append("News:")
        for item in news:
            lines.append(f"• {pd.Timestamp(item['time']).date()}: {item['title']}")
            if item.get("summary"):
                lines.append(f"  {item['summary']}")
            if item.get("sentiment"):
                lines.append(f"  Sentiment: {item['sentiment']}")
    return "\n".join(lines)
