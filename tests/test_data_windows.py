"""Log returns, window layout, as-of-t adjustment, chronological splits with embargo."""

import math

import numpy as np
import pandas as pd
import pytest

from stockr1.data import (
    SplitSpec,
    build_windows,
    load_source,
    log_returns,
    sample_windows,
    synthetic_windows,
    trading_calendar,
)
from stockr1.data.splits import assign_splits
from stockr1.types import CLOSE, HIGH, OPEN, SPLITS, VOLUME


def _frame(rows, start="2020-01-01", **actions):
    idx = pd.bdate_range(start, periods=len(rows), name="date")
    f = pd.DataFrame(rows, columns=["open", "high", "low", "close", "volume"], index=idx, dtype=float)
    for k, v in actions.items():
        f[k] = v
    return f


def test_log_returns_hand_computed():
    a = np.array([[10.0, 11.0, 9.0, 10.0, 99.0], [10.5, 12.0, 10.0, 11.0, 199.0], [11.0, 11.5, 10.5, 10.0, 0.0]])
    r = log_returns(a)
    assert r.shape == (2, 5)
    assert r[0, OPEN] == pytest.approx(math.log(10.5 / 10.0))
    assert r[0, HIGH] == pytest.approx(math.log(12.0 / 10.0))
    assert r[0, CLOSE] == pytest.approx(math.log(11.0 / 10.0))
    assert r[0, VOLUME] == pytest.approx(math.log(200.0 / 100.0))
    assert r[1, 2] == pytest.approx(math.log(10.5 / 11.0))  # low vs previous *close*, not previous low
    assert r[1, VOLUME] == pytest.approx(math.log(1.0 / 200.0))


def test_window_layout_matches_rows():
    rng = np.random.default_rng(0)
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 30)))
    rows = np.stack([c * 0.99, c * 1.02, c * 0.98, c, rng.integers(1, 1000, 30)], 1)
    f = _frame(rows)
    w = build_windows({"A": f}, lookback=5, horizon=3, split=SplitSpec(0.2, 0.2, embargo=3))
    i = 5  # first decision row
    k = int(np.flatnonzero(w.date == f.index[i].to_datetime64())[0])
    np.testing.assert_allclose(w.hist[k], rows[i - 4 : i + 1])
    np.testing.assert_allclose(w.future[k], rows[i + 1 : i + 4])
    np.testing.assert_allclose(w.x[k].T, log_returns(rows[i - 5 : i + 1]), rtol=1e-6)
    np.testing.assert_allclose(w.y[k].T, log_returns(rows[i : i + 4]), rtol=1e-6)
    assert w.x.dtype == np.float32 and w.hist.dtype == np.float64
    assert pd.Timestamp(w.date.max()) == f.index[-4]  # last t still has S=3 future rows


def test_asof_adjustment_uses_no_future_split_or_dividend():
    n = 12
    close = np.array([100, 101, 102, 103, 52, 52.5, 53, 54, 53.5, 54, 55, 56.0])  # 2:1 split on row 4
    rows = np.stack([close, close * 1.01, close * 0.99, close, np.full(n, 1000.0)], 1)
    rows[4:, VOLUME] = 2000.0
    splits = np.zeros(n)
    splits[4] = 2.0
    div = np.zeros(n)
    div[8] = 0.54  # 1% of the previous close 54
    f = _frame(rows, splits=splits, dividends=div)
    all_train = SplitSpec(val_start="2031-01-01", test_start="2032-01-01")
    w = build_windows({"A": f}, lookback=3, horizon=2, split=all_train)
    by_t = {pd.Timestamp(d): k for k, d in enumerate(w.date)}
    k = by_t[f.index[3]]  # t before the split: history is as traded, the future is put on t's basis
    np.testing.assert_allclose(w.hist[k, :, CLOSE], [101, 102, 103])
    np.testing.assert_allclose(w.future[k, :, CLOSE], [104, 105])
    np.testing.assert_allclose(w.future[k, :, VOLUME], [1000, 1000])
    assert w.y[k, CLOSE, 0] == pytest.approx(math.log(104 / 103), rel=1e-5)  # the split is not a -69% day
    k = by_t[f.index[5]]  # t after the split: pre-split history halved, volume doubled
    np.testing.assert_allclose(w.hist[k, :, CLOSE], [51.5, 52, 52.5])
    np.testing.assert_allclose(w.hist[k, :, VOLUME], [2000, 2000, 2000])
    k = by_t[f.index[8]]  # t on the ex-date: earlier closes scaled by (1 - 0.54/54)
    np.testing.assert_allclose(w.hist[k, :, CLOSE], [53 * 0.99, 54 * 0.99, 53.5])
    k = by_t[f.index[7]]  # t before the ex-date: the dividend is unknown, history untouched
    np.testing.assert_allclose(w.hist[k, :, CLOSE], [52.5, 53, 54])


def test_split_boundaries_and_embargo():
    cal = pd.bdate_range("2020-01-01", periods=100)
    spec = SplitSpec(val_frac=0.2, test_frac=0.2, embargo=5)
    s = assign_splits(cal.values, cal, spec, lookahead=5)
    assert list(s[:55]) == ["train"] * 55 and list(s[55:60]) == [""] * 5
    assert list(s[60:75]) == ["val"] * 15 and list(s[75:80]) == [""] * 5 and list(s[80:]) == ["test"] * 20
    with pytest.raises(ValueError, match="embargo 3 < label look-ahead 5"):
        assign_splits(cal.values, cal, SplitSpec(embargo=3), lookahead=5)
    by_date = SplitSpec(val_start="2020-03-02", test_start="2020-04-01")
    s = assign_splits(cal.values, cal, by_date, lookahead=10)
    assert s[cal.searchsorted(pd.Timestamp("2020-03-02"))] == "val"
    assert s[cal.searchsorted(pd.Timestamp("2020-03-02")) - 11] == "train"
    assert s[cal.searchsorted(pd.Timestamp("2020-03-02")) - 1] == ""


@pytest.mark.parametrize("name", ["sample", "synthetic"])
def test_no_label_crosses_into_a_later_split(name):
    w = sample_windows() if name == "sample" else synthetic_windows()
    kw = {} if name == "sample" else {"n_tickers": 3, "n_days": 400, "seed": 0}
    cal = trading_calendar(load_source(name, **kw))
    h = w.y.shape[-1]
    pos = cal.searchsorted(pd.DatetimeIndex(w.date))
    for a, b in zip(SPLITS[:-1], SPLITS[1:], strict=True):
        last_label = pos[w.split == a].max() + h  # calendar position of the last label day of split a
        assert last_label < pos[w.split == b].min()
        assert pos[w.split == b].min() - pos[w.split == a].max() > h  # the embargo gap is real
    assert set(np.unique(w.split)) == set(SPLITS)


def test_sample_windows_shapes_and_cache():
    w = sample_windows()
    assert w.x.shape[1:] == (5, 90) and w.y.shape[1:] == (5, 10) and w.hist.shape[1:] == (90, 5)
    assert set(w.ticker) == {"SP500", "NASDAQ"}
    assert sample_windows() is w
    assert np.isfinite(w.x).all() and np.abs(w.x[:, VOLUME]).max() < 5  # zero-volume days were repaired
    frac = {s: (w.split == s).mean() for s in SPLITS}
    assert 0.68 < frac["train"] < 0.72 and 0.13 < frac["test"] < 0.17
    np.testing.assert_allclose(w.hist[:, -1, CLOSE] * np.exp(w.y[:, CLOSE, 0]), w.future[:, 0, CLOSE], rtol=1e-5)
