"""Shared record types of the context providers and the release-lag rules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

# Release rules: when an observation dated ``period`` becomes known (exchange-local date). A store
# shows a value only strictly after its release day.
#   same_day:    a daily market close; known at the close of its own date.
#   month_after: a real monthly publication without release dates (the offline arch series): known
#                by the last day of the month after its period, so shown from the 1st of M+2.
#                Conservative for every month of 1999-2018: BLS CPI came out by then (latest: the
#                September 2013 CPI on 2013-10-30, after the shutdown; the 15th is not a bound),
#                and the monthly Moody's (Fed H.15) and EIA Brent averages well within that month.
#   month_end:   known on the 1st of the next month: the end of the period itself, with no
#                publication lag (synthetic data, or an average anyone can compute from daily closes).
#   cpi:         the 15th of M+1: a convention for synthetic CPI only; real BLS releases can be later.
#   explicit:    ``released`` holds the true first-release dates (FRED/ALFRED vintages).
RELEASE_RULES = ("same_day", "month_after", "month_end", "cpi", "explicit")

STATEMENT_ITEMS = (
    "revenue", "gross_profit", "operating_income", "net_income", "pretax_income", "tax_provision",
    "total_assets", "total_liabilities", "equity", "current_assets", "current_liabilities", "inventory",
    "operating_cash_flow", "investing_cash_flow", "financing_cash_flow",
)  # fmt: skip
NEWS_COLUMNS = ("ticker", "time", "title", "summary", "sentiment")


@dataclass(frozen=True)
class MacroSeries:
    """One macro indicator. values: observation-dated, sorted; unit "%" renders as a percentage.
    ``yoy`` renders the year-over-year change of a level series (CPI) instead of the level."""

    name: str
    label: str
    values: pd.Series
    unit: str = ""
    release: str = "same_day"
    released: pd.Series | None = None
    yoy: bool = False

    def release_dates(self) -> pd.DatetimeIndex:
        idx = pd.DatetimeIndex(self.values.index)
        if self.release == "same_day":
            return idx
        if self.release == "month_after":
            return idx.to_period("M").to_timestamp() + pd.offsets.MonthBegin(2) - pd.Timedelta(days=1)
        if self.release == "month_end":
            return idx + pd.offsets.MonthBegin(1)
        if self.release == "cpi":
            return idx.to_period("M").to_timestamp() + pd.offsets.MonthBegin(1) + pd.Timedelta(days=14)
        if self.release == "explicit":
            if self.released is None:
                raise ValueError(f"macro series {self.name}: release='explicit' needs released dates")
            return pd.DatetimeIndex(self.released.reindex(self.values.index))
        raise ValueError(f"macro series {self.name}: unknown release rule {self.release!r}; expected {RELEASE_RULES}")


@dataclass(frozen=True)
class MacroObs:
    name: str
    label: str
    value: float
    unit: str
    period: pd.Timestamp
    released: pd.Timestamp


@dataclass(frozen=True)
class Profile:
    """Undated descriptive text (yfinance ``info`` is today's snapshot: nothing dated is kept)."""

    name: str
    summary: str = ""
    sector: str = ""
    keywords: tuple[str, ...] = ()  # extra names for news matching


@dataclass(frozen=True)
class Statement:
    ticker: str
    period_end: pd.Timestamp
    published: pd.Timestamp
    items: dict[str, float]

    @property
    def quarter(self) -> str:
        p = self.period_end
        return f"Q{(p.month - 1) // 3 + 1} {p.year}"

    def ratios(self) -> dict[str, float]:
        """Derived ratios of the paper's example (App. A.4); NaN where an input is missing or zero."""
        g = self.items.get

        def div(a, b):
            a, b = g(a, np.nan), g(b, np.nan)
            return float(a / b) if b not in (0, 0.0) and np.isfinite(a) and np.isfinite(b) else float("nan")

        ca, cl, inv = g("current_assets", np.nan), g("current_liabilities", np.nan), g("inventory", 0.0)
        flows = [g(k, np.nan) for k in ("operating_cash_flow", "investing_cash_flow", "financing_cash_flow")]
        return {
            "gross margin": div("gross_profit", "revenue"),
            "operating margin": div("operating_income", "revenue"),
            "net margin": div("net_income", "revenue"),
            "operating cash flow margin": div("operating_cash_flow", "revenue"),
            "current ratio": div("current_assets", "current_liabilities"),
            "quick ratio": float((ca - (0.0 if np.isnan(inv) else inv)) / cl) if cl else float("nan"),
            "liabilities-to-equity": div("total_liabilities", "equity"),
            "debt-to-assets": div("total_liabilities", "total_assets"),
            "working capital": float(ca - cl),
            "asset turnover": div("revenue", "total_assets"),
            "effective tax rate": div("tax_provision", "pretax_income"),
            "net cash flow": float(sum(flows)),
        }


def publication_dates(table: pd.DataFrame, filing_lag_days: int) -> pd.Series:
    """When each statement became public: its filing date, else period end + ``filing_lag_days``."""
    lagged = pd.to_datetime(table["period_end"]) + pd.Timedelta(days=filing_lag_days)
    filed = pd.to_datetime(table["filed"]) if "filed" in table else pd.Series(pd.NaT, index=table.index)
    return filed.fillna(lagged)


def empty_news() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="datetime64[ns]" if c == "time" else object) for c in NEWS_COLUMNS})
