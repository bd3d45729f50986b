"""yfinance source and providers on fixtures in yfinance's own layouts (no network): raw storage,
manifest, resume, retries, empty frames, split un-adjustment, as-of-t adjustment, providers."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stockr1.data import build_windows, load_source
from stockr1.data.build import BuildConfig, build_dataset
from stockr1.data.context import PointInTimeStore, yfinance_store
from stockr1.data.leakage import check_context_invariance, check_windows_invariance
from stockr1.data.providers.yfinance import (
    check_yield_units,
    yf_fundamentals,
    yf_news,
    yf_profiles,
    yf_treasury,
)
from stockr1.data.sources.yfinance import FAIL_FAST, DataFetchError, fetch, sp500_constituents, yahoo_probe
from stockr1.data.splits import SplitSpec
from stockr1.data.throttle import requests_policy

FIX = Path(__file__).parent / "fixtures" / "data" / "yfinance"
SPLIT = SplitSpec(val_start="2020-10-01", test_start="2020-11-16")


def fixture_downloader(ticker: str, start: str, end: str) -> pd.DataFrame:
    df = pd.read_csv(FIX / f"{ticker}.csv", index_col="Date")
    df.index = pd.to_datetime(df.index, utc=True).tz_convert("America/New_York")
    return df[(df.index.tz_localize(None) >= pd.Timestamp(start)) & (df.index.tz_localize(None) < pd.Timestamp(end))]


class FixtureTicker:
    """Stands in for yfinance.Ticker with the same attribute names."""

    def __init__(self, symbol: str):
        self.info = json.loads((FIX / f"{symbol}_info.json").read_text())
        self.news = json.loads((FIX / f"{symbol}_news.json").read_text())
        for name in ("quarterly_income_stmt", "quarterly_balance_sheet", "quarterly_cashflow"):
            setattr(self, name, pd.read_csv(FIX / f"{symbol}_{name}.csv", index_col=0))


def _load(tmp_path, **kw):
    return load_source("yfinance", tickers=["AAPL", "MSFT"], start="2020-01-01", end="2021-01-01",
                       cache_dir=tmp_path, downloader=fixture_downloader, progress=False, **kw)


def test_shipped_constituents_list():
    c = sp500_constituents()
    assert len(c) > 490 and c["ticker"].is_unique and {"AAPL", "MSFT", "BRK-B"} <= set(c["ticker"])


def test_raw_storage_manifest_and_split_unadjustment(tmp_path):
    frames = _load(tmp_path)
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert set(man) == {"AAPL", "MSFT"} and man["AAPL"]["start"] == "2020-01-01" and man["AAPL"]["fetched_at"]
    stored = pd.read_parquet(tmp_path / "AAPL.parquet")  # exactly what Yahoo gave (split-adjusted basis)
    yahoo = fixture_downloader("AAPL", "2020-01-01", "2021-01-01")
    np.testing.assert_allclose(stored["close"].to_numpy(), yahoo["Close"].to_numpy())
    a = frames["AAPL"]  # as traded: pre-split prices x4, volume /4, dividends x4
    pre, post = a.index < "2020-08-31", a.index >= "2020-08-31"
    np.testing.assert_allclose(a.loc[pre, "close"], stored.loc[pre, "close"] * 4)
    np.testing.assert_allclose(a.loc[post, "close"], stored.loc[post, "close"])
    np.testing.assert_allclose(a.loc[pre, "volume"], stored.loc[pre, "volume"] / 4)
    assert a.loc["2020-08-07", "dividends"] == pytest.approx(0.82)
    assert set(a.columns) >= {"dividends", "splits"} and a.index.name == "date" and a.index.tz is None


def test_windows_asof_t_have_no_future_split(tmp_path):
    frames = _load(tmp_path)
    w = build_windows(frames, lookback=20, horizon=5, split=SPLIT)
    a = frames["AAPL"]
    k = np.flatnonzero((w.ticker == "AAPL") & (w.date == np.datetime64("2020-08-28")))[0]
    np.testing.assert_allclose(w.hist[k, -1, 3], a.loc["2020-08-28", "close"])  # as traded, ~4x Yahoo's
    assert abs(w.y[k, 3, 0]) < 0.2  # the 4:1 split day is not a -75% label
    k2 = np.flatnonzero((w.ticker == "AAPL") & (w.date == np.datetime64("2020-09-04")))[0]
    assert w.hist[k2, 0, 3] < a.loc[:"2020-08-28", "close"].iloc[-1] / 3  # pre-split history now split-adjusted
    assert check_windows_invariance(frames, "2020-08-20", lookback=20, horizon=5, split=SPLIT) == []
    assert check_windows_invariance(frames, "2020-08-20", lookback=20, horizon=5, split=SPLIT, leak_days=1)


def test_resume_retry_and_errors(tmp_path):
    calls = []

    def counting(tk, s, e):
        calls.append(tk)
        return fixture_downloader(tk, s, e)

    fetch(["AAPL"], tmp_path, "2020-01-01", "2021-01-01", downloader=counting, progress=False)
    fetch(["AAPL", "MSFT"], tmp_path, "2020-01-01", "2021-01-01", downloader=counting, progress=False)
    assert calls == ["AAPL", "MSFT"]  # AAPL was cached, not refetched

    flaky = iter([RuntimeError("429 Too Many Requests"), None])
    sleeps = []

    def rate_limited(tk, s, e):
        err = next(flaky)
        if err:
            raise err
        return fixture_downloader(tk, s, e)

    fetch(["AAPL"], tmp_path / "b", "2020-01-01", "2021-01-01", downloader=rate_limited, sleep=sleeps.append,
          progress=False)
    assert sleeps == [2.0]
    with pytest.raises(DataFetchError, match="NOPE: DataFetchError: NOPE: empty frame"):
        fetch(["NOPE"], tmp_path / "c", "2020-01-01", "2021-01-01", downloader=lambda *a: pd.DataFrame(),
              sleep=sleeps.append, progress=False, retries=1)
    (tmp_path / "AAPL.parquet").write_bytes(b"corrupt")
    calls.clear()
    _load(tmp_path)  # sha mismatch -> refetched, not trusted
    assert calls == [] and pd.read_parquet(tmp_path / "AAPL.parquet").shape[0] > 200


def test_providers_parse_yahoo_layouts():
    prof = yf_profiles(["AAPL"], FixtureTicker)["AAPL"]
    assert prof.name == "Apple Inc." and "smartphones" in prof.summary and "3.9" not in prof.summary
    f = yf_fundamentals(["AAPL", "MSFT"], FixtureTicker)
    assert len(f) == 8 and f["filed"].isna().all()
    row = f[(f.ticker == "AAPL") & (f.period_end == pd.Timestamp("2020-06-30"))].iloc[0]
    assert row["total_liabilities"] == 2.5e11 and row["operating_cash_flow"] == 1.6e10
    n = yf_news(["AAPL", "MSFT"], FixtureTicker)
    first = n[n.title == "Apple unveils new iPhone lineup"].iloc[0]
    assert first["time"] == pd.Timestamp("2020-10-13 13:30")  # 17:30 UTC -> 13:30 New York
    assert (n.ticker == "MSFT").sum() == 2
    yields = yf_treasury("2020-01-01", "2021-01-01", fixture_downloader)
    assert set(yields) == {"us3m", "us5y", "us10y", "us30y"}


def test_yield_unit_check():
    idx = pd.bdate_range("2020-01-01", periods=5)
    assert check_yield_units(pd.Series([1.0, 1.1, 0.9, 1.0, 1.2], idx), "^TNX").max() == 1.2
    with pytest.warns(UserWarning, match="10x"):
        assert check_yield_units(pd.Series([45.0, 44.0, 46.0, 45.0, 45.0], idx), "^TNX").max() == 4.6
    with pytest.raises(ValueError, match=r"\^TNX: 1 values outside"):
        check_yield_units(pd.Series([1.0, 1.1, 400.0, 1.0, 1.2], idx), "^TNX")


def test_yfinance_context_point_in_time(tmp_path):
    frames = _load(tmp_path)
    store = yfinance_store(frames, downloader=fixture_downloader, ticker_factory=FixtureTicker)
    text = store.render_context("AAPL", "2020-10-16")
    assert "Company: Apple Inc. (AAPL)" in text and "US 10Y Treasury yield" in text
    assert "Fundamentals (Q2 2020, published 2020-08-14)" in text  # 2020-09-30 + 45d is not yet public
    titles = [i["title"] for i in store.news_before("AAPL", "2020-10-16")]  # cut at 2020-10-15 16:00
    assert titles == ["Apple shares slip after event", "Apple unveils new iPhone lineup"]  # newest first
    assert "Tech stocks rally" not in text  # names no company: strict keyword matching
    titles = [i["title"] for i in store.news_before("AAPL", "2020-10-15")]  # cut at 2020-10-14 16:00
    assert titles == ["Apple unveils new iPhone lineup"]  # 10-14 16:45 is after the close of t-1
    assert [i["title"] for i in store.news_before("MSFT", "2020-10-29")] == ["Microsoft wins defense cloud contract"]

    def make(fr, **tables):
        return PointInTimeStore(fr, profiles=store.profiles, **tables)

    tables = {"macro": store.macro, "fundamentals": store.fundamentals, "news": store.news}
    for t in ("2020-08-14", "2020-10-15", "2020-10-16"):
        assert check_context_invariance(make, frames, t, tables) == []
        leaky = check_context_invariance(lambda fr, **tb: PointInTimeStore(fr, profiles=store.profiles, leak_days=1, **tb),
                                         frames, t, tables)
        assert leaky, t


def _offline(*_a) -> None:
    raise ConnectionError("https://query1.finance.yahoo.com/: [Errno -2] Name or service not known")


def test_unreachable_yahoo_fails_before_any_download(tmp_path):
    """No network: one line saying so, before a single download or retry sleep, and nothing written."""
    calls, sleeps = [], []
    cfg = BuildConfig(source="yfinance", tickers=("AAPL", "MSFT"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(DataFetchError, match=r"^cannot reach Yahoo Finance \(.*Name or service not known\)") as e:
        build_dataset(cfg, tmp_path / "out", downloader=lambda *a: calls.append(a), probe=_offline,
                      requests=requests_policy(sleep=sleeps.append))
    assert "\n" not in str(e.value) and "delisted" not in str(e.value)
    assert calls == [] and sleeps == [] and not (tmp_path / "out").exists()


def test_first_tickers_all_failing_stop_the_fetch_when_yahoo_went_away(tmp_path):
    """The probe passed, then every download fails (yfinance calls that "possibly delisted"): after the first
    FAIL_FAST tickers the probe is asked again and the fetch stops, instead of retrying all 503."""
    probes, calls, sleeps = [], [], []

    def probe() -> None:
        probes.append(1)
        if len(probes) > 1:
            _offline()

    def download(tk, s, e):
        calls.append(tk)
        raise RuntimeError(f"${tk}: possibly delisted; no price data found")

    tickers = sp500_constituents()["ticker"].tolist()
    with pytest.raises(DataFetchError, match="^cannot reach Yahoo Finance"):
        fetch(tickers, tmp_path, downloader=download, probe=probe, retries=1, sleep=sleeps.append, progress=False)
    assert len(probes) == 2 and len(calls) == FAIL_FAST * 2 and len(sleeps) == FAIL_FAST  # 1 retry each

    probes.clear(), calls.clear()  # Yahoo still answers: those tickers really are missing; one line names them
    with pytest.raises(DataFetchError, match=r"^5 ticker\(s\) failed after 0 retries .*: A: .*; and 2 more$"):
        fetch(list("ABCDE"), tmp_path, downloader=download, probe=lambda: probes.append(1), retries=0,
              progress=False)
    assert len(probes) == 2 and calls == list("ABCDE")


def test_yahoo_probe_is_bounded_and_names_the_url():
    """The real probe against a listener that never answers: ConnectionError within its timeout."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        with pytest.raises(ConnectionError, match="127.0.0.1"):
            yahoo_probe(timeout=0.5, url=url)
    with pytest.raises(ConnectionError, match="nowhere.invalid"):
        yahoo_probe(timeout=5, url="https://nowhere.invalid/")  # RFC 6761: never resolves
