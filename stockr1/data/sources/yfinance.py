"""yfinance source for real use: raw daily OHLCV + actions, cached as parquet shards with a manifest.

- Universe: the shipped S&P 500 constituents list (resources/sp500_constituents.csv, a 2025
  snapshot: today's members, so survivorship-biased) or any user list; 2015-01-01 -> 2025-10-01.
- ``Ticker.history(auto_adjust=False, actions=True, raise_errors=True)``: yfinance hides download
  errors unless asked; an empty frame is also an error.
- Yahoo's OHLC and volume are split-adjusted even with auto_adjust=False (and dividends are not
  applied). We store exactly what Yahoo returns and, on load, undo the split adjustment with the
  ``splits`` column (price * product of later split ratios) to recover as-traded prices; windows
  are then adjusted as of each decision day (adjust.py), so no future split or dividend leaks.
- Throttled (``min_interval`` seconds between request starts) and retried with exponential backoff
  (``stockr1.data.throttle.Requests``, shared with the text-context calls of a build); resumable (tickers already in the manifest with the same range
  are skipped); the manifest is rewritten after each ticker; a tqdm progress bar.
- The downloader is injected (``downloader=``): tests pass recorded fixtures, never the network.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from stockr1.data.sources.frames import normalize_frame
from stockr1.data.throttle import DataFetchError, Requests, requests_policy

DEFAULT_START, DEFAULT_END = "2015-01-01", "2025-10-01"
DEFAULT_CACHE = Path("data/yfinance")
Downloader = Callable[[str, str, str], pd.DataFrame]


def sp500_constituents() -> pd.DataFrame:
    """The shipped list: columns ticker, name, sector (Yahoo symbols, e.g. BRK-B)."""
    with resources.files("stockr1.data.resources").joinpath("sp500_constituents.csv").open() as fh:
        return pd.read_csv(fh)


def yf_download(ticker: str, start: str, end: str) -> pd.DataFrame:
    """The real downloader (network)."""
    import yfinance as yf

    return yf.Ticker(ticker).history(start=start, end=end, interval="1d", auto_adjust=False, actions=True,
                                     raise_errors=True)


def unadjust_yahoo_splits(frame: pd.DataFrame) -> pd.DataFrame:
    """As-traded prices from Yahoo's split-adjusted ones: P * prod(later splits), V / prod(later splits).
    Dividends are split-adjusted by Yahoo too and are restored the same way."""
    if "splits" not in frame:
        return frame
    s = frame["splits"].fillna(0.0).to_numpy()
    log_s = np.log(np.where(s > 0, s, 1.0))
    later = np.exp(np.cumsum(log_s[::-1])[::-1] - log_s)  # product of splits strictly after each day
    out = frame.copy()
    for c in ("open", "high", "low", "close"):
        out[c] = frame[c].to_numpy() * later
    out["volume"] = frame["volume"].to_numpy() / later
    if "dividends" in out:
        out["dividends"] = frame["dividends"].to_numpy() * later
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _history(download: Downloader, tk: str, start: str, end: str) -> pd.DataFrame:
    raw = download(tk, start, end)
    if raw is None or len(raw) == 0:
        raise DataFetchError(f"{tk}: empty frame for {start}..{end} (delisted, renamed or rate-limited?)")
    return normalize_frame(raw, f"yfinance:{tk}")


def fetch(tickers: list[str], cache_dir: str | Path = DEFAULT_CACHE, start: str = DEFAULT_START, end: str = DEFAULT_END,
          downloader: Downloader | None = None, retries: int = 4, backoff: float = 2.0,
          sleep: Callable[[float], None] = time.sleep, progress: bool = True, min_interval: float = 0.0,
          requests: Requests | None = None, skip_missing: bool = False) -> dict:
    """Download missing tickers into ``cache_dir/<ticker>.parquet``; returns the manifest dict.
    Raises DataFetchError listing every ticker that still failed (the others stay cached), unless
    ``skip_missing`` (a membership universe: Yahoo lacks most delisted tickers), which only warns.
    ``requests`` (else one made from retries, backoff, sleep, min_interval) throttles and retries."""
    from tqdm.auto import tqdm

    download = downloader or yf_download
    req = requests or requests_policy(min_interval, retries, backoff, sleep)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    mpath = cache / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
    failures: dict[str, str] = {}
    for tk in tqdm(tickers, desc="yfinance", disable=not progress):
        entry, shard = manifest.get(tk), cache / f"{tk}.parquet"
        if entry and entry["start"] == start and entry["end"] == end and shard.exists() and _sha(shard) == entry["sha256"]:
            continue  # resumable: already cached
        try:
            frame = req.call(lambda tk=tk: _history(download, tk, start, end), tk)
        except DataFetchError as e:
            cause = e.__cause__ or e
            failures[tk] = f"{type(cause).__name__}: {cause}"
            continue
        frame.to_parquet(shard)
        manifest[tk] = {"ticker": tk, "start": start, "end": end, "rows": len(frame),
                        "first": str(frame.index[0].date()), "last": str(frame.index[-1].date()),
                        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sha256": _sha(shard)}
        tmp = mpath.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        tmp.replace(mpath)
    if failures:
        msg = (f"{len(failures)} ticker(s) failed after {req.retries} retries (rerun to resume):\n  "
               + "\n  ".join(f"{k}: {v}" for k, v in failures.items()))
        if not skip_missing:
            raise DataFetchError(msg)
        warnings.warn(f"yfinance: left out {msg}", stacklevel=2)
    return manifest


def load_yfinance(tickers: list[str] | None = None, start: str = DEFAULT_START, end: str = DEFAULT_END,
                  cache_dir: str | Path = DEFAULT_CACHE, downloader: Downloader | None = None,
                  progress: bool = True, **fetch_kw) -> dict[str, pd.DataFrame]:
    """Fetch (or reuse the cache) and return as-traded frames with ``dividends`` and ``splits``."""
    tickers = list(tickers) if tickers else sp500_constituents()["ticker"].tolist()
    man = fetch(tickers, cache_dir, start, end, downloader=downloader, progress=progress, **fetch_kw)
    out = {}
    for tk in [t for t in tickers if t in man and (man[t]["start"], man[t]["end"]) == (start, end)]:
        path = Path(cache_dir) / f"{tk}.parquet"
        try:
            frame = pd.read_parquet(path)
        except Exception as e:  # noqa: BLE001 - name the corrupt shard
            raise DataFetchError(f"corrupt cache shard {path}: {e}; delete it and rerun to refetch") from e
        out[tk] = unadjust_yahoo_splits(frame)
    return out
