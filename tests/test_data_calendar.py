"""Trading days (``stockr1.data.calendar``): future days are the exchange's sessions, hand-checked on
the NYSE's 2013 holidays; an unknown exchange dates on weekdays and says so; the exchange is inferred from
a series' own missing weekdays; a forecast at t does not know the unscheduled closures after t, realised
days do; the sources declare their exchanges."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from stockr1.data import load_source
from stockr1.data.calendar import (
    UNKNOWN,
    TradingCalendar,
    calendar_for,
    calendars_for,
    check_mic,
    infer_exchange,
    sessions,
)
from stockr1.data.sources import source_exchanges


@pytest.fixture(scope="module")
def sample() -> dict[str, pd.DataFrame]:
    return load_source("sample")


def _days(*iso: str) -> list[pd.Timestamp]:
    return [pd.Timestamp(d) for d in iso]


@pytest.mark.parametrize("mic", ["XNYS", "XNAS"])
def test_nyse_and_nasdaq_skip_martin_luther_king_day_and_good_friday(mic: str) -> None:
    cal = TradingCalendar(mic)
    # Friday 2013-01-18, then Monday 2013-01-21 (MLK day, closed)
    assert list(cal.days_after(pd.Timestamp("2013-01-18"), 3)) == _days("2013-01-22", "2013-01-23", "2013-01-24")
    # Friday 2013-03-22, the week of Good Friday 2013-03-29 (closed); Easter Monday is open in New York
    assert list(cal.days_after(pd.Timestamp("2013-03-22"), 6)) == _days(
        "2013-03-25", "2013-03-26", "2013-03-27", "2013-03-28", "2013-04-01", "2013-04-02")
    assert cal.label == mic


def test_unknown_exchange_dates_on_weekdays_and_says_so() -> None:
    cal = TradingCalendar()
    assert list(cal.days_after(pd.Timestamp("2013-01-18"), 3)) == _days("2013-01-21", "2013-01-22", "2013-01-23")
    assert cal.label == f"weekdays ({UNKNOWN})" and "--exchange MIC" in cal.label
    assert calendar_for(pd.bdate_range("2012-01-02", "2013-01-18"), "weekdays").label == "weekdays (requested)"


def test_unscheduled_closures_are_unknown_to_a_forecast_but_label_realised_days() -> None:
    """Hurricane Sandy closed the NYSE on 2012-10-29/30 with a day's notice; a forecast made at the close of
    Friday 2012-10-26 could not know it, the realised days after it were 10-31 and 11-01."""
    cal = TradingCalendar("XNYS")
    last = pd.Timestamp("2012-10-26")
    assert list(cal.days_after(last, 2)) == _days("2012-10-29", "2012-10-30")
    assert list(cal.days_after(last, 2, realised=True)) == _days("2012-10-31", "2012-11-01")
    # a closure dated on or before t is history at t: sessions of the past keep it
    assert pd.Timestamp("2018-12-05") not in sessions("XNYS", pd.Timestamp("2018-12-01"), pd.Timestamp("2018-12-31"))


def test_the_sample_indices_are_inferred_as_nyse_and_a_weekday_complete_series_as_unknown(sample) -> None:
    frames = sample
    assert infer_exchange(frames["SP500"].index) == "XNYS"
    assert calendar_for(frames["SP500"].index).label == "XNYS"
    weekday_complete = load_source("synthetic", n_tickers=1, n_days=800)["SYN00"].index
    assert infer_exchange(weekday_complete) is None
    assert calendar_for(weekday_complete).label == f"weekdays ({UNKNOWN})"
    # one missing weekday that is no exchange's holiday pattern is not enough either
    assert infer_exchange(weekday_complete.delete(400)) is None


def test_inference_tells_london_from_new_york() -> None:
    weekdays = pd.bdate_range("2016-01-04", "2019-06-28")
    london = weekdays[weekdays.isin(sessions("XLON", weekdays[0], weekdays[-1]))]
    assert len(london) < len(weekdays) - 20  # Easter Monday, bank holidays, Boxing Day ...
    assert infer_exchange(london) == "XLON"
    # NYSE data with the 2018-12-05 closure (an ad hoc one) is still the NYSE
    ny = weekdays[weekdays.isin(sessions("XNYS", weekdays[0], weekdays[-1]))]
    assert pd.Timestamp("2018-12-05") not in ny and infer_exchange(ny) == "XNYS"


def test_declared_exchange_beats_inference_and_an_explicit_mic_beats_both(sample) -> None:
    frames = sample
    declared = source_exchanges("sample", list(frames))
    assert declared == {"SP500": "XNYS", "NASDAQ": "XNAS"}
    cals = calendars_for(frames, "auto", declared)
    assert cals["NASDAQ"].label == "XNAS" and cals["SP500"].label == "XNYS"  # XNAS declared, not inferred XNYS
    assert calendars_for(frames, {"SP500": "XLON"}, declared)["SP500"].label == "XLON"
    assert source_exchanges("csv", ["ACME"]) == {"ACME": None}


def test_bad_mic_and_a_date_before_the_calendar_are_clear() -> None:
    with pytest.raises(ValueError, match="unknown exchange 'NOPE'"):
        calendar_for(pd.bdate_range("2020-01-01", periods=5), "NOPE")
    assert check_mic("xnys") == "XNYS"
    early = calendar_for(pd.bdate_range("1990-01-02", periods=20), "XTKS")  # XTKS starts in 1997
    assert early.mic is None and early.label.startswith("weekdays (XTKS calendar does not cover 1990-01-29")


def test_yfinance_records_the_exchange_yahoo_reports(tmp_path) -> None:
    from stockr1.data.sources.yfinance import fetch

    def download(tk: str, start: str, end: str) -> pd.DataFrame:
        idx = pd.bdate_range(start, periods=5, tz="America/New_York")
        frame = pd.DataFrame({"Open": 1.0, "High": 1.0, "Low": 1.0, "Close": 1.0, "Volume": 1.0}, index=idx)
        frame.attrs["exchange"] = {"AAA": "NMS", "BBB": "NYQ", "CCC": "XYZ"}[tk]
        return frame

    fetch(["AAA", "BBB", "CCC"], tmp_path, "2020-01-01", "2020-02-01", downloader=download, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["AAA"]["exchange"] == "NMS" and not pd.read_parquet(tmp_path / "AAA.parquet").attrs
    got = source_exchanges("yfinance", ["AAA", "BBB", "CCC", "DDD"], cache_dir=tmp_path)
    assert got == {"AAA": "XNAS", "BBB": "XNYS", "CCC": None, "DDD": None}
