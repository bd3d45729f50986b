"""Twenty S&P 500 stocks, offline: the daily closes that ship inside the ``skfolio`` wheel (BSD-3).

``skfolio/datasets/data/sp500_dataset.csv.gz``: AAPL, AMD, BAC, BBY, CVX, GE, HD, JNJ, JPM, KO, LLY,
MRK, MSFT, PEP, PFE, PG, RRC, UNH, WMT, XOM, 1990-01-02 -> 2022-12-28 (8,313 rows), and
``sp500_index.csv.gz``: the S&P 500 index close on the same days (ticker ``SPX`` here; not in the
default universe, since the ``sample`` source already has the S&P 500 with its full OHLCV).

The files are read directly (located with ``importlib.util.find_spec``, so none of skfolio's
scikit-learn stack is imported) and checked against the sha256 pinned below: a missing package or
file, or one that changed (a skfolio release that re-exported the data), is a ``StockSourceError``
naming it, never different numbers under the same name.

Limits of the data, and what this source does about each (docs/data.md, "The stock source"):

* **Close only.** Open, high, low and volume are absent: the frames carry them as NaN columns,
  ``Windows.channels`` marks them unobserved, and every model, loss and metric masks them.
* **Back-adjusted.** Prices are adjusted for the splits and dividends that came *later* (a 1990 AAPL
  close of 0.264): returns are right (total-return), levels are not what traded, and no split shows as
  a jump. (The one close move beyond the quality check's x1.8, AAPL's real -52% day of 2000-09-29,
  falls before AAPL's first usable day.) The stock frames are declared back-adjusted
  (``stockr1.data.price_frame.mark_back_adjusted``), so every window, prompt and action shows them
  rebased: 100 = the close of the decision day, a frame no later action can reach. The index (``SPX``)
  is never adjusted: as traded.
* **Quantised.** Values have three decimals, so an early back-adjusted price of 0.1 moves in ticks of
  1%. A ticker's usable history starts on ``first_usable_day``: after the last close below
  ``MIN_PRICE`` (1.00, a tick of at most 0.1% of the price) and after the last run of more than
  ``MAX_UNCHANGED`` identical closes in a row (stale, back-filled prices: RRC's first 68 days of 1990
  are one value). Earlier rows are dropped here; ``usable_starts`` reports what each ticker loses.
* **Survivorship.** The 20 names are companies still listed in 2022, picked after the fact; see docs/data.md.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

from stockr1.data.price_frame import mark_back_adjusted
from stockr1.data.providers.base import Profile
from stockr1.data.sources.frames import normalize_frame

SKFOLIO_DATA = ("datasets", "data")
STOCKS_FILE, INDEX_FILE = "sp500_dataset.csv.gz", "sp500_index.csv.gz"
# sha256 of the files in skfolio 1.12.2 (the data has been unchanged since skfolio 0.1)
SHA256 = {
    STOCKS_FILE: "ee21cac28befb1d0a739a9ceb22184f995394726aa0cfde9a21941d1ac04ac0d",
    INDEX_FILE: "894c34431c284f86aa64a467e176e2a3c9b697c857eb9ab35006c2dd55d3fdf2",
}
INDEX_TICKER = "SPX"  # the index file's one column ("SP500"), renamed so it never collides with the sample's
# where each trades (stockr1.data.calendar; XNAS and XNYS share one holiday schedule)
EXCHANGES = {**{t: "XNYS" for t in ("BAC", "BBY", "CVX", "GE", "HD", "JNJ", "JPM", "KO", "LLY", "MRK", "PEP", "PFE",
                                    "PG", "RRC", "UNH", "WMT", "XOM", "SPX", "SP500")},
             **{t: "XNAS" for t in ("AAPL", "AMD", "MSFT", "NASDAQ")}}  # SP500, NASDAQ: the universe's indices
MIN_PRICE = 1.00  # 3-decimal data: a tick of 0.001 is then at most 0.1% of the price
MAX_UNCHANGED = 4  # more identical closes in a row than this = a stale (back-filled) stretch

# Undated descriptive text (as the yfinance source keeps of ``info``): name and today's GICS sector.
STOCK_PROFILES: dict[str, Profile] = {t: Profile(name, sector=sector) for t, (name, sector) in {
    "AAPL": ("Apple Inc.", "Information Technology"),
    "AMD": ("Advanced Micro Devices, Inc.", "Information Technology"),
    "BAC": ("Bank of America Corporation", "Financials"),
    "BBY": ("Best Buy Co., Inc.", "Consumer Discretionary"),
    "CVX": ("Chevron Corporation", "Energy"),
    "GE": ("General Electric Company", "Industrials"),
    "HD": ("The Home Depot, Inc.", "Consumer Discretionary"),
    "JNJ": ("Johnson & Johnson", "Health Care"),
    "JPM": ("JPMorgan Chase & Co.", "Financials"),
    "KO": ("The Coca-Cola Company", "Consumer Staples"),
    "LLY": ("Eli Lilly and Company", "Health Care"),
    "MRK": ("Merck & Co., Inc.", "Health Care"),
    "MSFT": ("Microsoft Corporation", "Information Technology"),
    "PEP": ("PepsiCo, Inc.", "Consumer Staples"),
    "PFE": ("Pfizer Inc.", "Health Care"),
    "PG": ("The Procter & Gamble Company", "Consumer Staples"),
    "RRC": ("Range Resources Corporation", "Energy"),
    "UNH": ("UnitedHealth Group Incorporated", "Health Care"),
    "WMT": ("Walmart Inc.", "Consumer Staples"),
    "XOM": ("Exxon Mobil Corporation", "Energy"),
}.items()}
STOCK_TICKERS: tuple[str, ...] = tuple(STOCK_PROFILES)


class StockSourceError(ValueError):
    """skfolio or one of its data files is missing, or a file is not the one pinned here."""


def skfolio_data_dir(package: str = "skfolio") -> Path:
    """skfolio's data directory, found without importing skfolio (StockSourceError if it is not installed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StockSourceError(f"the stocks source needs the {package} package (`pip install skfolio`), which ships "
                               f"its data files ({STOCKS_FILE}, {INDEX_FILE})")
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*SKFOLIO_DATA)


def skfolio_file(name: str, directory: Path | None = None) -> Path:
    """The path of data file ``name`` (in ``directory``, default skfolio's) after its sha256 is checked
    against the pinned one (StockSourceError naming the file otherwise)."""
    path = (skfolio_data_dir() if directory is None else Path(directory)) / name
    if not path.is_file():
        raise StockSourceError(f"skfolio has no {path} (a skfolio without its datasets?)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256[name]:
        raise StockSourceError(f"{path} has sha256 {digest[:16]}..., not the pinned {SHA256[name][:16]}...: "
                               "this skfolio ships other data; pin the new hash only after checking it")
    return path


def read_closes(name: str = STOCKS_FILE) -> pd.DataFrame:
    """The file's closes as shipped: [days, tickers] float64, a DatetimeIndex named "date"."""
    df = pd.read_csv(skfolio_file(name), index_col="Date", parse_dates=["Date"])
    df.index.name = "date"
    return df.astype("float64").rename(columns={"SP500": INDEX_TICKER})


def first_usable_day(close: pd.Series) -> tuple[pd.Timestamp, str]:
    """The first day after the last close below MIN_PRICE and after the last run of more than
    MAX_UNCHANGED identical closes, and which rule set it ("" when the series is usable from day 1).
    Only the series' own days are read; the data is fixed (sha256), so the cut is too."""
    c = close.dropna()
    cut, why = 0, ""
    low = np.flatnonzero(c.to_numpy() < MIN_PRICE)
    if len(low):
        cut, why = int(low[-1]) + 1, f"close < {MIN_PRICE:.2f} until {c.index[low[-1]].date()}"
    same = np.r_[False, np.diff(c.to_numpy()) == 0]  # day d repeats day d-1
    run = np.zeros(len(c), dtype=int)
    for d in np.flatnonzero(same):
        run[d] = run[d - 1] + 1
    stale = np.flatnonzero(run > MAX_UNCHANGED)
    if len(stale) and int(stale[-1]) + 1 > cut:
        end = int(stale[-1])
        cut, why = end + 1, f"{run[end] + 1} identical closes ending {c.index[end].date()}"
    if cut >= len(c):
        raise StockSourceError(f"{close.name}: no usable day (every close is below {MIN_PRICE} or stale)")
    return pd.Timestamp(c.index[cut]), why


def usable_starts(closes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per ticker: first day in the file, first usable day, rows dropped and the reason (what
    ``load_stocks`` cuts; printed in ``stockr1 data build --source stocks``'s summary)."""
    closes = read_closes() if closes is None else closes
    rows = []
    for t in closes.columns:
        c = closes[t].dropna()
        start, why = first_usable_day(c)
        rows.append({"ticker": t, "first_day": str(c.index[0].date()), "first_usable": str(start.date()),
                     "rows_dropped": int((c.index < start).sum()), "reason": why})
    return pd.DataFrame(rows).set_index("ticker")


def _frame(close: pd.Series, name: str, back_adjusted: bool = True) -> pd.DataFrame:
    start, _ = first_usable_day(close)
    frame = normalize_frame(pd.DataFrame({"close": close[close.index >= start]}), name)  # O/H/L/V absent (NaN)
    return mark_back_adjusted(frame) if back_adjusted else frame


def load_stocks(tickers: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """Close-only frames (open/high/low/volume NaN) from each ticker's first usable day; ``tickers``
    may name the 20 stocks and ``SPX`` (the index file), default the 20 stocks."""
    names = list(STOCK_TICKERS) if not tickers else list(tickers)
    unknown = sorted(set(names) - set(STOCK_TICKERS) - {INDEX_TICKER})
    if unknown:
        raise ValueError(f"stocks source has {list(STOCK_TICKERS)} and {INDEX_TICKER}, not {unknown}")
    out = {}
    if any(t != INDEX_TICKER for t in names):
        closes = read_closes(STOCKS_FILE)
        out |= {t: _frame(closes[t], f"stocks:{t}") for t in names if t != INDEX_TICKER}
    if INDEX_TICKER in names:
        out[INDEX_TICKER] = _frame(read_closes(INDEX_FILE)[INDEX_TICKER], f"stocks:{INDEX_TICKER}", back_adjusted=False)
    return {t: out[t] for t in names}


def load_universe(tickers: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """The 20 close-only stocks beside the sample's two OHLCV indices (SP500, NASDAQ, 1999-2018): what
    the encoder trains on "the stocks plus the indices". ``tickers`` picks from both."""
    from stockr1.data.sources.sample import SAMPLE_TICKERS, load_sample

    names = [*STOCK_TICKERS, *SAMPLE_TICKERS] if not tickers else list(tickers)
    unknown = sorted(set(names) - set(STOCK_TICKERS) - set(SAMPLE_TICKERS))
    if unknown:
        raise ValueError(f"universe source has {list(STOCK_TICKERS)} and {list(SAMPLE_TICKERS)}, not {unknown}")
    stocks = [t for t in names if t in STOCK_TICKERS]
    indices = [t for t in names if t in SAMPLE_TICKERS]
    out = (load_stocks(stocks) if stocks else {}) | (load_sample(indices) if indices else {})
    return {t: out[t] for t in names}
