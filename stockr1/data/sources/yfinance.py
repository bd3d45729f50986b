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
- Fails fast without a network: before the first download a time-bounded probe (``yahoo_probe``) must
  reach Yahoo, and when the first ``FAIL_FAST`` tickers all fail it is asked again; an unreachable Yahoo
  ends the build in seconds with one line, not hours of per-ticker retries blamed on "delisted" tickers.
- The downloader and the probe are injected (``downloader=``, ``probe=``): tests pass recorded fixtures
  and fake probes, never the network.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
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
Probe = Callable[[], None]  # returns if Yahoo answers, raises ConnectionError if not
YAHOO_URL = "https://query1.finance.yahoo.com/"
PROBE_TIMEOUT_S = 10.0
FAIL_FAST = 3  # the first this many tickers all failing: ask the probe again before going on


def sp500_constituents() -> pd.DataFrame:
    """The shipped list: columns ticker, name, sector (Yahoo symbols, e.g. BRK-B)."""
    with resources.files("stockr1.data.resources").joinpath("sp500_constituents.csv").open() as fh:
        return pd.read_csv(fh)


def yf_download(ticker: str, start: str, end: str) -> pd.DataFrame:
    """The real downloader (network). ``attrs["exchange"]``: Yahoo's exchange code (e.g. NMS, NYQ)."""
    import yfinance as yf

    t = yf.Ticker(ticker)
    frame = t.history(start=start, end=end, interval="1d", auto_adjust=False, actions=True, raise_errors=True)
    frame.attrs["exchange"] = (t.history_metadata or {}).get("exchangeName")
    return frame


def yahoo_probe(timeout: float = PROBE_TIMEOUT_S, url: str = YAHOO_URL) -> None:
    """Raise ConnectionError unless ``url`` answers (any HTTP status counts) within ``timeout`` seconds.
    Runs in a daemon thread because a DNS lookup has no timeout of its own; honours HTTPS_PROXY."""
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
            outcome.append(None)
        except urllib.error.HTTPError:
            outcome.append(None)  # Yahoo answered, if only with 404 or 429
        except Exception as e:  # noqa: BLE001 - URLError, socket timeouts, SSL errors: all mean unreachable
            outcome.append(e)

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        raise ConnectionError(f"no answer from {url} within {timeout:.0f} s")
    if outcome[0] is not None:
        err = outcome[0]
        raise ConnectionError(f"{url}: {getattr(err, 'reason', err)}")


def _check_reachable(probe: Probe | None) -> None:
    if probe is None:
        return
    try:
        probe()
    except ConnectionError as e:
        raise DataFetchError(f"cannot reach Yahoo Finance ({e}): check the network or proxy, or build from "
                             "your own files with --source csv") from e


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
    frame = normalize_frame(raw, f"yfinance:{tk}")
    frame.attrs = {"exchange": raw.attrs.get("exchange")}  # for the manifest; not written to the shard
    return frame


def fetch(tickers: list[str], cache_dir: str | Path = DEFAULT_CACHE, start: str = DEFAULT_START, end: str = DEFAULT_END,
          downloader: Downloader | None = None, retries: int = 4, backoff: float = 2.0,
          sleep: Callable[[float], None] = time.sleep, progress: bool = True, min_interval: float = 0.0,
          requests: Requests | None = None, skip_missing: bool = False, probe: Probe | None = None) -> dict:
    """Download missing tickers into ``cache_dir/<ticker>.parquet``; returns the manifest dict.
    Raises DataFetchError naming the tickers that still failed (the others stay cached), unless
    ``skip_missing`` (a membership universe: Yahoo lacks most delisted tickers), which only warns.
    ``requests`` (else one made from retries, backoff, sleep, min_interval) throttles and retries.
    ``probe`` checks that Yahoo is reachable before the first download and again when the first
    FAIL_FAST tickers all failed; default ``yahoo_probe`` with the real downloader, none with an injected one."""
    from tqdm.auto import tqdm

    download = downloader or yf_download
    req = requests or requests_policy(min_interval, retries, backoff, sleep)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    mpath = cache / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
    probe = probe if probe is not None else (yahoo_probe if downloader is None else None)

    def cached(tk: str) -> bool:  # resumable: fetched before with the same range and an intact shard
        entry, shard = manifest.get(tk), cache / f"{tk}.parquet"
        return bool(entry and entry["start"] == start and entry["end"] == end and shard.exists()
                    and _sha(shard) == entry["sha256"])

    todo = [tk for tk in tickers if not cached(tk)]
    if todo:
        _check_reachable(probe)
    failures: dict[str, str] = {}
    for i, tk in enumerate(tqdm(todo, desc="yfinance", disable=not progress)):
        shard = cache / f"{tk}.parquet"
        try:
            frame = req.call(lambda tk=tk: _history(download, tk, start, end), tk)
        except DataFetchError as e:
            cause = e.__cause__ or e
            failures[tk] = f"{type(cause).__name__}: {cause}"
            if i + 1 == FAIL_FAST == len(failures):  # yfinance reports no network as "possibly delisted"
                _check_reachable(probe)
            continue
        exchange = frame.attrs.pop("exchange", None)
        frame.to_parquet(shard)
        manifest[tk] = {"ticker": tk, "start": start, "end": end, "rows": len(frame), "exchange": exchange,
                        "first": str(frame.index[0].date()), "last": str(frame.index[-1].date()),
                        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "sha256": _sha(shard)}
        tmp = mpath.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        tmp.replace(mpath)
    if failures:
        shown = "; ".join(f"{k}: {v}".splitlines()[0] for k, v in list(failures.items())[:3])
        more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
        msg = f"{len(failures)} ticker(s) failed after {req.retries} retries (rerun to resume): {shown}{more}"
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


def exchanges(tickers: list[str], cache_dir: str | Path = DEFAULT_CACHE, **_kw) -> dict[str, str | None]:
    """{ticker: ISO MIC} from the Yahoo exchange code the manifest recorded at fetch time
    (``stockr1.data.calendar.YAHOO_EXCHANGES``); None for a code not mapped there, or not recorded."""
    from stockr1.data.calendar import YAHOO_EXCHANGES

    mpath = Path(cache_dir) / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
    return {t: YAHOO_EXCHANGES.get(str((manifest.get(t) or {}).get("exchange"))) for t in tickers}
