"""Build a dataset directory: windows + context as parquet shards, a quality report, a manifest.

Layout of ``out/``:
    windows-{train,val,test}.parquet   row, ticker, date, split, x, y, hist, future (flattened)
    context-{train,val,test}.parquet   row, ticker, date, context
    issues.csv                         every data-quality issue (ticker, date, kind, action, detail)
    manifest.json                      config, shapes, summary, file sha256s, content_hash

``content_hash`` hashes the window arrays and strings themselves (not the parquet bytes), so a
rebuild from the same inputs gives the same hash on any machine with the same data.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from stockr1.data.quality import check_frames
from stockr1.data.sources import load_source
from stockr1.data.sources.frames import trading_calendar
from stockr1.data.splits import PAPER_SPLIT, SAMPLE_SPLIT
from stockr1.data.windows import build_windows, split_counts
from stockr1.types import SPLITS, Windows

ARRAYS = ("x", "y", "hist", "future")


@dataclass(frozen=True)
class BuildConfig:
    source: str = "sample"
    path: str | None = None
    tickers: tuple[str, ...] | None = None
    start: str | None = None
    end: str | None = None
    lookback: int = 90
    horizon: int = 10
    stride: int = 1
    context: bool = True
    seed: int = 0  # synthetic only
    n_days: int = 600  # synthetic only
    cache_dir: str = "data/yfinance"  # yfinance only
    jump_policy: str = "error"


def content_hash(w: Windows) -> str:
    h = hashlib.sha256()
    for name in ("ticker", "split", "context"):
        h.update("\x1f".join(map(str, getattr(w, name))).encode())
    h.update(np.ascontiguousarray(w.date.astype("datetime64[ns]")).tobytes())
    for name in ARRAYS:
        h.update(np.ascontiguousarray(getattr(w, name)).tobytes())
    return h.hexdigest()


def _frames_and_store(cfg: BuildConfig, downloader=None, ticker_factory=None):
    tickers = list(cfg.tickers) if cfg.tickers else None
    if cfg.source == "sample":
        frames = load_source("sample", tickers=tickers)
    elif cfg.source == "csv":
        if not cfg.path:
            raise ValueError("--source csv needs --path FILE_OR_DIR")
        frames = load_source("csv", path=cfg.path, tickers=tickers)
    elif cfg.source == "synthetic":
        frames = load_source("synthetic", n_days=cfg.n_days, seed=cfg.seed, tickers=tickers)
    elif cfg.source == "yfinance":
        kw = {k: v for k, v in (("start", cfg.start), ("end", cfg.end)) if v}
        frames = load_source("yfinance", tickers=tickers, cache_dir=cfg.cache_dir, downloader=downloader, **kw)
    else:
        raise ValueError(f"unknown source {cfg.source!r}")
    frames, report = check_frames(frames, jump_policy=cfg.jump_policy)
    store = None
    if cfg.context:
        from stockr1.data import context as ctx

        if cfg.source == "sample":
            store = ctx.sample_store(frames)
        elif cfg.source == "synthetic":
            store = ctx.synthetic_store(frames, seed=cfg.seed)
        elif cfg.source == "yfinance":
            store = ctx.yfinance_store(frames, downloader=downloader, ticker_factory=ticker_factory)
    return frames, report, store


def build_dataset(cfg: BuildConfig, out: str | Path, downloader=None, ticker_factory=None) -> dict:
    """Build, write and return the manifest (whose ``summary`` the CLI prints)."""
    frames, report, store = _frames_and_store(cfg, downloader, ticker_factory)
    split = PAPER_SPLIT if cfg.source == "yfinance" else SAMPLE_SPLIT
    w = build_windows(frames, cfg.lookback, cfg.horizon, split=split, stride=cfg.stride, context=store,
                      start=cfg.start if cfg.source != "yfinance" else None, end=cfg.end if cfg.source != "yfinance" else None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    rows = np.arange(len(w))
    for s in SPLITS:
        m = w.split == s
        cols = {"row": rows[m], "ticker": w.ticker[m].astype(str), "date": w.date[m], "split": w.split[m].astype(str)}
        for name in ARRAYS:
            a = getattr(w, name)[m]
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), int(np.prod(a.shape[1:])))
        pq.write_table(pa.table(cols), out / f"windows-{s}.parquet")
        ctx_cols = {"row": rows[m], "ticker": w.ticker[m].astype(str), "date": w.date[m], "context": w.context[m].astype(str)}
        pq.write_table(pa.table(ctx_cols), out / f"context-{s}.parquet")
        for f in (f"windows-{s}.parquet", f"context-{s}.parquet"):
            files[f] = hashlib.sha256((out / f).read_bytes()).hexdigest()
    pd.DataFrame([asdict(i) for i in report.issues], columns=["ticker", "date", "kind", "action", "detail"]).to_csv(
        out / "issues.csv", index=False)
    cal = trading_calendar(frames)
    summary = {
        "source": cfg.source, "tickers": sorted(frames), "n_tickers": len(frames),
        "days": int(len(cal)), "first_day": str(cal[0].date()), "last_day": str(cal[-1].date()),
        "rows_per_ticker": {t: int(len(f)) for t, f in sorted(frames.items())},
        "windows": split_counts(w), "n_windows": len(w),
        "split_dates": {s: [str(pd.Timestamp(w.date[w.split == s].min()).date()), str(pd.Timestamp(w.date[w.split == s].max()).date())]
                        for s in SPLITS if (w.split == s).any()},
        "repairs": report.counts(), "with_context": bool(store is not None),
    }  # fmt: skip
    manifest = {"config": asdict(cfg), "shapes": {"lookback": cfg.lookback, "horizon": cfg.horizon},
                "summary": summary, "files": files, "content_hash": content_hash(w)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
    return manifest


def load_windows(directory: str | Path) -> Windows:
    """Read a built dataset back; identical (arrays and order) to what build_dataset wrote."""
    d = Path(directory)
    mpath = d / "manifest.json"
    if not mpath.exists():
        raise FileNotFoundError(f"{d} is not a built dataset (no manifest.json); run `stockr1 data build`")
    man = json.loads(mpath.read_text())
    L, S = man["shapes"]["lookback"], man["shapes"]["horizon"]
    shapes = {"x": (5, L), "y": (5, S), "hist": (L, 5), "future": (S, 5)}
    try:
        tab = pd.concat([pq.read_table(d / f"windows-{s}.parquet").to_pandas() for s in SPLITS], ignore_index=True)
        ctx = pd.concat([pq.read_table(d / f"context-{s}.parquet").to_pandas() for s in SPLITS], ignore_index=True)
    except Exception as e:  # noqa: BLE001 - name the corrupt directory
        raise ValueError(f"cannot read dataset shards in {d}: {e}") from e
    tab = tab.sort_values("row", kind="stable").reset_index(drop=True)
    ctx = ctx.set_index("row").loc[tab["row"]]
    arrays = {k: np.stack(tab[k].to_numpy()).reshape((len(tab),) + shp) if len(tab) else np.zeros((0,) + shp)
              for k, shp in shapes.items()}
    return Windows(
        ticker=tab["ticker"].to_numpy(dtype=object), date=tab["date"].to_numpy(dtype="datetime64[ns]"),
        x=arrays["x"].astype(np.float32), y=arrays["y"].astype(np.float32),
        hist=arrays["hist"].astype(np.float64), future=arrays["future"].astype(np.float64),
        split=tab["split"].to_numpy(dtype=object), context=ctx["context"].to_numpy(dtype=object),
    )
