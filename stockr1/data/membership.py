"""The universe of a build: a tickers file, and point-in-time index membership.

Why membership: the shipped 503-ticker list is today's S&P 500. Backtesting 2015-2025 on it trades
only the survivors (companies that later fell out of the index, were acquired or went bankrupt are
missing, and this year's additions are traded before they joined), which biases returns upward.
A membership file (CSV ``ticker,start,end``; ``end`` empty = still a member; several rows per
ticker for one that left and rejoined) restricts each ticker's *decision days* to its membership:
a window with decision day t exists only while start <= t < end (``end`` = the first day it was no
longer a member). Price history before ``start`` is still used as input: it was public at t.
The file is saved in the dataset (``membership.csv``) and applied again by ``load_windows``, so
every stage that reads the dataset sees the same universe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ("ticker", "start", "end")


def read_tickers_file(path: str | Path) -> tuple[str, ...]:
    """One ticker per line; ``#`` starts a comment; blank lines and repeats are dropped (order kept)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"tickers file {p} does not exist")
    out: dict[str, None] = {}
    for n, line in enumerate(p.read_text().splitlines(), 1):
        tk = line.split("#", 1)[0].strip()
        if not tk:
            continue
        if any(c.isspace() or c == "," for c in tk):
            raise ValueError(f"{p}:{n}: one ticker per line, got {line.strip()!r}")
        out[tk] = None
    if not out:
        raise ValueError(f"tickers file {p} lists no tickers")
    return tuple(out)


@dataclass(frozen=True)
class Membership:
    """Membership intervals [start, end) per ticker (end NaT = still a member)."""

    table: pd.DataFrame  # columns ticker (str), start, end (datetime64; end may be NaT)

    @classmethod
    def read(cls, path: str | Path) -> Membership:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"membership file {p} does not exist")
        try:
            raw = pd.read_csv(p, dtype=str, keep_default_na=False, comment="#")
        except Exception as e:  # noqa: BLE001 - name the file
            raise ValueError(f"cannot read membership file {p}: {e}") from e
        return cls.from_frame(raw, str(p))

    @classmethod
    def from_frame(cls, raw: pd.DataFrame, name: str = "membership") -> Membership:
        cols = [str(c).strip().lower() for c in raw.columns]
        if cols != list(COLUMNS):
            raise ValueError(f"{name}: columns must be {','.join(COLUMNS)}, got {','.join(cols)}")
        raw = raw.set_axis(list(COLUMNS), axis=1)
        tab = pd.DataFrame({"ticker": raw["ticker"].astype(str).str.strip()})
        for c in ("start", "end"):
            vals = raw[c].astype(str).str.strip().replace({"": None, "nan": None, "NaT": None})
            try:
                tab[c] = pd.to_datetime(vals)
            except (ValueError, TypeError) as e:
                raise ValueError(f"{name}: cannot parse the {c} column: {e}") from e
        bad = tab[(tab["ticker"] == "") | tab["start"].isna()]
        if len(bad):
            raise ValueError(f"{name}: row {int(bad.index[0]) + 2} needs a ticker and a start date")
        bad = tab[tab["end"].notna() & (tab["end"] <= tab["start"])]
        if len(bad):
            r = bad.iloc[0]
            raise ValueError(f"{name}: {r['ticker']} ends ({r['end'].date()}) on or before it starts ({r['start'].date()})")
        return cls(tab.sort_values(["ticker", "start"], kind="stable").reset_index(drop=True))

    @property
    def tickers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.table["ticker"]))

    def is_member(self, ticker: str, dates: pd.DatetimeIndex | np.ndarray) -> np.ndarray:
        """[N] bool: was ``ticker`` a member on each date (start <= d < end)?"""
        d = pd.DatetimeIndex(dates)
        out = np.zeros(len(d), dtype=bool)
        for _, r in self.table[self.table["ticker"] == ticker].iterrows():
            inside = d >= r["start"]
            if pd.notna(r["end"]):
                inside &= d < r["end"]
            out |= np.asarray(inside)
        return out

    def mask(self, tickers: np.ndarray, dates: np.ndarray) -> np.ndarray:
        """[N] bool over (ticker, date) pairs, e.g. a ``Windows``' ticker and date."""
        out = np.zeros(len(tickers), dtype=bool)
        tickers = np.asarray(tickers).astype(str)
        for tk in np.unique(tickers):
            rows = np.flatnonzero(tickers == tk)
            out[rows] = self.is_member(tk, np.asarray(dates)[rows])
        return out

    def write(self, path: str | Path) -> None:
        t = self.table.copy()
        for c in ("start", "end"):
            t[c] = t[c].dt.strftime("%Y-%m-%d").fillna("")
        t.to_csv(path, index=False)
