"""The embedded offline default: real daily OHLCV of the S&P 500 and NASDAQ Composite indices,
1999-01-04 -> 2018-12-31, as shipped by the ``arch`` package (``arch.data.sp500`` / ``nasdaq``).

Indices have no splits or dividends, and ``Adj Close`` equals ``Close`` in these files, so the
frames carry no action columns.
"""

from __future__ import annotations

import importlib

import pandas as pd

from stockr1.data.sources.frames import normalize_frame

SAMPLE_TICKERS = {"SP500": "arch.data.sp500", "NASDAQ": "arch.data.nasdaq"}
EXCHANGES = {"SP500": "XNYS", "NASDAQ": "XNAS"}  # the calendars the two indices are computed on


def load_sample(tickers: list[str] | None = None) -> dict[str, pd.DataFrame]:
    names = list(SAMPLE_TICKERS) if not tickers else list(tickers)
    unknown = [t for t in names if t not in SAMPLE_TICKERS]
    if unknown:
        raise ValueError(f"sample source has tickers {list(SAMPLE_TICKERS)}, not {unknown}")
    return {t: normalize_frame(importlib.import_module(SAMPLE_TICKERS[t]).load(), f"sample:{t}") for t in names}
