"""Point-in-time store of the text/tabular context T_t (Stock-R1 §3.1, App. A.1/A.4).

Cut-offs for a decision day t (the close of t is the decision time):
- OHLCV: rows dated <= t, adjusted with corporate actions up to t only, in the ticker's price frame
  (rebased to 100 = the close of t for a back-adjusted source; ``stockr1.data.price_frame``).
- macro: the latest *release* strictly before t (release rules in providers/base.py).
- fundamentals: the latest statement *published* strictly before t (filing date, else period end +
  ``filing_lag_days``).
- news: items stamped strictly before the close (16:00 exchange time) of t-1, the previous trading
  day of the ticker; keyword-matched to the ticker symbol, company name and profile keywords.
``leak_days`` is a debug hook that must stay 0: it moves every cut-off that many trading days later
so tests can show that the invariance check catches a look-ahead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stockr1.data.adjust import action_log_factors, window_prices
from stockr1.data.price_frame import frame_kind, price_lines, rebase
from stockr1.data.providers.base import (
    MacroObs,
    MacroSeries,
    Profile,
    Statement,
    empty_news,
    publication_dates,
)
from stockr1.data.render import render
from stockr1.types import CHANNELS, REBASED

MARKET_CLOSE = pd.Timedelta(hours=16)
_SUFFIX = re.compile(r"[,.]?\s+(inc|incorporated|corp|corporation|co|company|ltd|plc|holdings|group|sa|nv|ag)\.?$", re.I)


def name_keywords(name: str) -> list[str]:
    """The official name and its form without legal suffixes ("Apple Inc." -> ["Apple Inc.", "Apple"])."""
    out, cur = [name.strip()], name.strip()
    while (short := _SUFFIX.sub("", cur).strip()) != cur and short:
        cur = short
        out.append(cur)
    return [n for n in out if n]


@dataclass
class PointInTimeStore:
    frames: dict[str, pd.DataFrame]
    macro: dict[str, MacroSeries] = field(default_factory=dict)
    fundamentals: pd.DataFrame | None = None
    news: pd.DataFrame | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    filing_lag_days: int = 45
    n_news: int = 10
    leak_days: int = 0

    def __post_init__(self) -> None:
        self._macro = {}
        for name, s in self.macro.items():
            rel = s.release_dates()
            order = np.argsort(rel.values, kind="stable")
            periods = pd.DatetimeIndex(s.values.index[order])
            if (np.diff(periods.asi8) < 0).any():
                raise ValueError(f"macro series {name}: releases out of period order; keep one release per period")
            vals = s.values.to_numpy(dtype=float)[order]
            if s.yoy:  # YoY of a level vs the same period a year earlier (released long before)
                prev = pd.Series(vals, index=periods).reindex(periods - pd.DateOffset(years=1)).to_numpy()
                vals = 100.0 * (vals / prev - 1.0)
            ok = np.isfinite(vals)
            self._macro[name] = (rel.values[order][ok], vals[ok], periods[ok])
        self._fund: dict[str, pd.DataFrame] = {}
        if self.fundamentals is not None and len(self.fundamentals):
            f = self.fundamentals.assign(published=publication_dates(self.fundamentals, self.filing_lag_days))
            for tk, g in f.groupby("ticker"):
                self._fund[str(tk)] = g.sort_values(["published", "period_end"], kind="stable").reset_index(drop=True)
        news = empty_news() if self.news is None else self.news
        self._news = news.sort_values("time", kind="stable").reset_index(drop=True)
        self._news_times = pd.DatetimeIndex(self._news["time"]).values
        self._news_cols = {c: self._news[c].to_numpy() for c in self._news.columns}
        self._news_idx: dict[str, np.ndarray] = {}
        self._cal = {tk: pd.DatetimeIndex(f.index) for tk, f in self.frames.items()}

    # ---- cut-offs -------------------------------------------------------------------------------
    def _shift(self, ticker: str | None, t: pd.Timestamp) -> pd.Timestamp:
        if not self.leak_days:
            return t
        cal = self._cal[ticker] if ticker in self._cal else next(iter(self._cal.values()))
        pos = min(int(cal.searchsorted(t)) + self.leak_days, len(cal) - 1)
        return cal[pos]

    def news_cutoff(self, ticker: str, t: pd.Timestamp) -> pd.Timestamp:
        """The close of the ticker's previous trading day before t."""
        t = self._shift(ticker, pd.Timestamp(t))
        cal = self._cal[ticker]
        pos = int(cal.searchsorted(t))  # first row >= t
        prev = cal[pos - 1] if pos > 0 else t - pd.offsets.BDay(1)
        return prev.normalize() + MARKET_CLOSE

    # ---- queries --------------------------------------------------------------------------------
    def ohlcv_until(self, ticker: str, t, last: int | None = None) -> pd.DataFrame:
        """Rows dated <= t (the ``last`` rows only, if given) in the ticker's price frame at t
        (``stockr1.data.price_frame``): adjusted for the splits/dividends up to t only, and rebased to
        100 = the close of t where the source is back-adjusted. Only rows inside the slice are read, so
        ``last`` gives the same values as the tail of the full history."""
        f = self.frames[ticker].loc[: self._shift(ticker, pd.Timestamp(t))]
        if last is not None and len(f) > last:
            f = f.iloc[-last:]
            if "dividends" in f and f["dividends"].iloc[0] > 0:
                # a dividend adjusts only the closes before its ex-day, none of which is in the slice
                f = f.copy()
                f.iloc[0, f.columns.get_loc("dividends")] = 0.0
        if not len(f):
            return f
        raw = f[list(CHANNELS)].to_numpy(dtype=np.float64)
        log_f, log_fv = action_log_factors(f)
        out = f.copy()
        prices = window_prices(raw, log_f, log_fv, np.arange(len(f))[None], len(f) - 1)[0]
        out[list(CHANNELS)] = rebase(prices) if frame_kind(f) == REBASED else prices
        return out

    def price_frame(self, ticker: str) -> str:
        """The ticker's price frame: ``as_of_t`` or ``rebased`` (``stockr1.data.price_frame``)."""
        return frame_kind(self.frames[ticker])

    def price_block(self, ticker: str, t) -> list[str]:
        """The context's price lines at t (``price_frame.price_lines``): the frame, the last close and
        its recent changes, from the last 21 closes up to t in that frame. Empty when no row <= t."""
        f = self.ohlcv_until(ticker, t, last=21)
        if not len(f):
            return []
        return price_lines(f["close"].to_numpy(dtype=np.float64), self.price_frame(ticker), str(f.index[-1].date()))

    def macro_asof(self, t) -> dict[str, MacroObs]:
        """Latest release of each series strictly before t (series with no release yet are absent)."""
        t = self._shift(None, pd.Timestamp(t))
        out = {}
        for name, (rel, vals, periods) in self._macro.items():
            k = int(np.searchsorted(rel, t.to_datetime64(), side="left")) - 1
            if k >= 0:
                s = self.macro[name]
                out[name] = MacroObs(name, s.label, float(vals[k]), "%" if s.yoy else s.unit, periods[k], pd.Timestamp(rel[k]))
        return out

    def fundamentals_asof(self, ticker: str, t) -> Statement | None:
        g = self._fund.get(ticker)
        if g is None:
            return None
        t = self._shift(ticker, pd.Timestamp(t))
        k = int(g["published"].searchsorted(t, side="left")) - 1
        if k < 0:
            return None
        row = g.iloc[k]
        items = {c: float(row[c]) for c in g.columns if c not in ("ticker", "period_end", "filed", "published") and pd.notna(row[c])}
        return Statement(ticker, pd.Timestamp(row["period_end"]), pd.Timestamp(row["published"]), items)

    def _matching(self, ticker: str) -> np.ndarray:
        """Rows whose title/summary names the ticker (case-sensitive word) or the company (any case)."""
        if ticker not in self._news_idx:
            prof = self.profiles.get(ticker)
            names = name_keywords(prof.name) + list(prof.keywords) if prof else []
            text = (self._news["title"].fillna("") + " " + self._news["summary"].fillna("")).astype(str)
            hit = text.str.contains(rf"(?<![\w$]){re.escape(ticker)}(?!\w)", regex=True)
            if names:
                pat = "|".join(rf"(?<!\w){re.escape(n)}(?!\w)" for n in names)
                hit |= text.str.contains(pat, case=False, regex=True)
            self._news_idx[ticker] = np.flatnonzero(hit.to_numpy(dtype=bool))
        return self._news_idx[ticker]

    def news_before(self, ticker: str, t, n: int = 10) -> list[dict]:
        """The ``n`` most recent matching items stamped before the close of t-1, newest first."""
        idx = self._matching(ticker)
        cutoff = self.news_cutoff(ticker, pd.Timestamp(t)).to_datetime64()
        k = int(np.searchsorted(self._news_times[idx], cutoff, side="left"))
        sel = idx[max(0, k - n) : k][::-1]
        return [{c: self._news_cols[c][j] for c in self._news_cols} for j in sel]

    # ---- rendering ------------------------------------------------------------------------------
    def render_context(self, ticker: str, t) -> str:
        """The structured prompt block of App. A.4 (ticker, date, company, summary, macro, fundamentals, news)."""
        return render(self, ticker, pd.Timestamp(t))


def sample_store(frames: dict[str, pd.DataFrame] | None = None, leak_days: int = 0, fred=None) -> PointInTimeStore:
    """Context for the offline sample: arch macro series + price-derived market-wrap headlines
    (generated, not real news; see providers/market_wrap.py). No fundamentals exist for indices.
    The monthly macro series are ALFRED first releases when a FRED client is given or FRED_API_KEY
    is set (``fred_client()``), else arch's values with a conservative lag (providers/arch_macro.py)."""
    from stockr1.data.providers.arch_macro import arch_macro
    from stockr1.data.providers.fred import fred_client
    from stockr1.data.providers.market_wrap import SAMPLE_PROFILES, market_wrap_news
    from stockr1.data.sources import load_source

    frames = load_source("sample") if frames is None else frames
    macro = arch_macro(fred if fred is not None else fred_client())
    return PointInTimeStore(frames, macro=macro, news=market_wrap_news(frames, SAMPLE_PROFILES),
                            profiles=SAMPLE_PROFILES, leak_days=leak_days)


def stocks_store(frames: dict[str, pd.DataFrame], leak_days: int = 0, fred=None) -> PointInTimeStore:
    """Context for the ``stocks`` and ``universe`` sources: the sample's macro series (market-wide, the
    same release rules; arch's series end in 2018-2019, so later windows show the last value with its
    "as of" date), each stock's name and sector (undated), and price-derived market wraps (generated
    from each series' own closes up to their day, as for the sample; NOT real news, and without levels
    for the back-adjusted stocks, ``market_wrap.wrap_frame``). skfolio ships no statements and no news."""
    from stockr1.data.providers.arch_macro import arch_macro
    from stockr1.data.providers.fred import fred_client
    from stockr1.data.providers.market_wrap import SAMPLE_PROFILES, market_wrap_news
    from stockr1.data.sources.stocks import STOCK_PROFILES

    profiles = {t: p for t, p in {**STOCK_PROFILES, **SAMPLE_PROFILES}.items() if t in frames}
    macro = arch_macro(fred if fred is not None else fred_client())
    return PointInTimeStore(frames, macro=macro, news=market_wrap_news(frames, profiles), profiles=profiles,
                            leak_days=leak_days)


def synthetic_store(frames: dict[str, pd.DataFrame], seed: int = 0, leak_days: int = 0) -> PointInTimeStore:
    """Synthetic macro, fundamentals and news aligned with synthetic frames (all from data up to t)."""
    from stockr1.data.providers.synthetic import synthetic_context

    macro, fundamentals, news, profiles = synthetic_context(frames, seed)
    return PointInTimeStore(frames, macro=macro, fundamentals=fundamentals, news=news, profiles=profiles,
                            leak_days=leak_days)


def yfinance_store(frames: dict[str, pd.DataFrame], downloader=None, ticker_factory=None,
                   requests=None) -> PointInTimeStore:
    """Context for yfinance frames: Yahoo Treasury yields (+ FRED when FRED_API_KEY is set),
    quarterly statements, news and undated profile text; ``requests`` (stockr1.data.throttle.Requests)
    throttles and retries every Yahoo call."""
    from stockr1.data.providers.fred import fred_macro
    from stockr1.data.providers.yfinance import _yf_ticker, yf_context

    cal = pd.DatetimeIndex(sorted({d for f in frames.values() for d in f.index}))
    start, end = str((cal[0] - pd.Timedelta(days=7)).date()), str((cal[-1] + pd.Timedelta(days=1)).date())
    kw = yf_context(sorted(frames), start, end, ticker_factory or _yf_ticker, downloader, requests)
    kw["macro"] = {**kw["macro"], **fred_macro(start=start, end=end)}
    return PointInTimeStore(frames, **kw)
