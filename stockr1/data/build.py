"""Build a dataset directory: windows + context as parquet shards, a quality report, a manifest.

Layout of ``out/``:
    windows-{train,val,test}.parquet   row, ticker, date, split, x, y, hist, future (flattened), channels
                                       (the observed channels; only when some window lacks one)
    context-{train,val,test}.parquet   row, ticker, date, context
    frames.parquet                     the checked daily frames (ticker, date, OHLCV, actions)
    store.json, store-*.parquet        the point-in-time store's inputs (with context; dataset_io.py)
    membership.csv                     index membership (with --membership; applied by load_windows)
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

from stockr1.data.dataset_io import (
    STORE_META,
    DatasetError,
    read_frames,
    read_manifest,
    read_store,
    sha256,
    write_frames,
    write_store,
)
from stockr1.data.membership import Membership, read_tickers_file
from stockr1.data.price_frame import AS_TRADED, BACK_ADJUSTED, frame_kinds, mark_back_adjusted
from stockr1.data.quality import check_frames
from stockr1.data.sources import load_source
from stockr1.data.sources.frames import trading_calendar
from stockr1.data.splits import source_split
from stockr1.data.windows import build_windows, split_counts
from stockr1.outdir import output_dir, refuse_existing
from stockr1.types import AS_OF_T, SPLITS, Windows

ARRAYS = ("x", "y", "hist", "future")
FRAMES_FILE = "frames.parquet"
MEMBERSHIP_FILE = "membership.csv"


@dataclass(frozen=True)
class BuildConfig:
    source: str = "sample"
    path: str | None = None
    tickers: tuple[str, ...] | None = None
    tickers_file: str | None = None  # one ticker per line, # comments
    membership: str | None = None  # CSV ticker,start,end (stockr1.data.membership)
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
    min_interval: float = 0.5  # yfinance only: seconds between request starts (throttle)
    retries: int = 4  # yfinance only: retries per request (backoff 2, 4, 8, 16 s)
    skip_missing: bool = False  # leave out (and list) universe tickers the source lacks
    # csv only: "back_adjusted" for files of adjusted closes (their levels hold later splits/dividends, so
    # windows are rebased: 100 = the close of t; stockr1.data.price_frame); "as_traded" for raw prices
    price_basis: str = "as_traded"

    def __post_init__(self) -> None:
        if self.price_basis not in (AS_TRADED, BACK_ADJUSTED):
            raise ValueError(f"price_basis must be {AS_TRADED!r} or {BACK_ADJUSTED!r}, got {self.price_basis!r}")
        if self.price_basis != AS_TRADED and self.source != "csv":
            raise ValueError(f"--price-basis applies to --source csv only; the {self.source} source declares its own")

    def universe(self) -> list[str] | None:
        """--tickers, else --tickers-file, else the membership file's tickers, else the source's default."""
        if self.tickers and self.tickers_file:
            raise ValueError("give --tickers or --tickers-file, not both")
        if self.tickers:
            return list(self.tickers)
        if self.tickers_file:
            return list(read_tickers_file(self.tickers_file))
        return list(Membership.read(self.membership).tickers) if self.membership else None


def content_hash(w: Windows) -> str:
    h = hashlib.sha256()
    # the frame only where a window is rebased, so datasets of as-traded prices keep the hash they had
    names = ("ticker", "split", "context", "frame") if (w.frame != AS_OF_T).any() else ("ticker", "split", "context")
    for name in names:
        h.update("\x1f".join(map(str, getattr(w, name))).encode())
    h.update(np.ascontiguousarray(w.date.astype("datetime64[ns]")).tobytes())
    for name in ARRAYS:
        h.update(np.ascontiguousarray(getattr(w, name)).tobytes())
    if not w.channels.all():  # only then: a dataset with every channel keeps the hash it always had
        h.update(np.ascontiguousarray(w.channels).tobytes())
    return h.hexdigest()


def _frames_and_store(cfg: BuildConfig, downloader=None, ticker_factory=None, requests=None, probe=None):
    from stockr1.data.throttle import requests_policy

    tickers = cfg.universe()
    requests = requests or requests_policy(cfg.min_interval, cfg.retries)
    if cfg.source == "sample":
        frames = load_source("sample", tickers=tickers)
    elif cfg.source == "csv":
        if not cfg.path:
            raise ValueError("--source csv needs --path FILE_OR_DIR")
        frames = load_source("csv", path=cfg.path, tickers=None if cfg.skip_missing else tickers)
        frames = {t: frames[t] for t in tickers if t in frames} if tickers and cfg.skip_missing else frames
        if cfg.price_basis == BACK_ADJUSTED:
            frames = {t: mark_back_adjusted(f) for t, f in frames.items()}
    elif cfg.source == "synthetic":
        frames = load_source("synthetic", n_days=cfg.n_days, seed=cfg.seed, tickers=tickers)
    elif cfg.source in ("stocks", "universe"):
        frames = load_source(cfg.source, tickers=tickers)
    elif cfg.source == "yfinance":
        kw = {k: v for k, v in (("start", cfg.start), ("end", cfg.end)) if v}
        frames = load_source("yfinance", tickers=tickers, cache_dir=cfg.cache_dir, downloader=downloader,
                             requests=requests, skip_missing=cfg.skip_missing, probe=probe, **kw)
    else:
        raise ValueError(f"unknown source {cfg.source!r}")
    if not frames:
        raise ValueError(f"none of the {len(tickers or [])} tickers of the universe are in the source")
    frames, report = check_frames(frames, jump_policy=cfg.jump_policy)
    store = None
    if cfg.context:
        from stockr1.data import context as ctx

        if cfg.source == "sample":
            store = ctx.sample_store(frames)
        elif cfg.source == "synthetic":
            store = ctx.synthetic_store(frames, seed=cfg.seed)
        elif cfg.source in ("stocks", "universe"):
            store = ctx.stocks_store(frames)
        elif cfg.source == "yfinance":
            store = ctx.yfinance_store(frames, downloader=downloader, ticker_factory=ticker_factory, requests=requests)
        else:  # a csv: no text to add, but the prompt still states the price frame and the last close
            store = ctx.PointInTimeStore(frames)
    return frames, report, store


def build_dataset(cfg: BuildConfig, out: str | Path, downloader=None, ticker_factory=None, requests=None,
                  probe=None, overwrite: bool = False) -> dict:
    """Build, write and return the manifest (whose ``summary`` the CLI prints). ``requests``
    (stockr1.data.throttle.Requests) overrides the throttle/retry policy of cfg (tests: a fake clock);
    ``probe`` the yfinance reachability check (stockr1.data.sources.yfinance.fetch).
    ``out`` holding a dataset is refused before any download unless ``overwrite``; the files are written
    to a temporary sibling that replaces ``out`` only when all of them are (``stockr1.outdir``), so an
    interrupted rebuild never leaves an old manifest over new shards."""
    refuse_existing(out, overwrite)
    member = Membership.read(cfg.membership) if cfg.membership else None
    frames, report, store = _frames_and_store(cfg, downloader, ticker_factory, requests, probe)
    split = source_split(cfg.source)
    w = build_windows(frames, cfg.lookback, cfg.horizon, split=split, stride=cfg.stride, context=store,
                      start=cfg.start if cfg.source != "yfinance" else None, end=cfg.end if cfg.source != "yfinance" else None,
                      membership=member, progress=True)
    with output_dir(out, overwrite) as tmp:
        return _write_dataset(cfg, tmp, frames, report, store, member, w)


def _write_dataset(cfg: BuildConfig, out: Path, frames, report, store, member, w: Windows) -> dict:
    """Every file of the dataset under ``out``, the manifest last; returns the manifest."""
    files = {}
    extra = [FRAMES_FILE]
    write_frames(frames, out / FRAMES_FILE)
    if store is not None:
        extra += write_store(store, out)
    if member is not None:
        member.write(out / MEMBERSHIP_FILE)
        extra.append(MEMBERSHIP_FILE)
    rows = np.arange(len(w))
    for s in SPLITS:
        m = w.split == s
        cols = {"row": rows[m], "ticker": w.ticker[m].astype(str), "date": w.date[m], "split": w.split[m].astype(str),
                "frame": w.frame[m].astype(str)}
        for name in ARRAYS + (("channels",) if not w.channels.all() else ()):
            a = getattr(w, name)[m]
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), int(np.prod(a.shape[1:])))
        pq.write_table(pa.table(cols), out / f"windows-{s}.parquet")
        ctx_cols = {"row": rows[m], "ticker": w.ticker[m].astype(str), "date": w.date[m], "context": w.context[m].astype(str)}
        pq.write_table(pa.table(ctx_cols), out / f"context-{s}.parquet")
        for f in (f"windows-{s}.parquet", f"context-{s}.parquet"):
            files[f] = sha256(out / f)
    pd.DataFrame([asdict(i) for i in report.issues], columns=["ticker", "date", "kind", "action", "detail"]).to_csv(
        out / "issues.csv", index=False)
    files.update({f: sha256(out / f) for f in [*extra, "issues.csv"]})
    cal = trading_calendar(frames)
    summary = {
        "source": cfg.source, "tickers": sorted(frames), "n_tickers": len(frames),
        "days": int(len(cal)), "first_day": str(cal[0].date()), "last_day": str(cal[-1].date()),
        "rows_per_ticker": {t: int(len(f)) for t, f in sorted(frames.items())},
        "price_frames": frame_kinds(frames),
        "windows": split_counts(w), "n_windows": len(w),
        "split_dates": {s: [str(pd.Timestamp(w.date[w.split == s].min()).date()), str(pd.Timestamp(w.date[w.split == s].max()).date())]
                        for s in SPLITS if (w.split == s).any()},
        "repairs": report.counts(), "with_context": bool(store is not None),
        "absent_channels": _absent_channels(frames),
        "trimmed": _trimmed(cfg.source, frames),
        "missing": sorted(set(cfg.universe() or []) - set(frames)),  # --skip-missing: not in the source
        "membership": None if member is None else {
            "tickers": len(member.tickers), "never_member": sorted(set(frames) - set(w.ticker.tolist()))},
    }  # fmt: skip
    manifest = {"config": asdict(cfg), "shapes": {"lookback": cfg.lookback, "horizon": cfg.horizon},
                "summary": summary, "files": files, "content_hash": content_hash(w)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str))
    return manifest


def _absent_channels(frames: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """{ticker: [absent channels]} for the tickers that lack any (close-only series), else {}."""
    from stockr1.data.sources.frames import present_channels
    from stockr1.types import CHANNELS

    out = {t: [c for c, ok in zip(CHANNELS, present_channels(f), strict=True) if not ok] for t, f in sorted(frames.items())}
    return {t: v for t, v in out.items() if v}


def _trimmed(source: str, frames: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Stock sources: the rows each ticker loses before its first usable day (stocks.first_usable_day)."""
    if source not in ("stocks", "universe"):
        return {}
    from stockr1.data.sources.stocks import read_closes, usable_starts

    starts = usable_starts(read_closes())
    return {t: {"first_usable": r.first_usable, "rows_dropped": int(r.rows_dropped), "reason": r.reason}
            for t, r in starts.iterrows() if t in frames and r.rows_dropped > 0}


def load_windows(directory: str | Path, verify: bool = True) -> Windows:
    """Read a built dataset back; identical (arrays and order) to what build_dataset wrote. The
    manifest is checked first (``dataset_io.read_manifest``: every file present with its sha256), and
    a saved membership is applied again, so every reader sees the dataset's universe."""
    d = Path(directory)
    man = read_manifest(d, verify)
    L, S = man["shapes"]["lookback"], man["shapes"]["horizon"]
    shapes = {"x": (5, L), "y": (5, S), "hist": (L, 5), "future": (S, 5)}
    tabs, ctxs = [], []
    for s in SPLITS:
        for name, dest in ((f"windows-{s}.parquet", tabs), (f"context-{s}.parquet", ctxs)):
            try:
                dest.append(pq.read_table(d / name).to_pandas())
            except Exception as e:  # noqa: BLE001 - name the corrupt file
                raise DatasetError(f"cannot read dataset file {d / name}: {type(e).__name__}: {e}") from e
    tab = pd.concat(tabs, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
    ctx = pd.concat(ctxs, ignore_index=True).set_index("row").loc[tab["row"]]
    if "channels" in tab.columns:  # written only when some window lacks a channel; else all observed
        shapes["channels"] = (5,)
    arrays = {k: np.stack(tab[k].to_numpy()).reshape((len(tab),) + shp) if len(tab) else np.zeros((0,) + shp)
              for k, shp in shapes.items()}
    w = Windows(
        ticker=tab["ticker"].to_numpy(dtype=object), date=tab["date"].to_numpy(dtype="datetime64[ns]"),
        x=arrays["x"].astype(np.float32), y=arrays["y"].astype(np.float32),
        hist=arrays["hist"].astype(np.float64), future=arrays["future"].astype(np.float64),
        split=tab["split"].to_numpy(dtype=object), context=ctx["context"].to_numpy(dtype=object),
        frame=tab["frame"].to_numpy(dtype=object) if "frame" in tab else np.array([], dtype=object),  # older: as of t
        channels=arrays["channels"].astype(bool) if "channels" in arrays else None,
    )
    if MEMBERSHIP_FILE in man["files"]:
        keep = Membership.read(d / MEMBERSHIP_FILE).mask(w.ticker, w.date)
        w = w if keep.all() else w.select(np.flatnonzero(keep))
    return w


def load_frames(directory: str | Path, verify: bool = True) -> dict[str, pd.DataFrame]:
    """The checked daily frames a dataset was built from (every ticker, whole history)."""
    d = Path(directory)
    man = read_manifest(d, verify)
    if FRAMES_FILE not in man["files"]:
        raise DatasetError(f"{d} has no {FRAMES_FILE} (built by an older stockr1); rebuild it with `stockr1 data build`")
    return read_frames(d / FRAMES_FILE)


def load_store(directory: str | Path, frames: dict[str, pd.DataFrame], verify: bool = True):
    """The dataset's ``PointInTimeStore``: its saved context inputs, or an empty store (prices only)
    for a dataset built without context (``--source csv`` or ``--no-context``)."""
    from stockr1.data.context import PointInTimeStore

    d = Path(directory)
    man = read_manifest(d, verify)
    return read_store(d, frames) if STORE_META in man["files"] else PointInTimeStore(frames)
