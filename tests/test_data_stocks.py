"""The offline stock source (skfolio's 20 S&P 500 closes): pinned files, the usable-day rule, one set of
split dates shared with the sample, close-only windows with their channel mask, and an end-to-end
`stockr1 data build --source stocks` on a short range."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from stockr1.data import build_windows, content_hash, load_source, load_windows, sample_windows
from stockr1.data.cli import main
from stockr1.data.config import DataConfig
from stockr1.data.quality import check_frames
from stockr1.data.sources import stocks
from stockr1.data.sources.frames import trading_calendar
from stockr1.data.splits import SAMPLE_SPLIT, SAMPLE_TEST_START, SAMPLE_VAL_START, STOCK_SPLIT
from stockr1.types import CHANNELS, CLOSE


def test_sha256_is_checked_and_a_changed_or_missing_file_is_named(tmp_path):
    closes = stocks.read_closes()
    assert list(closes.columns) == list(stocks.STOCK_TICKERS) and closes.shape == (8313, 20)
    assert str(closes.index[0].date()) == "1990-01-02" and str(closes.index[-1].date()) == "2022-12-28"
    assert closes.at[pd.Timestamp("1990-01-02"), "AAPL"] == 0.264
    real = stocks.skfolio_file(stocks.STOCKS_FILE)
    assert real.parent == stocks.skfolio_data_dir()
    assert stocks.skfolio_file(stocks.STOCKS_FILE, real.parent) == real
    # a copy of the data file that differs by one byte: refused, naming the path
    data = bytearray(real.read_bytes())
    data[-1] ^= 1
    (tmp_path / stocks.STOCKS_FILE).write_bytes(bytes(data))
    with pytest.raises(stocks.StockSourceError, match=f"{tmp_path / stocks.STOCKS_FILE} has sha256 .* not the pinned"):
        stocks.skfolio_file(stocks.STOCKS_FILE, tmp_path)
    with pytest.raises(stocks.StockSourceError, match="has no .*sp500_index.csv.gz"):
        stocks.skfolio_file(stocks.INDEX_FILE, tmp_path)
    with pytest.raises(stocks.StockSourceError, match="needs the no_such_package_x package"):
        stocks.skfolio_data_dir("no_such_package_x")


def test_first_usable_day_rules_by_hand():
    idx = pd.bdate_range("2000-01-03", periods=12)
    # below MIN_PRICE until day 2, then a run of 6 identical closes (5 repeats) ending on day 8
    c = pd.Series([0.5, 0.9, 0.99, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.6, 1.7, 1.8], index=idx, name="X")
    assert stocks.first_usable_day(c) == (idx[9], f"6 identical closes ending {idx[8].date()}")
    c2 = c.copy()
    c2.iloc[8] = 1.55  # 5 identical closes (4 repeats) are allowed: MAX_UNCHANGED = 4
    assert stocks.first_usable_day(c2) == (idx[3], f"close < 1.00 until {idx[2].date()}")
    assert stocks.first_usable_day(pd.Series([2.0, 2.1], index=idx[:2])) == (idx[0], "")


def test_usable_starts_of_the_shipped_data():
    """What the rule drops from the pinned data (docs/data.md quotes these numbers)."""
    u = stocks.usable_starts()
    dropped = u[u.rows_dropped > 0]
    assert dropped["first_usable"].to_dict() == {
        "AAPL": "2005-01-13", "BBY": "1997-08-11", "JPM": "1991-09-09", "MSFT": "1991-08-08",
        "PFE": "1990-08-27", "RRC": "2000-05-03", "UNH": "1991-05-01"}
    assert int(u.rows_dropped.sum()) == 9660
    frames = stocks.load_stocks()
    assert all(f.index[0] == pd.Timestamp(u.at[t, "first_usable"]) for t, f in frames.items())
    assert min(f["close"].min() for f in frames.values()) >= stocks.MIN_PRICE


def test_stock_frames_are_close_only_and_pass_quality():
    frames = load_source("stocks", tickers=["KO", "SPX"])
    out, rep = check_frames(frames)
    for f in out.values():
        assert f["close"].notna().all() and f[["open", "high", "low", "volume"]].isna().all().all()
    assert "nan_volume" not in rep.counts() and "zero_volume" not in rep.counts()


def test_split_dates_are_the_samples_own_boundaries():
    cal = trading_calendar(load_source("sample"))
    p_val, p_test = SAMPLE_SPLIT.boundaries(cal)
    assert (str(cal[p_val].date()), str(cal[p_test].date())) == (SAMPLE_VAL_START, SAMPLE_TEST_START)
    assert STOCK_SPLIT.boundaries(cal) == (p_val, p_test)


def test_universe_windows_share_one_split_and_keep_the_samples_labels():
    """Indices inside a universe get exactly sample_windows' rows and split labels; a stock's test
    period never overlaps another series' train period."""
    frames, _ = check_frames(load_source("universe", tickers=["KO", "AAPL", "SP500", "NASDAQ"]))
    w = build_windows(frames, lookback=90, horizon=10, split=STOCK_SPLIT)
    ref = sample_windows()
    idx = w.select(np.isin(w.ticker, ["SP500", "NASDAQ"]))
    assert (idx.split == ref.split).all() and (idx.date == ref.date).all()
    np.testing.assert_array_equal(idx.x, ref.x)
    assert idx.channels.all()
    stock = w.select(np.isin(w.ticker, ["KO", "AAPL"]))
    assert (stock.channels == np.array([False, False, False, True, False])).all()
    train_end = w.date[w.split == "train"].max()
    assert w.date[w.split == "test"].min() == np.datetime64(SAMPLE_TEST_START)
    assert w.date[w.split == "val"].min() == np.datetime64(SAMPLE_VAL_START) > train_end
    # the absent channels are NaN in every array, the close never is
    for name, axis in (("x", 1), ("y", 1), ("hist", 2), ("future", 2)):
        a = getattr(stock, name)
        absent = np.take(a, [0, 1, 2, 4], axis=axis)
        assert np.isnan(absent).all() and np.isfinite(np.take(a, CLOSE, axis=axis)).all(), name


def test_data_config_accepts_the_stock_sources():
    assert DataConfig(source="stocks").describe() == "stocks"
    assert DataConfig.from_dict({"source": "universe", "lookback": 60, "horizon": 5}).source == "universe"


def test_build_stocks_end_to_end_on_a_short_range(tmp_path, capsys):
    out = tmp_path / "st"
    args = ["build", "--source", "stocks", "--tickers", "AAPL", "KO", "--start", "2015-11-01", "--end", "2016-02-01",
            "--lookback", "30", "--horizon", "5"]
    assert main(args + ["--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "absent     2 tickers lack channels (masked): AAPL: open/high/low/volume" in text
    assert "trimmed    3792 early rows before the first usable day: AAPL 3792 (from 2005-01-13)" in text
    man = json.loads((out / "manifest.json").read_text())
    assert man["summary"]["split_dates"]["test"][0] == SAMPLE_TEST_START
    w = load_windows(out)
    assert content_hash(w) == man["content_hash"]
    assert w.channels.shape == (len(w), 5) and not w.channels[:, [0, 1, 2, 4]].any() and w.channels[:, CLOSE].all()
    assert "Company: Apple Inc. (AAPL)" in w.context[0] and "Sector: Information Technology" in w.context[0]
    # the channel mask is part of the content: the same arrays with other channels give another hash
    flipped = w.select(np.arange(len(w)))
    object.__setattr__(flipped, "channels", np.ones_like(w.channels))
    assert content_hash(flipped) != man["content_hash"]
    again = tmp_path / "st2"
    assert main(args + ["--out", str(again)]) == 0
    assert json.loads((again / "manifest.json").read_text())["content_hash"] == man["content_hash"]
    shutil.rmtree(again)


def test_full_datasets_keep_their_hash_and_have_no_channels_column(tmp_path, capsys):
    """All channels observed: no channels column, the content hash of before (old datasets still load)."""
    out = tmp_path / "s"
    assert main(["build", "--source", "sample", "--tickers", "NASDAQ", "--start", "2018-06-01", "--no-context",
                 "--out", str(out)]) == 0
    import pyarrow.parquet as pq

    assert "channels" not in pq.read_table(out / "windows-test.parquet").column_names
    w = load_windows(out)
    assert w.channels.all() and w.channels.shape == (len(w), len(CHANNELS))
