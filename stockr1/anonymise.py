"""The memorisation probe's transformation: the same episodes with nothing a model could look up.

A pretrained LLM may know what a named stock did on a named date. ``Anonymiser`` rewrites an episode so
that it names neither, while every answer, label and reward stays the same by construction:

- tickers -> neutral ids (``TKR01``, ...), company names and their keywords -> ``Company TKR01`` (any
  case; a ticker of fewer than 4 letters only as written, as "ON" or "A" are also words);
- every date -> the date ``weeks`` weeks later (a whole number of weeks keeps weekdays and business-day
  calendars, so holding periods and trading-day counts do not move); ``YYYY-MM-DD`` strings and
  ``YYYYQn`` quarter labels in text follow;
- prices (open, high, low, close and everything derived from them: moving averages, support /
  resistance, levels written in text) -> times ``scale``. Returns, percentages, log returns and
  ratios are unchanged; volume is kept. Not in the rebased price frame (``stockr1.types.REBASED``, docs/data.md:
  every window's close of t is 100): there a level names nothing, and scaling it would move the frame's 100
  to ``scale`` x 100, a level the policy never saw, so the probe would measure a distribution shift rather than
  memorisation. Windows in that frame, and the text of ``rebased`` tickers, keep their levels.

One ``Anonymiser`` serves a whole run, so the mapping is consistent within (and across) episodes.
Numbers in text are rescaled when they look like a price level of the text's ticker: written with
two decimals (``1,234.56``), not a percentage / pp / multiple / dollar amount (macro series are written
``$33.29``), and within a factor 2 of the ticker's observed price range. Anything else (yields,
ratios, counts) is left alone. The transformation is applied to what a prompt is built from
(``Windows`` with their rendered context, daily frames, question text), once, below every method.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from stockr1.data.lazy_context import LazyContext
from stockr1.data.render import render
from stockr1.types import CLOSE, HIGH, LOW, OPEN, REBASED, Windows

_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_QUARTER = re.compile(r"\b(\d{4})Q([1-4])\b|\bQ([1-4]) (\d{4})\b")
_NUMBER = re.compile(r"(?<![\w.$])(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})(?![\d%A-Za-z]|\s*(?:pp|x)\b)")
PRICE_COLUMNS = ("open", "high", "low", "close")


@dataclass(frozen=True)
class Anonymiser:
    """ids: ticker -> neutral id; names: ticker -> company names / keywords to hide; ranges: ticker ->
    (lowest, highest) observed price, which tells a price level in text from other numbers; rebased: tickers
    whose windows are in the rebased frame (their text's levels are kept)."""

    ids: Mapping[str, str]
    names: Mapping[str, Sequence[str]] = field(default_factory=dict)
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    weeks: int = 2609  # ~50 years ahead: no real price history to remember
    scale: float = 0.37
    rebased: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.scale > 0 or self.weeks == 0:
            raise ValueError(f"Anonymiser: scale must be > 0 and weeks != 0, got {self.scale}, {self.weeks}")

    @classmethod
    def for_frames(cls, frames: Mapping[str, pd.DataFrame], names: Mapping[str, Sequence[str]] | None = None,
                   windows: Windows | None = None, **kw) -> Anonymiser:
        """Ids in sorted ticker order and price ranges from each ticker's daily OHLC frame; the tickers
        ``windows`` (the prompts' source) quote in the rebased frame keep their levels in text."""
        ranges = {tk: (float(f[list(PRICE_COLUMNS)].min().min()), float(f[list(PRICE_COLUMNS)].max().max()))
                  for tk, f in frames.items()}
        return cls(_ids(ranges), dict(names or {}), ranges, rebased=_rebased(windows), **kw)

    @classmethod
    def for_windows(cls, w: Windows, names: Mapping[str, Sequence[str]] | None = None, **kw) -> Anonymiser:
        """As ``for_frames``, the price ranges from the windows' OHLC histories."""
        ohlc = w.hist[..., [OPEN, HIGH, LOW, CLOSE]]
        ranges = {tk: (float(ohlc[w.ticker == tk].min()), float(ohlc[w.ticker == tk].max()))
                  for tk in set(w.ticker.tolist())}
        return cls(_ids(ranges), dict(names or {}), ranges, rebased=_rebased(w), **kw)

    # ---------------------------------------------------------------- values
    def ticker(self, tk: str) -> str:
        if tk not in self.ids:
            raise KeyError(f"Anonymiser: no neutral id for ticker {tk!r} (known: {sorted(self.ids)})")
        return self.ids[tk]

    def date(self, t):
        """A date (numpy, pandas or datetime array / index) shifted by ``weeks`` weeks, same type."""
        return t + np.timedelta64(7 * self.weeks, "D") if isinstance(t, np.ndarray | np.datetime64) \
            else t + pd.Timedelta(weeks=self.weeks)

    # ---------------------------------------------------------------- text
    def text(self, s: str, ticker: str | None = None) -> str:
        """``s`` with names replaced, dates shifted and ``ticker``'s price levels rescaled (module docstring)."""
        if ticker is not None and ticker not in self.rebased:
            lo, hi = self.ranges.get(ticker, (np.inf, -np.inf))
            s = _NUMBER.sub(lambda m: self._price(m, lo, hi), s)
        s = _DATE.sub(lambda m: str(self.date(pd.Timestamp(m.group(0))).date()), s)
        s = _QUARTER.sub(self._quarter, s)
        # names in any case, tickers too from 4 letters on ("Nasdaq"); shorter ones as written ("ON", "A"
        # are also English words)
        pairs = [(n, f"Company {self.ids[tk]}", re.IGNORECASE) for tk, ns in self.names.items() for n in ns if n]
        pairs += [(tk, i, re.IGNORECASE if len(tk) >= 4 else 0) for tk, i in self.ids.items()]
        for old, new, flags in sorted(pairs, key=lambda p: -len(p[0])):  # "S&P 500 Index" before "S&P 500"
            s = re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", new, s, flags=flags)
        return s

    def _price(self, m: re.Match, lo: float, hi: float) -> str:
        x = float(m.group(0).replace(",", ""))
        if not lo / 2 <= x <= 2 * hi:
            return m.group(0)
        return f"{x * self.scale:,.2f}" if "," in m.group(0) else f"{x * self.scale:.2f}"

    def _quarter(self, m: re.Match) -> str:
        year, q = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        t = self.date(pd.Timestamp(int(year), 3 * int(q) - 1, 15))  # the quarter's middle, shifted
        qt = (t.month - 1) // 3 + 1
        return f"{t.year}Q{qt}" if m.group(1) else f"Q{qt} {t.year}"

    def undate(self, t) -> pd.Timestamp:
        return pd.Timestamp(t) - pd.Timedelta(weeks=self.weeks)

    # ---------------------------------------------------------------- data
    def frames(self, frames: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
        """Daily OHLCV frames: keyed by neutral id, dates shifted, OHLC rescaled, volume kept."""
        out = {}
        for tk, f in frames.items():
            g = f.copy()
            g.index = self.date(pd.DatetimeIndex(g.index)).rename(f.index.name)
            cols = [c for c in PRICE_COLUMNS if c in g.columns]
            g[cols] = g[cols] * self.scale
            out[self.ticker(tk)] = g
        return out

    def windows(self, w: Windows) -> Windows:
        """Windows with neutral tickers, shifted dates, OHLC rescaled where the window is not in the rebased
        frame (log-return channels x, y unchanged) and their rendered context rewritten by ``text``."""
        missing = sorted(set(w.ticker[w.frame == REBASED].tolist()) - set(self.rebased))
        if missing:  # their text would be rescaled while their arrays are not
            raise ValueError(f"Anonymiser: windows of {missing} are in the rebased frame, but the anonymiser was "
                             "built without them in `rebased` (build it with for_windows, or for_frames(windows=))")
        ohlc = [OPEN, HIGH, LOW, CLOSE]
        hist, future = w.hist.copy(), w.future.copy()
        factor = np.where(w.frame == REBASED, 1.0, self.scale)[:, None, None]  # [N, 1, 1]
        hist[..., ohlc] *= factor
        future[..., ohlc] *= factor
        ctx = w.context
        if isinstance(ctx, LazyContext):  # rewrite each row when it is read: a universe has ~164k of them
            ctx = ctx.mapped(self.text)
        elif len(ctx) == len(w):
            ctx = np.array([self.text(str(c), str(tk)) for c, tk in zip(ctx, w.ticker, strict=True)], dtype=object)
        return replace(w, ticker=np.array([self.ticker(str(t)) for t in w.ticker]), date=self.date(w.date),
                       hist=hist, future=future, context=ctx)

    def item(self, it):
        """A QA item (a dataclass with ``question``, ``ticker``, ``date`` YYYY-MM-DD) as asked of the
        anonymised windows; its answer, window row and split are the item's own."""
        return replace(it, question=self.text(it.question, it.ticker), ticker=self.ticker(it.ticker),
                       date=str(self.date(pd.Timestamp(it.date)).date()))

    def prices(self, p: pd.Series) -> pd.Series:
        """One ticker's price series as the simulator reads it."""
        return pd.Series(p.to_numpy() * self.scale, self.date(pd.DatetimeIndex(p.index)), name=self.ids.get(p.name))


def _rebased(w: Windows | None) -> frozenset[str]:
    """The tickers with a window in the rebased frame."""
    return frozenset() if w is None else frozenset(w.ticker[w.frame == REBASED].tolist())


def _ids(tickers) -> dict[str, str]:
    return {tk: f"TKR{k + 1:02d}" for k, tk in enumerate(sorted(tickers))}


def profile_names(profiles: Mapping[str, object]) -> dict[str, list[str]]:
    """ticker -> the names a store's profiles give it (official name and keywords)."""
    return {tk: [str(getattr(p, "name", "") or ""), *getattr(p, "keywords", ())] for tk, p in profiles.items()}


@dataclass
class AnonymisedStore:
    """A point-in-time store (``stockr1.data.context.PointInTimeStore``) seen through an ``Anonymiser``:
    queried by neutral id and shifted date, it asks the real store with the real ones and rewrites what
    comes back (prices, dates, names, text), so every prompt built from it (rendered context,
    Trading-R1's snapshot, AlphaQuanter's data tools) is anonymised the same way."""

    store: object
    an: Anonymiser

    def __post_init__(self) -> None:
        self.back = {v: k for k, v in self.an.ids.items()}
        self.n_news = self.store.n_news
        self.profiles = {self.an.ticker(tk): replace(p, name=f"Company {self.an.ticker(tk)}", keywords=(),
                                                     summary=self.an.text(p.summary, tk))
                         for tk, p in getattr(self.store, "profiles", {}).items() if tk in self.an.ids}
        self.frames = self.an.frames({tk: f for tk, f in self.store.frames.items() if tk in self.an.ids})

    def _tk(self, tid: str) -> str:
        if tid not in self.back:
            raise KeyError(f"AnonymisedStore: unknown id {tid!r} (known: {sorted(self.back)})")
        return self.back[tid]

    def ohlcv_until(self, tid: str, t) -> pd.DataFrame:
        return self.an.frames({self._tk(tid): self.store.ohlcv_until(self._tk(tid), self.an.undate(t))})[tid]

    def macro_asof(self, t) -> dict:
        return {k: replace(m, period=self.an.date(m.period), released=self.an.date(m.released))
                for k, m in self.store.macro_asof(self.an.undate(t)).items()}

    def fundamentals_asof(self, tid: str, t):
        st = self.store.fundamentals_asof(self._tk(tid), self.an.undate(t))
        return None if st is None else replace(st, ticker=tid, period_end=self.an.date(st.period_end),
                                               published=self.an.date(st.published))

    def news_before(self, tid: str, t, n: int = 10) -> list[dict]:
        tk = self._tk(tid)
        out = []
        for item in self.store.news_before(tk, self.an.undate(t), n):
            d = {k: self.an.text(v, tk) if isinstance(v, str) else v for k, v in item.items()}
            d["time"] = self.an.date(pd.Timestamp(item["time"]))
            out.append(d)
        return out

    def render_context(self, tid: str, t) -> str:
        return render(self, tid, pd.Timestamp(t))
