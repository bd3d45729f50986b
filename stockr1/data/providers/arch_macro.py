"""Offline macro series shipped with ``arch`` (all observation-dated, FRED-style):

| name    | arch file  | frequency                     | release rule                    |
|---------|------------|-------------------------------|---------------------------------|
| core_cpi| core_cpi   | monthly level (month start)   | cpi: 15th of the next month; YoY |
| wti     | wti        | daily spot (DCOILWTICO)       | same_day                        |
| vix     | vix        | daily close, 2014 onwards     | same_day                        |
| aaa,baa | default    | monthly average (month start) | month_end                       |
| brent   | crude      | monthly average (mid-month)   | month_end                       |
"""

from __future__ import annotations

import pandas as pd

from stockr1.data.providers.base import MacroSeries


def _load(mod: str) -> pd.DataFrame:
    import importlib

    df = importlib.import_module(f"arch.data.{mod}").load()
    df.index = pd.DatetimeIndex(df.index)
    return df.sort_index()


def arch_macro() -> dict[str, MacroSeries]:
    cpi, wti, vix = _load("core_cpi")["CPILFESL"], _load("wti")["DCOILWTICO"], _load("vix")["vix"]
    default, crude = _load("default"), _load("crude")
    spread = default["BAA"] - default["AAA"]
    return {
        "core_cpi": MacroSeries("core_cpi", "US core CPI inflation (YoY)", cpi.dropna(), release="cpi", yoy=True),
        "wti": MacroSeries("wti", "WTI crude oil spot", wti.dropna(), unit="$"),
        "vix": MacroSeries("vix", "CBOE VIX", vix.dropna()),
        "aaa": MacroSeries("aaa", "Moody's Aaa corporate bond yield", default["AAA"].dropna(), "%", "month_end"),
        "baa": MacroSeries("baa", "Moody's Baa corporate bond yield", default["BAA"].dropna(), "%", "month_end"),
        "default_spread": MacroSeries("default_spread", "Baa-Aaa default spread", spread.dropna(), "%", "month_end"),
        "brent": MacroSeries("brent", "Brent crude (monthly average)", crude["Brent"].dropna(), "$", "month_end"),
    }
