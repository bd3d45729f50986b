"""A price CSV the project never saw (seeded random walks) and the dataset `stockr1 data build` makes of it.
Shared by the data-layer tests and the end-to-end stage tests on ``data: {source: dataset}``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stockr1.data.cli import main as data_main

TICKERS = ("ACME", "ZETA")
START, N_DAYS = "2011-03-01", 600


def write_random_walk_csv(path: Path, seed: int = 7) -> pd.DataFrame:
    """One CSV with a ``Ticker`` column: 2 tickers x 600 business days of a geometric random walk."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range(START, periods=N_DAYS)
    rows = []
    for k, tk in enumerate(TICKERS):
        close = (40.0 + 30 * k) * np.exp(np.cumsum(rng.normal(0.0003, 0.015, N_DAYS)))
        open_ = close * np.exp(rng.normal(0, 0.004, N_DAYS))
        high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.006, N_DAYS)))
        low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.006, N_DAYS)))
        vol = np.round(np.exp(rng.normal(13 + k, 0.3, N_DAYS)))
        rows.append(pd.DataFrame({"Date": dates.strftime("%Y-%m-%d"), "Ticker": tk, "Open": open_, "High": high,
                                  "Low": low, "Close": close, "Volume": vol}))
    df = pd.concat(rows, ignore_index=True)
    df.to_csv(path, index=False)
    return df


def build_csv_dataset(root: Path, *extra: str) -> tuple[Path, pd.DataFrame]:
    """``stockr1 data build --source csv`` over the random-walk CSV; returns (dataset dir, the CSV)."""
    root.mkdir(parents=True, exist_ok=True)
    df = write_random_walk_csv(root / "prices.csv")
    out = root / "ds"
    assert data_main(["build", "--source", "csv", "--path", str(root / "prices.csv"), "--out", str(out), *extra]) == 0
    return out, df
