"""Each data-quality case produces its error or its counted repair, with ticker and date."""

import numpy as np
import pandas as pd
import pytest

from stockr1.data.quality import DataQualityError, check_frames


def _frame(n=10, start="2021-03-01"):
    idx = pd.bdate_range(start, periods=n, name="date")
    c = np.linspace(100, 110, n)
    return pd.DataFrame({"open": c, "high": c * 1.01, "low": c * 0.99, "close": c, "volume": np.full(n, 1e6)}, index=idx)


def _error(frame, kind, day):
    with pytest.raises(DataQualityError) as e:
        check_frames({"XYZ": frame})
    assert any(i.kind == kind and i.ticker == "XYZ" and i.date == day for i in e.value.issues)
    assert f"XYZ {day} {kind}" in str(e.value)


def test_clean_frame_passes_untouched():
    f = _frame()
    out, rep = check_frames({"XYZ": f})
    pd.testing.assert_frame_equal(out["XYZ"], f)
    assert rep.issues == []


def test_nan_rows_dropped_and_counted_partial_nan_is_error():
    f = _frame()
    f.iloc[3, :4] = np.nan
    out, rep = check_frames({"XYZ": f})
    assert len(out["XYZ"]) == 9 and rep.counts() == {"nan_row": 1}
    assert rep.issues[0].date == "2021-03-04"
    f = _frame()
    f.iloc[4, 1] = np.nan
    _error(f, "nan_price", "2021-03-05")


def test_nonpositive_and_high_below_low_are_errors():
    f = _frame()
    f.iloc[2, 3] = 0.0
    _error(f, "nonpositive_price", "2021-03-03")
    f = _frame()
    f.iloc[5, 1], f.iloc[5, 2] = 90.0, 95.0
    _error(f, "high_below_low", "2021-03-08")


def test_envelope_repaired():
    f = _frame()
    f.iloc[1, 1] = f.iloc[1, 3] * 0.995  # high below close
    out, rep = check_frames({"XYZ": f})
    assert rep.counts() == {"ohlc_envelope": 1}
    assert out["XYZ"].iloc[1]["high"] == f.iloc[1]["close"]


def test_duplicates():
    f = _frame()
    dup = pd.concat([f, f.iloc[[2]]]).sort_index()
    out, rep = check_frames({"XYZ": dup})
    assert rep.counts() == {"duplicate_date": 1} and len(out["XYZ"]) == 10 and out["XYZ"].index.is_unique
    bad = dup.copy()
    bad.iloc[3, 3] = 999.0  # the second copy of 2021-03-03 disagrees
    bad.iloc[3, 1] = 1000.0
    _error(bad, "duplicate_conflict", "2021-03-03")


def test_zero_and_nan_volume_carried_forward_and_counted():
    f = _frame()
    f.iloc[4, 4], f.iloc[5, 4] = 0.0, np.nan
    f.iloc[3, 4] = 2e6
    out, rep = check_frames({"XYZ": f})
    assert rep.counts() == {"nan_volume": 1, "zero_volume": 1}
    assert out["XYZ"]["volume"].iloc[4] == 2e6 and out["XYZ"]["volume"].iloc[5] == 2e6


def test_gaps_reported_not_holidays():
    f = _frame(20)
    f = f.drop(f.index[[3]])  # one missing weekday: a holiday, not reported
    _, rep = check_frames({"XYZ": f})
    assert rep.issues == []
    f = f.drop(f.index[[8, 9, 10]])
    _, rep = check_frames({"XYZ": f})
    assert rep.counts() == {"gap": 1} and "3 weekdays missing" in rep.issues[0].detail


def test_split_sized_jump_is_error_unless_recorded():
    f = _frame()
    f.iloc[6:, :4] /= 2.0  # unrecorded 2-for-1
    _error(f, "split_jump", "2021-03-09")
    _, rep = check_frames({"XYZ": f}, jump_policy="report")
    assert rep.counts() == {"split_jump": 1}
    f["splits"] = 0.0
    f.loc[f.index[6], "splits"] = 2.0
    _, rep = check_frames({"XYZ": f})
    assert rep.issues == []


def test_absent_channels_accepted_partly_missing_rejected():
    """A channel NaN on every day is absent (close-only stocks): kept NaN, never filled; a present
    channel with one NaN is still an error (prices) or a repair (volume)."""
    f = _frame()
    f[["open", "high", "low", "volume"]] = np.nan
    out, rep = check_frames({"XYZ": f})
    assert rep.issues == [] and out["XYZ"][["open", "high", "low", "volume"]].isna().all().all()
    pd.testing.assert_series_equal(out["XYZ"]["close"], f["close"])
    g = f.copy()
    g.iloc[3, 3] = np.nan  # the close missing on a close-only day: the row goes, counted
    out, rep = check_frames({"XYZ": g})
    assert rep.counts() == {"nan_row": 1} and len(out["XYZ"]) == 9
    g = f.copy()
    g.iloc[2, 1] = 105.0  # high present on one day only: a present channel, NaN elsewhere
    _error(g, "nan_price", "2021-03-01")
    g = _frame()
    g[["high", "low"]] = np.nan  # open + close present, high/low absent: open missing once is an error
    g.iloc[6, 0] = np.nan
    _error(g, "nan_price", "2021-03-09")
    g = _frame()
    g["close"] = np.nan
    _error(g, "no_close", "2021-03-01")
    g = f.copy()
    g.iloc[5, 4] = 2e6  # volume present on one day: present, so the others are repaired, not left NaN
    out, rep = check_frames({"XYZ": g})
    assert rep.counts() == {"nan_volume": 9} and (out["XYZ"]["volume"] == 2e6).all()
