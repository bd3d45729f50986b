"""Market data sources behind one interface: ``load_source(name, **kw) -> {ticker: frame}``.

Frames: lower-case columns open, high, low, close, volume (+ dividends, splits for yfinance),
a sorted DatetimeIndex named "date", as-traded prices (except ``stocks``: back-adjusted closes, with
open/high/low/volume absent, i.e. NaN). Sources are imported lazily.

Exchanges: a source module declares where its tickers trade (ISO MIC, ``stockr1.data.calendar``) with a
module-level ``EXCHANGES = {ticker: MIC}`` (a fixed universe) or a function ``exchanges(tickers, **kw)
-> {ticker: MIC or None}`` (one that learns it while fetching); ``source_exchanges`` reads either.
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


def source_exchanges(name: str, tickers: list[str], **kw) -> dict[str, str | None]:
    """{ticker: the ISO MIC source ``name`` declares, or None where it does not say} (``kw``: the
    source's own arguments, e.g. yfinance's ``cache_dir``)."""
    if name not in SOURCES:
        raise ValueError(f"unknown data source {name!r}; expected one of {sorted(SOURCES)}")
    module = importlib.import_module(SOURCES[name].split(":")[0])
    if callable(getattr(module, "exchanges", None)):
        return module.exchanges(list(tickers), **kw)
    declared = getattr(module, "EXCHANGES", {})
    return {t: declared.get(t) for t in tickers}
