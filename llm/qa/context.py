"""Adapter from the data layer's ``PointInTimeStore`` to the generator's :class:`QAContext`.

Cut-offs are the store's (macro: latest release before t; news: stamped before the close of t-1;
fundamentals: published before t). ``macro_prev`` is the store's answer ``prev_days`` calendar days
earlier, itself point-in-time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm.qa.core import NewsItem, QAContext
from llm.qa.generator import ContextFn

# Treasury-yield series names the providers may use -> the generator's keys.
YIELD_ALIASES = {"dgs1mo": "1M", "dgs3mo": "3M", "dgs2": "2Y", "dgs10": "10Y", "dgs30": "30Y",
                 "us1m": "1M", "us3m": "3M", "us2y": "2Y", "us10y": "10Y", "us30y": "30Y"}


def _macro(store, t: pd.Timestamp) -> tuple[dict[str, float], dict[str, tuple[str, str]]]:
    obs = store.macro_asof(t)
    vals = {YIELD_ALIASES.get(k.lower(), k): float(o.value) for k, o in obs.items() if np.isfinite(o.value)}
    labels = {YIELD_ALIASES.get(k.lower(), k): (o.label, o.unit) for k, o in obs.items()}
    return vals, labels


def store_context(store, n_news: int = 10, prev_days: int = 30) -> ContextFn:
    """A ``ContextFn`` over a ``stockr1.data.context.PointInTimeStore``."""

    def fn(ticker: str, t: np.datetime64) -> QAContext:
        ts = pd.Timestamp(t)
        macro, labels = _macro(store, ts)
        prev, _ = _macro(store, ts - pd.Timedelta(days=prev_days))
        news = tuple(
            NewsItem(str(pd.Timestamp(r["time"]).date()), str(r.get("title", "")), str(r.get("sentiment") or "neutral"))
            for r in store.news_before(ticker, ts, n=n_news)
        )
        st = store.fundamentals_asof(ticker, ts)
        fund: dict[str, float] = {}
        if st is not None:
            fund = {**st.items, **{k.replace(" ", "_").replace("-", "_"): v for k, v in st.ratios().items()}}
            fund = {k: float(v) for k, v in fund.items() if np.isfinite(v)}
        return QAContext(macro=macro, macro_labels=labels, macro_prev=prev, news=news, fundamentals=fund)

    return fn
