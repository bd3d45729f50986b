"""The ``data:`` section of every run config: which source and the window shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stockr1.config import config_from_dict

SOURCES = ("sample", "synthetic", "stocks", "universe", "dataset")


@dataclass(frozen=True)
class DataConfig:
    """source:   "sample" (the embedded S&P 500 + NASDAQ OHLCV, 1999-2018), "synthetic", "stocks" (20
              S&P 500 stocks, close only, 1990-2022, from skfolio), "universe" (stocks + sample), or "dataset"
              (a directory written by ``stockr1 data build``: yfinance, csv, ...; manifest checked)
    path:     the dataset directory (source: dataset only)
    lookback: days of history per window (L); horizon: future days per window (S), at most L; for a
              dataset both must equal the shapes it was built with
    n_tickers, n_days, seed: the synthetic source's size and seed (None = its defaults)"""

    source: str = "sample"
    path: str | None = None
    lookback: int = 90
    horizon: int = 10
    n_tickers: int | None = None
    n_days: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"data.source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "dataset" and not self.path:
            raise ValueError("data.source: dataset needs data.path, the directory `stockr1 data build --out DIR` wrote")
        if self.path is not None and self.source != "dataset":
            raise ValueError(f"data.path only applies to source: dataset (got source: {self.source}); "
                             "set source: dataset to read a built dataset")
        if self.lookback < 1 or self.horizon < 1:
            raise ValueError(f"data.lookback and data.horizon must be >= 1, got {self.lookback}, {self.horizon}")
        if self.horizon > self.lookback:
            raise ValueError(f"data.horizon ({self.horizon}) is longer than the window (data.lookback = {self.lookback})")
        if self.source != "synthetic" and any(v is not None for v in (self.n_tickers, self.n_days, self.seed)):
            raise ValueError("data.n_tickers / n_days / seed only apply to source: synthetic")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | DataConfig | None, where: str = "data") -> DataConfig:
        return d if isinstance(d, DataConfig) else config_from_dict(cls, d, where)

    def synthetic_kwargs(self) -> dict[str, int]:
        return {k: v for k in ("n_tickers", "n_days", "seed") if (v := getattr(self, k)) is not None}

    def describe(self) -> str:
        """One phrase for printed lines: ``sample`` or ``dataset data/sp500``."""
        return f"dataset {self.path}" if self.source == "dataset" else self.source
