"""One honest price frame per source (``stockr1.data.price_frame``).

- back-adjusted prices are rebased to 100 = the close of t, and applying a later adjustment factor to
  them (what a split or dividend after t does to a back-adjusted file) changes nothing a window, its
  context or its prompt shows at t; as-traded sources keep the levels of t (their later actions are
  already kept out by adjust.py);
- the frame survives every path a frame takes: source -> windows, a built dataset, the context store;
- the price lines are computed by hand; a policy that copies the prompt's last close into
  ``start_value`` gets it right on every source, because the action's target a* is in the same frame.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from stockr1.data import build_windows
from stockr1.data.context import PointInTimeStore
from stockr1.data.price_frame import BASE, describe, frame_kind, mark_back_adjusted, price_lines, rebase
from stockr1.types import CLOSE, REBASED, VOLUME


def _series(n: int = 260, seed: int = 0, start: str = "2010-01-04") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    idx = pd.bdate_range(start, periods=n, name="date")
    c = 40.0 * np.exp(np.cumsum(rng.normal(0.0, 0.015, n)))
    o = c * np.exp(rng.normal(0.0, 0.004, n))
    return pd.DataFrame({"open": o, "high": np.maximum(o, c) * 1.01, "low": np.minimum(o, c) * 0.99, "close": c,
                         "volume": rng.integers(1_000, 9_000, n).astype(float)}, index=idx)


def test_price_lines_by_hand() -> None:
    close = np.array([100.0, 101.0, 99.0, 102.0, 103.0, 104.0, 105.0])
    lines = price_lines(close, "as_of_t", "2020-01-10")
    assert lines[0] == "Prices: as traded on 2020-01-10"
    assert lines[1] == f"Last close: 105.00; 5-session change: {100 * (105 / 101 - 1):+.2f}%"  # +3.96%: no 20, no vol
    assert price_lines(np.arange(1.0, 13.0), REBASED, "2020-01-10")[0] == "Prices: rebased, 100 = the close of 2020-01-10"
    vol = np.std(np.diff(np.log(np.arange(2.0, 13.0))))
    assert price_lines(np.arange(1.0, 13.0), REBASED, "d")[1].endswith(f"10-session daily volatility: {100 * vol:.2f}%")
    with pytest.raises(ValueError, match="unknown price frame"):
        describe("levels", "2020-01-10")


def test_rebase_keeps_volume_and_sets_the_close_of_t_to_100() -> None:
    p = np.array([[[10.0, 11.0, 9.0, 10.0, 500.0], [20.0, 22.0, 18.0, 20.0, 700.0], [30.0, 33.0, 27.0, 40.0, 900.0]]])
    out = rebase(p, 1)
    np.testing.assert_allclose(out[0, :, :VOLUME], p[0, :, :VOLUME] * 5.0)  # 100 / close of row 1 (20)
    np.testing.assert_array_equal(out[..., VOLUME], p[..., VOLUME])
    assert rebase(p)[0, -1, CLOSE] == BASE


def test_a_back_adjusted_frame_with_actions_is_refused() -> None:
    f = mark_back_adjusted(_series().assign(splits=0.0))
    f.iloc[100, f.columns.get_loc("splits")] = 2.0
    with pytest.raises(ValueError, match="back-adjusted frame cannot also carry corporate actions"):
        frame_kind(f)


def test_the_last_rows_equal_the_tail_of_the_history_when_the_slice_opens_on_a_dividend() -> None:
    """``ohlcv_until(last=k)`` reads only k rows; when the first of them is an ex-dividend day the dividend
    (which adjusts only earlier closes) must neither raise nor change any value: the slice is the tail
    of the full history in the frame at t."""
    f = _series()
    f["dividends"], f["splits"] = 0.0, 0.0
    t = f.index[150]
    f.loc[f.index[130], "dividends"] = 0.8   # 21 rows up to t start here
    f.loc[f.index[140], "dividends"] = 0.5   # inside the slice: must adjust the rows before it
    store = PointInTimeStore({"X": f})
    full = store.ohlcv_until("X", t)
    tail = store.ohlcv_until("X", t, last=21)
    assert tail.index[0] == f.index[130] and len(tail) == 21
    np.testing.assert_allclose(tail[["open", "close"]].to_numpy(), full[["open", "close"]].iloc[-21:].to_numpy(),
                               rtol=1e-12)
    # the dividend inside the slice did adjust: the close before its ex-day is below the raw close
    assert tail["close"].iloc[9] < f["close"].iloc[139]


@pytest.mark.parametrize("back_adjusted", [True, False])
def test_a_later_adjustment_changes_nothing_at_t(back_adjusted: bool) -> None:
    """A split or dividend on day D rescales a back-adjusted file's every price before D; an as-traded
    file records it as an action instead. Either way every window with t < D shows the same prices,
    returns, context and price lines."""
    f = _series()
    d = f.index[200]
    later = f.copy()
    if back_adjusted:
        later.loc[: d - pd.Timedelta(days=1), ["open", "high", "low", "close"]] *= 0.5  # a 2-for-1 on D
        f, later = mark_back_adjusted(f), mark_back_adjusted(later)
    else:
        later.loc[d:, ["open", "high", "low", "close"]] /= 2.0
        later["splits"] = 0.0
        later.loc[d, "splits"] = 2.0
    a = build_windows({"X": f}, lookback=60, horizon=5)
    b = build_windows({"X": later}, lookback=60, horizon=5)
    before = a.date < np.datetime64(d)
    assert before.sum() > 50 and (a.frame == (REBASED if back_adjusted else "as_of_t")).all()
    np.testing.assert_allclose(b.hist[before], a.hist[before], rtol=1e-12)
    np.testing.assert_allclose(b.x[before], a.x[before], rtol=1e-5, atol=1e-7)
    if back_adjusted:
        np.testing.assert_allclose(a.hist[:, -1, CLOSE], BASE)
    else:  # as traded: the close of t is the close a trader saw
        np.testing.assert_allclose(a.hist[:, -1, CLOSE], f["close"].loc[pd.DatetimeIndex(a.date)].to_numpy())
    sa, sb = PointInTimeStore({"X": f}), PointInTimeStore({"X": later})
    for t in pd.DatetimeIndex(a.date[before])[::10]:
        assert sa.render_context("X", t) == sb.render_context("X", t)
        np.testing.assert_allclose(sb.ohlcv_until("X", t)[["open", "close"]].to_numpy(),
                                   sa.ohlcv_until("X", t)[["open", "close"]].to_numpy(), rtol=1e-12)


def test_the_frame_survives_a_built_dataset(tmp_path) -> None:
    from stockr1.data import load_frames, load_windows
    from stockr1.data.build import BuildConfig, build_dataset

    src = tmp_path / "csv"
    src.mkdir()
    _series(seed=1).rename_axis("Date").reset_index().to_csv(src / "ADJ.csv", index=False)
    man = build_dataset(BuildConfig(source="csv", path=str(src), price_basis="back_adjusted", lookback=60,
                                    horizon=5), tmp_path / "ds")
    assert man["summary"]["price_frames"] == {"ADJ": REBASED}
    w = load_windows(tmp_path / "ds")
    assert (w.frame == REBASED).all()
    np.testing.assert_allclose(w.hist[:, -1, CLOSE], BASE)
    assert frame_kind(load_frames(tmp_path / "ds")["ADJ"]) == REBASED
    assert "Prices: rebased, 100 = the close of" in w.context[0] and "Last close: 100.00" in w.context[0]


def _prompt_close(text: str) -> float:
    return float(re.search(r"Last close: ([0-9.]+);", text).group(1))


@pytest.mark.parametrize("source", ["sample", "synthetic", "csv", "back_adjusted_csv", "stocks"])
def test_copying_the_prompts_last_close_gets_start_value_right(source: str, tmp_path) -> None:
    """The action's price fields are scored against a* = g(realised future), whose start is the window's
    close of t: in the frame the prompt states, so reading the prompt is enough."""
    from forecast_action.derive import ActionThresholds, derive_actions
    from stockr1.data import load_run_data
    from stockr1.data.build import BuildConfig, build_dataset
    from stockr1.types import train_only

    if source in ("sample", "synthetic"):
        w = load_run_data({"source": source}).windows
    elif source == "stocks":  # two names and a year of the offline stocks (rebased) beside the S&P 500 (as traded)
        build_dataset(BuildConfig(source="universe", tickers=("AAPL", "KO", "SP500"), start="2012-03-01",
                                  end="2013-03-01", lookback=60, horizon=5), tmp_path / "ds")
        w = load_run_data({"source": "dataset", "path": str(tmp_path / "ds"), "lookback": 60, "horizon": 5}).windows
        assert set(w.frame[w.ticker == "SP500"]) == {"as_of_t"} and set(w.frame[w.ticker != "SP500"]) == {REBASED}
    else:
        src = tmp_path / "csv"
        src.mkdir()
        _series(seed=2).rename_axis("Date").reset_index().to_csv(src / "S.csv", index=False)
        basis = "back_adjusted" if source == "back_adjusted_csv" else "as_traded"
        build_dataset(BuildConfig(source="csv", path=str(src), price_basis=basis, lookback=60, horizon=5,
                                  context=True), tmp_path / "ds")
        w = load_run_data({"source": "dataset", "path": str(tmp_path / "ds"), "lookback": 60, "horizon": 5}).windows
    th = ActionThresholds.fit(train_only(w))
    rows = np.linspace(0, len(w) - 1, 25).astype(int)
    targets = derive_actions(w.future[rows, :, CLOSE], w.last_close[rows], th)
    for i, target in zip(rows, targets, strict=True):  # the prompt's 2 decimals: within 0.005 of a*
        assert abs(_prompt_close(str(w.context[i])) - target.start_value) <= 0.005 + 1e-9


def test_the_offline_stocks_are_rebased_and_a_later_split_changes_nothing_at_t() -> None:
    """skfolio's closes are back-adjusted: a split after t rescales every earlier close of the file. The
    stock source's windows (rebased) and context do not move; the index (never adjusted) stays as traded."""
    from stockr1.data.sources import load_source

    frames = load_source("stocks", tickers=["AAPL", "SPX"])
    assert frame_kind(frames["AAPL"]) == REBASED and frame_kind(frames["SPX"]) == "as_of_t"
    aapl = frames["AAPL"].loc["2014":"2016"]
    d = pd.Timestamp("2016-06-01")
    later = aapl.copy()
    later.loc[: d - pd.Timedelta(days=1), "close"] *= 1 / 7  # what a 7-for-1 on D does to a back-adjusted file
    a = build_windows({"AAPL": mark_back_adjusted(aapl)}, lookback=60, horizon=5)
    b = build_windows({"AAPL": mark_back_adjusted(later)}, lookback=60, horizon=5)
    before = a.date < np.datetime64(d)
    np.testing.assert_allclose(b.hist[before][..., CLOSE], a.hist[before][..., CLOSE], rtol=1e-12)
    np.testing.assert_allclose(a.hist[:, -1, CLOSE], BASE)
    t = pd.Timestamp(a.date[before][-1])
    assert PointInTimeStore({"AAPL": mark_back_adjusted(aapl)}).render_context("AAPL", t) == \
        PointInTimeStore({"AAPL": mark_back_adjusted(later)}).render_context("AAPL", t)
