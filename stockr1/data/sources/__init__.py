"""Market data sources behind one interface: ``load_source(name, **kw) -> {ticker: frame}``.

Frames: lower-case columns open, high, low, close, volume (+ dividends, splits for yfinance),
a sorted DatetimeIndex named "date", as-traded prices (except ``stocks``: back-adjusted closes, with
open/high/low/volume absent, i.e. NaN). Sources are imported lazily.
"""

from __future__ import annotations

import importlib

import pandas as pd

SOURCES = {
    "sample": "stockr1.data.sources.sample:load_sample",
    "csv": "stockr1.data.sources.csv:load_csv",
    "synthetic": "stockr1.data.sources.synthetic:load_synthetic",
    "yfinance": "stockr1.data.sources.yfinance:load_yfinance",
    "stocks": "stockr1.data.sources.stocks:load_stocks",
    "universe": "stockr1.data.sources.stocks:load_universe",
}


def load_source(name: str, **kw) -> dict[str, pd.DataFrame]:
    """Daily OHLCV per ticker from source ``name`` (sample | csv | synthetic | yfinance | stocks | universe)."""
    if name not in SOURCES:
        raise ValueError(f"unknown data source {name!r}; expected one of {sorted(SOURCES)}")
    module, func = SOURCES[name].split(":")
    return getattr(importlib.import_module(module), func)(**kw)
