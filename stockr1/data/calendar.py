"""Trading days: the one home for dating days after the data's last row on an exchange's calendar.

Forecasts (``stockr1 forecast``, ``stockr1 ask``'s trajectory) and the backtest's realised days past
the last decision day are dated here; windows, splits and the QA generator's "next x trading days"
count the data's own rows and never need a calendar.

Package: ``exchange_calendars`` (Apache-2.0) rather than ``pandas_market_calendars``, which wraps it:
one dependency fewer, calendars named by ISO 10383 MIC codes (XNYS, XNAS, XLON, ...), actively
maintained, and holiday history long enough for every source here (XNYS back to 1885, so the 1990
stocks and the 1999 indices are covered). ``exchange_calendars`` treats XNAS, XASE, ARCX and BATS as
aliases of XNYS (the US equity exchanges share one holiday schedule), so they date identically.

Supported range: a calendar is built from its rules for the years a request needs. A few calendars
have a first valid date (``bound_min``, e.g. XTKS 1997-01-01); before it ``days_after`` raises, and
``calendar_for`` falls back to weekdays and says why in the label. Years past the package's release
are the regular rules projected forward (exchanges publish about three years ahead).

Which exchange (``calendar_for``): an explicit MIC wins; ``auto`` takes the MIC the source declares
(``stockr1.data.sources.source_exchanges``: the sample indices, yfinance's exchange code, a source's
``EXCHANGES`` mapping) and otherwise infers it from the series' own dates (``infer_exchange``);
``weekdays`` or an unknown exchange dates on Monday-Friday and the label says so.

Point in time: an exchange's regular holidays are published a year or more ahead, so dating days
after t with them is not look-ahead. Unscheduled closures (9/11 2001-09-11..14, Hurricane Sandy
2012-10-29/30, the state funerals of 2004-06-11, 2007-01-02, 2018-12-05 and 2025-01-09) sit in the
package's history as *ad hoc* holidays, but were announced days before or not at all. Choice:
a forecast made at t (``days_after(..., realised=False)``, the default) dates its days with the
regular schedule only, i.e. ad hoc closures after t are treated as sessions, because that is all a
forecaster at t could have known (a past-dated forecast reads exactly what a live one would have).
Realised days (``realised=True``: the backtest labelling closes that happened) use the full history,
because those days did (not) trade and no decision depends on the label. Neither choice changes a
forecast value: dates are labels of the steps 1..h, the model reads only rows <= t.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

AUTO, WEEKDAYS = "auto", "weekdays"
UNKNOWN = "exchange unknown: pass --exchange MIC"
# Yahoo Finance exchange codes (``history_metadata["exchangeName"]``) -> ISO MIC; others are unknown.
YAHOO_EXCHANGES: dict[str, str] = {
    "NMS": "XNAS", "NGM": "XNAS", "NCM": "XNAS", "NAS": "XNAS", "NYQ": "XNYS", "ASE": "XASE", "PCX": "ARCX",
    "BTS": "BATS", "TOR": "XTSE", "LSE": "XLON", "GER": "XETR", "FRA": "XFRA", "PAR": "XPAR", "JPX": "XTKS",
    "HKG": "XHKG", "ASX": "XASX", "EBS": "XSWX",
}
# One MIC per distinct holiday schedule, most common first: inference returns the first that fits.
INFER_CANDIDATES: tuple[str, ...] = ("XNYS", "XTSE", "XLON", "XETR", "XPAR", "XSWX", "XTKS", "XHKG", "XASX")
INFER_YEARS = 3  # the calendar the series trades on now: its last 3 years decide
INFER_TOLERANCE = 0.1  # mismatched weekdays allowed, as a share of the candidate's closed weekdays


@functools.lru_cache(maxsize=64)
def _exchange(mic: str, first_year: int, last_year: int):
    """The ``exchange_calendars`` calendar of ``mic`` for whole years (cached: building one costs ~0.3 s)."""
    import exchange_calendars as xc

    return xc.get_calendar(mic, start=f"{first_year}-01-01", end=f"{last_year}-12-31")


def check_mic(code: str) -> str:
    """``code`` upper-cased if ``exchange_calendars`` knows it (a MIC or its alias), else ValueError."""
    import exchange_calendars as xc

    mic = str(code).strip().upper()
    if mic not in xc.get_calendar_names():
        raise ValueError(f"unknown exchange {code!r}: expected an ISO MIC exchange_calendars knows (e.g. XNYS, "
                         f"XNAS, XLON, XTSE, XTKS), {AUTO!r} or {WEEKDAYS!r}")
    return mic


def sessions(mic: str, first: pd.Timestamp, last: pd.Timestamp, realised: bool = True) -> pd.DatetimeIndex:
    """The trading days of ``mic`` in [first, last]. ``realised=False``: the ad hoc closures in that range are
    sessions again (the regular schedule only). ValueError when the calendar cannot cover the range."""
    cal = _exchange(mic, pd.Timestamp(first).year, pd.Timestamp(last).year)
    days = cal.sessions
    if not realised:
        adhoc = pd.DatetimeIndex(cal.adhoc_holidays)
        days = days.union(adhoc[adhoc.dayofweek < 5])
    return days[(days >= first) & (days <= last)]


@dataclass(frozen=True)
class TradingCalendar:
    """An exchange's trading days (``mic``), or weekdays when ``mic`` is None (``why`` says why)."""

    mic: str | None = None
    why: str = UNKNOWN

    @property
    def label(self) -> str:
        """What the outputs print: the MIC, or ``weekdays (<why>)``."""
        return self.mic if self.mic else f"weekdays ({self.why})"

    def days_after(self, last: pd.Timestamp, n: int, realised: bool = False) -> pd.DatetimeIndex:
        """The ``n`` trading days strictly after ``last`` (a forecast's days; ``realised``: see the module)."""
        last = pd.Timestamp(last).normalize()
        if self.mic is None:
            return pd.bdate_range(last + pd.offsets.BDay(1), periods=n)
        end = last + pd.Timedelta(days=2 * n + 31)  # n sessions fit in 2n + 31 days on every exchange here
        days = sessions(self.mic, last + pd.Timedelta(days=1), end, realised)
        if len(days) < n:
            raise ValueError(f"{self.mic}: only {len(days)} trading days in {last.date()}..{end.date()}, need {n}")
        return pd.DatetimeIndex(days[:n])


def infer_exchange(dates: pd.DatetimeIndex, candidates: tuple[str, ...] = INFER_CANDIDATES) -> str | None:
    """The first candidate whose closed weekdays over the series' last ``INFER_YEARS`` years are the
    series' missing weekdays (within ``INFER_TOLERANCE``), else None.

    None also when the series has weekend rows or misses no weekday (nothing to tell a calendar by),
    e.g. a generated weekday-complete series. Reads only the dates given (all <= t)."""
    d = pd.DatetimeIndex(dates).normalize().unique().sort_values()
    if len(d) < 2:
        return None
    d = d[d > d[-1] - pd.DateOffset(years=INFER_YEARS)]
    weekdays = pd.bdate_range(d[0], d[-1])
    missing = weekdays.difference(d)
    if (d.dayofweek >= 5).any() or len(missing) == 0:
        return None
    for mic in candidates:
        try:
            closed = weekdays.difference(sessions(mic, d[0], d[-1]))
        except ValueError:  # the calendar does not cover this span (bound_min)
            continue
        if len(closed) and len(missing.symmetric_difference(closed)) <= INFER_TOLERANCE * len(closed):
            return mic
    return None


def calendar_for(dates: pd.DatetimeIndex, exchange: str | None = AUTO, declared: str | None = None) -> TradingCalendar:
    """The calendar to date the days after ``dates[-1]`` with.

    ``exchange``: a MIC, ``auto`` (``declared`` if the source declares one, else ``infer_exchange(dates)``)
    or ``weekdays`` (None: the same). A MIC whose calendar does not cover ``dates[-1]`` falls back to weekdays,
    with the reason in the label."""
    spec = WEEKDAYS if exchange is None else str(exchange)
    if spec.strip().lower() == WEEKDAYS:
        return TradingCalendar(None, "requested")
    if spec.strip().lower() == AUTO:
        mic = declared or infer_exchange(dates)
        if mic is None:
            return TradingCalendar(None, UNKNOWN)
    else:
        mic = spec
    cal = TradingCalendar(check_mic(mic))
    last = pd.DatetimeIndex(dates)[-1]
    try:
        cal.days_after(last, 1)
    except ValueError as e:  # e.g. XTKS before 1997: say so rather than date on the wrong days
        return TradingCalendar(None, f"{cal.mic} calendar does not cover {last.date()}: {' '.join(str(e).split())}")
    return cal


def calendars_for(frames: Mapping[str, pd.DataFrame], exchange: str | Mapping[str, str] | None = AUTO,
                  declared: Mapping[str, str | None] | None = None) -> dict[str, TradingCalendar]:
    """``calendar_for`` of every frame's index: ``exchange`` one spec for all or {ticker: spec} (missing
    tickers: ``auto``); ``declared`` {ticker: MIC or None} from the source."""
    declared = declared or {}
    out = {}
    for name, frame in frames.items():
        spec = exchange.get(name, AUTO) if isinstance(exchange, Mapping) else exchange
        out[name] = calendar_for(pd.DatetimeIndex(frame.index), spec, declared.get(name))
    return out
