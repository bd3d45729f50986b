"""Yahoo calls are throttled and retried (stockr1.data.throttle): the spacing on a fake clock, the
text-context reads (info, statements, news) surviving two failures, a clear error after the last
retry, and one yfinance build (fixtures, no network) whose every call keeps the interval."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from stockr1.data import BuildConfig, build_dataset, load_run_data
from stockr1.data.providers.yfinance import yf_fundamentals, yf_news, yf_profiles
from stockr1.data.throttle import DataFetchError, Requests, Throttle
from tests.test_data_yfinance import FixtureTicker, fixture_downloader


class FakeClock:
    """time.monotonic + time.sleep that only move a counter."""

    def __init__(self) -> None:
        self.now, self.slept, self.starts = 100.0, [], []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s

    def requests(self, min_interval: float, retries: int = 4) -> Requests:
        return Requests(retries, 2.0, RecordingThrottle(min_interval, self.clock, self.sleep, self), self.sleep)


@dataclass
class RecordingThrottle(Throttle):
    """A Throttle that also notes, on the fake clock, when each call it let through started."""

    fake: FakeClock | None = None

    def wait(self) -> None:
        super().wait()
        self.fake.starts.append(self.fake.now)


def test_throttle_spaces_call_starts_on_a_fake_clock() -> None:
    fc = FakeClock()
    th = Throttle(1.5, fc.clock, fc.sleep)
    th.wait()  # the first call never waits
    fc.now += 0.5  # the call took 0.5 s
    th.wait()
    fc.now += 2.0  # a slow call: no wait needed after it
    th.wait()
    th.wait()
    assert fc.slept == [1.0, 1.5]
    with pytest.raises(ValueError, match="min_interval"):
        Throttle(-1.0)


class FlakyTicker:
    """A yfinance.Ticker stand-in whose network attributes fail twice (HTTP 429) before answering."""

    failures: dict[tuple[str, str], int] = {}

    def __init__(self, symbol: str) -> None:
        self.symbol, self._real = symbol, FixtureTicker(symbol)

    def __getattr__(self, name: str):
        key = (self.symbol, name)
        FlakyTicker.failures[key] = FlakyTicker.failures.get(key, 0) + 1
        if FlakyTicker.failures[key] <= 2:
            raise RuntimeError("429 Too Many Requests")
        return getattr(self._real, name)


def test_text_context_calls_retry_through_two_failures() -> None:
    FlakyTicker.failures = {}
    fc = FakeClock()
    req = fc.requests(0.0)
    news = yf_news(["AAPL"], FlakyTicker, req)
    prof = yf_profiles(["AAPL"], FlakyTicker, req)
    fund = yf_fundamentals(["AAPL"], FlakyTicker, req)
    assert len(news) == len(yf_news(["AAPL"], FixtureTicker)) > 0
    assert prof == yf_profiles(["AAPL"], FixtureTicker)
    pd.testing.assert_frame_equal(fund, yf_fundamentals(["AAPL"], FixtureTicker))
    assert fc.slept == [2.0, 4.0] * 5  # news, info, three statements: backoff 2 s then 4 s each
    FlakyTicker.failures = {}
    with pytest.raises(DataFetchError, match=r"AAPL news: RuntimeError: 429 Too Many Requests \(after 1 retries\)"):
        yf_news(["AAPL"], FlakyTicker, fc.requests(0.0, retries=1))


def test_yfinance_build_keeps_the_interval_and_reads_back(tmp_path: Path) -> None:
    """A fixture build (history, Treasury quotes, info, statements, news) through one policy: every call
    starts at least min_interval after the previous; the dataset's store renders its own context."""
    fc = FakeClock()
    (tmp_path / "tickers.txt").write_text("AAPL\n# MSFT is left out\n")
    cfg = BuildConfig(source="yfinance", tickers_file=str(tmp_path / "tickers.txt"), start="2020-01-01",
                      end="2021-01-01", lookback=20, horizon=5, cache_dir=str(tmp_path / "cache"))
    build_dataset(cfg, tmp_path / "ds", downloader=fixture_downloader, ticker_factory=FixtureTicker,
                  requests=fc.requests(0.75))
    assert len(fc.starts) == 1 + 4 + 5  # AAPL history, 4 Treasury quotes, info + 3 statements + news
    assert min(b - a for a, b in zip(fc.starts, fc.starts[1:], strict=False)) >= 0.75
    d = load_run_data({"source": "dataset", "path": str(tmp_path / "ds"), "lookback": 20, "horizon": 5})
    assert set(d.windows.ticker) == {"AAPL"}
    i = len(d.windows) - 1
    assert d.store.render_context("AAPL", pd.Timestamp(d.windows.date[i])) == d.windows.context[i]
