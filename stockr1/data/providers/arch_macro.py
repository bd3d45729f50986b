"""Offline macro series shipped with ``arch`` (all observation-dated, FRED-style):

| name    | arch file  | frequency                     | release rule                          |
|---------|------------|-------------------------------|---------------------------------------|
| core_cpi| core_cpi   | monthly level (month start)   | month_after (shown from M+2's 1st); YoY |
| wti     | wti        | daily spot (DCOILWTICO)       | same_day                              |
| vix     | vix        | daily close, 2014 onwards     | same_day                              |
| aaa,baa | default    | monthly average (month start) | month_after                           |
| brent   | crude      | monthly average (mid-month)   | month_after                           |

arch's monthly files are today's vintage (revised values) without release dates, so they get the
conservative ``month_after`` lag (providers/base.py). With a FRED client (``client``, or
``fred_client()`` when FRED_API_KEY is set, via ``sample_store``) the monthly series are replaced by
ALFRED first releases on their real release dates: CPILFESL, AAA, BAA, MCOILBRENTEU; the daily
closes (WTI, VIX: not revised) stay the offline ones.
"""

from __future__ import annotations

import pandas as pd

from stockr1.data.providers.base import MacroSeries

# name -> (FRED id, label, unit, yoy)
MONTHLY = {
    "core_cpi": ("CPILFESL", "US core CPI inflation (YoY)", "", True),
    "aaa": ("AAA", "Moody's Aaa corporate bond yield", "%", False),
    "baa": ("BAA", "Moody's Baa corporate bond yield", "%", False),
    "brent": ("MCOILBRENTEU", "Brent crude (monthly average)", "$", False),
}
SPREAD_LABEL = "Baa-Aaa default spread"


def _load(mod: str) -> pd.DataFrame:
    import importlib

    df = importlib.import_module(f"arch.data.{mod}").load()
    df.index = pd.DatetimeIndex(df.index)
    return df.sort_index()


def _offline_monthly() -> dict[str, MacroSeries]:
    """arch's latest-vintage monthly values, released by the conservative ``month_after`` rule."""
    cpi, default, crude = _load("core_cpi")["CPILFESL"], _load("default"), _load("crude")
    values = {"core_cpi": cpi, "aaa": default["AAA"], "baa": default["BAA"], "brent": crude["Brent"]}
    out = {k: MacroSeries(k, label, values[k].dropna(), unit, "month_after", yoy=yoy)
           for k, (_, label, unit, yoy) in MONTHLY.items()}
    out["default_spread"] = MacroSeries("default_spread", SPREAD_LABEL, (default["BAA"] - default["AAA"]).dropna(), "%",
                                        "month_after")
    return out


def _alfred_monthly(client) -> dict[str, MacroSeries]:
    """First-release values on their ALFRED release dates; the spread is known once both are."""
    from stockr1.data.providers.fred import first_releases

    got = {k: first_releases(client, sid) for k, (sid, *_rest) in MONTHLY.items()}
    out = {k: MacroSeries(k, label, got[k][0], unit, "explicit", released=got[k][1], yoy=yoy)
           for k, (_, label, unit, yoy) in MONTHLY.items()}
    (aaa, aaa_rel), (baa, baa_rel) = got["aaa"], got["baa"]
    common = aaa.index.intersection(baa.index)
    released = pd.concat([aaa_rel.reindex(common), baa_rel.reindex(common)], axis=1).max(axis=1)
    out["default_spread"] = MacroSeries("default_spread", SPREAD_LABEL, baa[common] - aaa[common], "%", "explicit",
                                        released=released)
    return out


def arch_macro(client=None) -> dict[str, MacroSeries]:
    """The sample's macro: daily WTI and VIX closes plus the monthly series, offline (``client``
    None) or as ALFRED first releases (``client``: a ``fredapi.Fred`` or a stand-in)."""
    wti, vix = _load("wti")["DCOILWTICO"], _load("vix")["vix"]
    monthly = _offline_monthly() if client is None else _alfred_monthly(client)
    return {
        "core_cpi": monthly["core_cpi"],
        "wti": MacroSeries("wti", "WTI crude oil spot", wti.dropna(), unit="$"),
        "vix": MacroSeries("vix", "CBOE VIX", vix.dropna()),
        **{k: monthly[k] for k in ("aaa", "baa", "default_spread", "brent")},
    }
