"""What a built dataset keeps beside its windows, and the manifest check every reader runs.

Why the frames and the store are saved: the LLM stages need more than rendered windows. QA questions
read the structured point-in-time context (macro values, statements, news; ``llm.qa.context``), the
comparison benchmark reads daily frames, and the forecast tool reads windows. Saving the checked
frames (``frames.parquet``) and the store's inputs (``store-*.parquet`` + ``store.json``) lets
``load_store`` rebuild the very ``PointInTimeStore`` the build rendered its context with, so the
cut-off rules (news before the close of t-1, statements after publication, macro after release)
are applied by the same code at read time, with no second download.

``read_manifest`` checks every file the manifest lists against its sha256: a missing or changed
file is a one-line ``DatasetError`` naming it, never a confusing failure three stages later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from stockr1.data.price_frame import AS_TRADED, BACK_ADJUSTED, BASIS_ATTR, mark_back_adjusted, price_basis
from stockr1.data.providers.base import MacroSeries, Profile, empty_news
from stockr1.data.sources.frames import ACTION_COLUMNS
from stockr1.types import CHANNELS

FRAMES = "frames.parquet"
STORE_META = "store.json"
STORE_TABLES = ("macro", "fundamentals", "news")


class DatasetError(ValueError):
    """A built dataset that is missing, incomplete or corrupt (the message names the file)."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(directory: str | Path, verify: bool = True) -> dict[str, Any]:
    """The dataset's manifest; with ``verify`` every listed file must exist with its sha256."""
    d = Path(directory)
    mpath = d / "manifest.json"
    if not mpath.exists():
        raise DatasetError(f"{d} is not a built dataset (no manifest.json); run `stockr1 data build --out {d}`")
    try:
        man = json.loads(mpath.read_text())
        man["shapes"]["lookback"], man["shapes"]["horizon"], man["files"].items()  # noqa: B018 - required keys
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise DatasetError(f"corrupt dataset manifest {mpath}: {type(e).__name__}: {e}") from e
    if verify:
        for name, digest in sorted(man["files"].items()):
            f = d / name
            if not f.exists():
                raise DatasetError(f"dataset file {f} is missing (listed in {mpath}); rebuild the dataset")
            if sha256(f) != digest:
                raise DatasetError(f"dataset file {f} is corrupt (sha256 differs from {mpath}); rebuild the dataset")
    return man


# ------------------------------------------------------------------------------------------ frames
def write_frames(frames: dict[str, pd.DataFrame], path: Path) -> None:
    """All tickers in one long table: ticker, date, OHLCV (+ dividends, splits where a ticker has them),
    and each ticker's price basis (``stockr1.data.price_frame``: as_traded | back_adjusted)."""
    parts = [f.reset_index().assign(ticker=tk, **{BASIS_ATTR: price_basis(f)}) for tk, f in sorted(frames.items())]
    cols = ["ticker", "date", *CHANNELS, *[c for c in ACTION_COLUMNS if any(c in p for p in parts)], BASIS_ATTR]
    pd.concat(parts, ignore_index=True).reindex(columns=cols).to_parquet(path, index=False)


def read_frames(path: Path) -> dict[str, pd.DataFrame]:
    """``write_frames`` inverted; an all-empty action column (a ticker without actions) is dropped,
    which ``stockr1.data.adjust`` treats the same as a column of zeros."""
    tab = pd.read_parquet(path)
    out = {}
    for tk, g in tab.groupby("ticker", sort=True):
        basis = str(g[BASIS_ATTR].iloc[0]) if BASIS_ATTR in g else AS_TRADED  # older datasets: as traded
        f = g.drop(columns=["ticker", BASIS_ATTR], errors="ignore").set_index("date").sort_index(kind="stable")
        f.index = pd.DatetimeIndex(f.index, name="date")
        f = f[[c for c in f.columns if c in CHANNELS or f[c].notna().any()]].astype("float64")
        out[str(tk)] = mark_back_adjusted(f) if basis == BACK_ADJUSTED else f
    return out


# ------------------------------------------------------------------------------------------ store
def write_store(store: Any, d: Path) -> list[str]:
    """The inputs of a ``PointInTimeStore`` (macro series, statements, news, profiles); returns the file names."""
    macro = [pd.DataFrame({"name": s.name, "period": pd.DatetimeIndex(s.values.index), "value": s.values.to_numpy(float),
                           "released": (pd.DatetimeIndex(s.released.reindex(s.values.index)) if s.released is not None
                                        else pd.NaT)}) for s in store.macro.values()]
    tables = {
        "macro": pd.concat(macro, ignore_index=True) if macro else pd.DataFrame(columns=["name", "period", "value", "released"]),
        "fundamentals": store.fundamentals if store.fundamentals is not None else pd.DataFrame(),
        "news": store.news if store.news is not None else empty_news(),
    }
    for name, tab in tables.items():
        tab.reset_index(drop=True).to_parquet(d / f"store-{name}.parquet", index=False)
    meta = {"macro": [{"name": k, "label": s.label, "unit": s.unit, "release": s.release, "yoy": s.yoy}
                      for k, s in store.macro.items()],  # a list: the series order is the rendered order
            "profiles": {k: asdict(p) for k, p in store.profiles.items()},
            "filing_lag_days": store.filing_lag_days, "n_news": store.n_news}
    (d / STORE_META).write_text(json.dumps(meta, indent=1, sort_keys=True))
    return [STORE_META, *(f"store-{n}.parquet" for n in STORE_TABLES)]


def read_store(d: Path, frames: dict[str, pd.DataFrame]):
    """The ``PointInTimeStore`` the build rendered its context with (``write_store`` inverted)."""
    from stockr1.data.context import PointInTimeStore

    meta = json.loads((d / STORE_META).read_text())
    mtab = pd.read_parquet(d / "store-macro.parquet")
    macro = {}
    for m in meta["macro"]:
        name = m["name"]
        g = mtab[mtab["name"] == name]
        idx = pd.DatetimeIndex(g["period"])
        released = pd.Series(pd.DatetimeIndex(g["released"]), index=idx) if m["release"] == "explicit" else None
        macro[name] = MacroSeries(name, m["label"], pd.Series(g["value"].to_numpy(float), index=idx), m["unit"],
                                  m["release"], released, bool(m["yoy"]))
    fund = pd.read_parquet(d / "store-fundamentals.parquet")
    news = pd.read_parquet(d / "store-news.parquet")
    profiles = {k: Profile(p["name"], p["summary"], p["sector"], tuple(p["keywords"])) for k, p in meta["profiles"].items()}
    return PointInTimeStore(frames, macro=macro, fundamentals=fund if len(fund.columns) else None,
                            news=news if len(news) else None, profiles=profiles,
                            filing_lag_days=int(meta["filing_lag_days"]), n_news=int(meta["n_news"]))
