"""FRED macro series via ``fredapi`` (used when FRED_API_KEY is set; tests inject a fake client).

Daily Treasury constant-maturity yields are market closes ("same_day"). Monthly releases use their
true first-release dates from ALFRED (``get_series_all_releases``: the earliest ``realtime_start``
per observation), so revisions never leak backwards.
"""

from __future__ import annotations

import os

import pandas as pd

from stockr1.data.providers.base import MacroSeries

DAILY = {"DGS1MO": "US 1M Treasury yield", "DGS3MO": "US 3M Treasury yield", "DGS2": "US 2Y Treasury yield",
         "DGS10": "US 10Y Treasury yield", "DGS30": "US 30Y Treasury yield"}
MONTHLY = {"CPILFESL": ("US core CPI inflation (YoY)", True), "UNRATE": ("US unemployment rate", False)}


def fred_client(api_key: str | None = None):
    """A ``fredapi.Fred`` for ``api_key`` or $FRED_API_KEY; None when no key is set."""
    key = api_key or os.environ.get("FRED_API_KEY")
    if not key:
        return None
    from fredapi import Fred

    return Fred(api_key=key)


def fred_macro(client=None, start: str | None = None, end: str | None = None) -> dict[str, MacroSeries]:
    client = client or fred_client()
    if client is None:
        return {}
    out = {}
    for sid, label in DAILY.items():
        s = client.get_series(sid, observation_start=start, observation_end=end).dropna().astype(float)
        s.index = pd.DatetimeIndex(s.index)
        out[sid.lower()] = MacroSeries(sid.lower(), label, s.sort_index(), "%")
    for sid, (label, yoy) in MONTHLY.items():
        values, released = first_releases(client, sid)
        out[sid.lower()] = MacroSeries(sid.lower(), label, values, "" if yoy else "%",
                                       release="explicit", released=released, yoy=yoy)
    return out


def first_releases(client, sid: str) -> tuple[pd.Series, pd.Series]:
    """(value, release date) of each observation's first ALFRED vintage, indexed by observation date.
    Later vintages are revisions, unknown at the first release. Observations older than ALFRED's
    first vintage of the series carry that vintage's date (later than their real release)."""
    rel = client.get_series_all_releases(sid)
    rel = rel.assign(date=pd.to_datetime(rel["date"]), realtime_start=pd.to_datetime(rel["realtime_start"]),
                     value=pd.to_numeric(rel["value"], errors="coerce"))
    first = rel.sort_values("realtime_start", kind="stable").groupby("date", sort=True).first().dropna(subset=["value"])
    first.index = pd.DatetimeIndex(first.index)
    return first["value"].astype(float), first["realtime_start"]
