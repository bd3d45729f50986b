"""yfinance context providers (real use; tests inject a fake ``ticker_factory`` built from fixtures).

- profiles: ``Ticker.info`` is *today's* snapshot, not a point-in-time record. We keep only undated
  descriptive text (name, sector, business summary) and drop every number in it (market cap, PE,
  targets, ...), which would leak the future into past decision days.
- fundamentals: ``quarterly_income_stmt`` / ``quarterly_balance_sheet`` / ``quarterly_cashflow``.
  Yahoo gives period ends but no filing dates, so PointInTimeStore stamps each statement at
  period end + ``filing_lag_days`` (45: the SEC 10-Q deadline is 40-45 days after quarter end).
- news: ``Ticker.news`` (recent items only; Yahoo keeps no archive). Times are converted to
  America/New_York and made tz-naive, the store's exchange-local convention.
- Treasury yields ^IRX (13-week bill), ^FVX (5Y), ^TNX (10Y), ^TYX (30Y): daily closes in percent,
  with a unit check (see ``check_yield_units``).
Every remote read (``info``, each statement, ``news``, each yield history) goes through one
``stockr1.data.throttle.Requests``: throttled and retried like the OHLCV downloads, so a transient
429 neither kills a long build nor silently empties a ticker's context; a call that still fails
raises DataFetchError naming the ticker and the attribute.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pandas as pd

from stockr1.data.providers.base import NEWS_COLUMNS, MacroSeries, Profile, empty_news
from stockr1.data.throttle import Requests

TREASURY = {"^IRX": ("us3m", "US 3M Treasury yield"), "^FVX": ("us5y", "US 5Y Treasury yield"),
            "^TNX": ("us10y", "US 10Y Treasury yield"), "^TYX": ("us30y", "US 30Y Treasury yield")}
YAHOO_ROWS = {
    "revenue": ("Total Revenue", "Operating Revenue"), "gross_profit": ("Gross Profit",),
    "operating_income": ("Operating Income",), "net_income": ("Net Income", "Net Income Common Stockholders"),
    "pretax_income": ("Pretax Income",), "tax_provision": ("Tax Provision",), "total_assets": ("Total Assets",),
    "total_liabilities": ("Total Liabilities Net Minority Interest", "Total Liabilities"),
    "equity": ("Stockholders Equity", "Common Stock Equity"), "current_assets": ("Current Assets",),
    "current_liabilities": ("Current Liabilities",), "inventory": ("Inventory",),
    "operating_cash_flow": ("Operating Cash Flow",), "investing_cash_flow": ("Investing Cash Flow",),
    "financing_cash_flow": ("Financing Cash Flow",),
}  # fmt: skip
TickerFactory = Callable[[str], object]


def _yf_ticker(symbol: str):
    import yfinance as yf

    return yf.Ticker(symbol)


def _read(t: object, attr: str, tk: str, requests: Requests | None):
    """``t.<attr>`` (a network call on a real yfinance.Ticker), throttled and retried."""
    return (requests or Requests()).call(lambda: getattr(t, attr, None), f"{tk} {attr}")


def yf_profiles(tickers: list[str], ticker_factory: TickerFactory = _yf_ticker,
                requests: Requests | None = None) -> dict[str, Profile]:
    out = {}
    for tk in tickers:
        info = _read(ticker_factory(tk), "info", tk, requests) or {}
        out[tk] = Profile(str(info.get("longName") or info.get("shortName") or tk),
                          str(info.get("longBusinessSummary") or ""), str(info.get("sector") or ""))
    return out


def yf_fundamentals(tickers: list[str], ticker_factory: TickerFactory = _yf_ticker,
                    requests: Requests | None = None) -> pd.DataFrame:
    """One row per (ticker, period end); ``filed`` is NaT (Yahoo has no filing dates)."""
    rows = []
    for tk in tickers:
        t = ticker_factory(tk)
        stmts = [_read(t, a, tk, requests) for a in ("quarterly_income_stmt", "quarterly_balance_sheet", "quarterly_cashflow")]
        stmts = [s for s in stmts if s is not None and len(s)]
        if not stmts:
            continue
        periods = sorted({pd.Timestamp(c) for s in stmts for c in s.columns})
        for p in periods:
            row = {"ticker": tk, "period_end": p, "filed": pd.NaT}
            for item, names in YAHOO_ROWS.items():
                for s in stmts:
                    hit = next((n for n in names if n in s.index), None)
                    if hit is not None and p in {pd.Timestamp(c) for c in s.columns}:
                        v = s.loc[hit, [c for c in s.columns if pd.Timestamp(c) == p][0]]
                        if pd.notna(v):
                            row[item] = float(v)
                            break
            rows.append(row)
    return pd.DataFrame(rows)


def _news_time(item: dict) -> pd.Timestamp | None:
    c = item.get("content") or item
    if "providerPublishTime" in c:
        ts = pd.Timestamp(int(c["providerPublishTime"]), unit="s", tz="UTC")
    elif c.get("pubDate"):
        ts = pd.Timestamp(c["pubDate"])
        ts = ts.tz_localize("UTC") if ts.tz is None else ts
    else:
        return None
    return ts.tz_convert("America/New_York").tz_localize(None)


def yf_news(tickers: list[str], ticker_factory: TickerFactory = _yf_ticker,
            requests: Requests | None = None) -> pd.DataFrame:
    """Both Yahoo news layouts (flat ``title``/``providerPublishTime`` and nested ``content``)."""
    rows = []
    for tk in tickers:
        for item in _read(ticker_factory(tk), "news", tk, requests) or []:
            c = item.get("content") or item
            when = _news_time(item)
            if when is None or not c.get("title"):
                continue  # undated items cannot be placed in time: skip, never guess
            rows.append((tk, when, str(c["title"]), str(c.get("summary") or c.get("description") or ""), ""))
    return pd.DataFrame(rows, columns=list(NEWS_COLUMNS)) if rows else empty_news()


def check_yield_units(values: pd.Series, symbol: str) -> pd.Series:
    """Yields must be percent (-1..25). A series that is exactly 10x too large (old ^TNX-style
    quotes) is rescaled with a warning; anything else implausible is an error naming the symbol."""
    v = values.dropna()
    if len(v) and v.between(-1, 25).all():
        return v
    if len(v) and (v / 10).between(-1, 25).all() and v.median() > 25:
        warnings.warn(f"{symbol}: yields look 10x scaled (median {v.median():.1f}); divided by 10", stacklevel=2)
        return v / 10
    bad = v[~v.between(-1, 25)]
    raise ValueError(f"{symbol}: {len(bad)} values outside the plausible yield range -1..25%, e.g. "
                     f"{bad.index[0].date()}={bad.iloc[0]:.3f}" if len(bad) else f"{symbol}: no values")


def yf_treasury(start: str, end: str, downloader: Callable[[str, str, str], pd.DataFrame] | None = None,
                requests: Requests | None = None) -> dict[str, MacroSeries]:
    """Daily Treasury yields from Yahoo index quotes (close, percent), known at each day's close."""
    from stockr1.data.sources.frames import normalize_frame
    from stockr1.data.sources.yfinance import yf_download

    download = downloader or yf_download
    req = requests or Requests()
    out = {}
    for sym, (name, label) in TREASURY.items():
        raw = req.call(lambda sym=sym: download(sym, start, end), f"{sym} history")
        frame = normalize_frame(raw, f"yfinance:{sym}")
        close = check_yield_units(frame["close"], sym)
        out[name] = MacroSeries(name, label, close[~close.index.duplicated()].astype(float), "%")
    return out


def yf_context(tickers: list[str], start: str, end: str, ticker_factory: TickerFactory = _yf_ticker,
               downloader=None, requests: Requests | None = None) -> dict:
    """Keyword arguments for PointInTimeStore: macro, fundamentals, news, profiles."""
    return {"macro": yf_treasury(start, end, downloader, requests),
            "fundamentals": yf_fundamentals(tickers, ticker_factory, requests),
            "news": yf_news(tickers, ticker_factory, requests), "profiles": yf_profiles(tickers, ticker_factory, requests)}


__all__ = ["TREASURY", "check_yield_units", "yf_context", "yf_fundamentals", "yf_news", "yf_profiles", "yf_treasury"]
