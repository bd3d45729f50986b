"""Point-in-time store: release lags, filing lags, news cut-off and matching, App. A.4 layout."""

import numpy as np
import pandas as pd
import pytest

from stockr1.data import sample_windows
from stockr1.data.context import PointInTimeStore
from stockr1.data.providers.base import MacroSeries, Profile


def _frames(start="2010-01-04", n=400, splits=None):
    idx = pd.bdate_range(start, periods=n, name="date")
    c = np.full(n, 100.0)
    f = pd.DataFrame({"open": c, "high": c, "low": c, "close": c, "volume": c}, index=idx)
    if splits:
        f["splits"] = 0.0
        for d, r in splits.items():
            f.loc[d, "splits"] = r
            f.loc[d:, ["open", "high", "low", "close"]] /= r
    return {"ABC": f}


def _monthly(values, start="2009-01-01"):
    return pd.Series(values, index=pd.date_range(start, periods=len(values), freq="MS"))


def test_cpi_release_lag_and_yoy():
    cpi = _monthly(np.arange(100.0, 100.0 + 16))  # Jan 2009 .. Apr 2010
    s = PointInTimeStore(_frames(), macro={"cpi": MacroSeries("cpi", "CPI", cpi, release="cpi", yoy=True),
                                           "lvl": MacroSeries("lvl", "CPI level", cpi, release="cpi")})
    assert s.macro_asof("2010-03-15")["lvl"].period == pd.Timestamp("2010-01-01")  # Feb released 03-15: not before
    assert s.macro_asof("2010-03-16")["lvl"].period == pd.Timestamp("2010-02-01")
    assert s.macro_asof("2010-02-01")["lvl"].value == 111.0  # Dec 2009: a month's CPI is unknown on its 1st
    assert s.macro_asof("2010-03-16")["cpi"].value == pytest.approx(100 * (113 / 101 - 1))  # Feb10 vs Feb09
    assert "cpi" not in s.macro_asof("2010-01-10")  # Nov 2009 has no Nov 2008 -> no YoY yet


def test_daily_strictly_before_and_month_end_rules():
    days = pd.bdate_range("2010-01-04", periods=30)
    daily = pd.Series(np.arange(30.0), index=days)
    aaa = _monthly([5.0, 6.0, 7.0], "2010-01-01")
    s = PointInTimeStore(_frames(), macro={"d": MacroSeries("d", "D", daily, "%"),
                                           "aaa": MacroSeries("aaa", "AAA", aaa, "%", "month_end")})
    m = s.macro_asof(days[10])
    assert m["d"].value == 9.0 and m["d"].released == days[9]
    assert s.macro_asof("2010-03-01")["aaa"].value == 5.0  # February's average is complete only after 02-28
    assert s.macro_asof("2010-03-02")["aaa"].value == 6.0


def test_fundamentals_published_before_t():
    base = {"ticker": "ABC", "revenue": 1e9}
    table = pd.DataFrame([{**base, "period_end": pd.Timestamp("2009-12-31"), "filed": pd.NaT},
                          {**base, "period_end": pd.Timestamp("2010-03-31"), "filed": pd.NaT, "revenue": 2e9},
                          {**base, "period_end": pd.Timestamp("2010-06-30"), "filed": pd.Timestamp("2010-07-20"), "revenue": 3e9}])
    s = PointInTimeStore(_frames(), fundamentals=table)
    assert s.fundamentals_asof("ABC", "2010-05-15").period_end == pd.Timestamp("2009-12-31")  # 03-31 + 45d = 05-15
    assert s.fundamentals_asof("ABC", "2010-05-17").items["revenue"] == 2e9
    assert s.fundamentals_asof("ABC", "2010-07-21").items["revenue"] == 3e9  # the filing date wins when known
    assert s.fundamentals_asof("ABC", "2010-02-14") is None  # 12-31 + 45d = 02-14, not strictly before


def test_news_cutoff_previous_close_and_strict_matching():
    prof = {"ON": Profile("ON Semiconductor Corporation")}
    frames = {"ON": _frames()["ABC"]}
    news = pd.DataFrame({
        "ticker": ["", "", "", "", ""],
        "time": pd.to_datetime(["2010-01-08 15:59", "2010-01-08 16:00", "2010-01-07 10:00", "2010-01-06 10:00",
                                "2010-01-05 10:00"]),
        "title": ["ON beats estimates", "ON Semiconductor raises guidance", "Stocks drift on low volume",
                  "ON Semiconductor names CFO", "Analysts on chips"],
        "summary": ["", "", "", "", ""], "sentiment": ["positive", "", "", "", ""],
    })  # fmt: skip
    s = PointInTimeStore(frames, news=news, profiles=prof)
    got = [i["title"] for i in s.news_before("ON", "2010-01-11")]  # Monday: cut at Friday 16:00
    assert got == ["ON beats estimates", "ON Semiconductor names CFO"]  # "on" in lower case is not the ticker
    assert [i["title"] for i in s.news_before("ON", "2010-01-11", n=1)] == ["ON beats estimates"]


def test_render_layout_and_ratios():
    f = pd.DataFrame([{"ticker": "ABC", "period_end": pd.Timestamp("2010-03-31"), "filed": pd.Timestamp("2010-04-25"),
                       "revenue": 5.77e9, "gross_profit": 2.29e9, "operating_income": 329.30e6, "total_assets": 36.40e9,
                       "total_liabilities": 14.96e9, "equity": 21.44e9}])
    s = PointInTimeStore(_frames(), macro={"y": MacroSeries("y", "US 10Y Treasury yield", pd.Series([4.38], index=[pd.Timestamp("2010-04-01")]), "%")},
                         fundamentals=f, profiles={"ABC": Profile("Abc, Inc.", "Makes things.")})
    text = s.render_context("ABC", "2010-05-03")
    lines = text.splitlines()
    # the price frame and the last close come right after the date (a flat 100 series: no change, no volatility)
    assert lines[:6] == ["Ticker: ABC", "Date: 2010-05-03", "Prices: as traded on 2010-05-03",
                         "Last close: 100.00; 5-session change: +0.00%; 20-session change: +0.00%; "
                         "10-session daily volatility: 0.00%", "Company: Abc, Inc. (ABC)", "Business Summary: Makes things."]
    assert "• US 10Y Treasury yield: 4.38% (as of 2010-04-01)" in lines
    assert "Fundamentals (Q1 2010, published 2010-04-25):" in lines
    for line in ["• revenue: 5.77B", "• operating income: 329.30M", "• gross margin: 39.69%", "• debt-to-assets: 0.41",
                 "• liabilities-to-equity: 0.70", "• asset turnover: 0.16"]:
        assert line in lines
    assert text.index("Macro Snapshot:") < text.index("Fundamentals") and "News:" not in text


def test_ohlcv_until_adjusts_only_with_past_splits():
    frames = _frames(splits={pd.Timestamp("2010-02-01"): 2.0})
    s = PointInTimeStore(frames)
    before = s.ohlcv_until("ABC", "2010-01-29")
    assert (before["close"] == 100.0).all() and before.index[-1] == pd.Timestamp("2010-01-29")
    after = s.ohlcv_until("ABC", "2010-02-05")
    assert (after["close"] == 50.0).all()


def test_sample_windows_carry_context():
    w = sample_windows(context=True)
    assert len(w.context) == len(w) and all(c.startswith("Ticker: ") for c in w.context[:: 500])
    i = int(np.flatnonzero((w.ticker == "SP500") & (w.date == np.datetime64("2008-10-15")))[0])
    assert "S&P 500 surges 11.6% to 1,003.35" in w.context[i]  # the 10-13 wrap; 10-14's is after the 10-14 close
    assert "2008-10-14:" not in w.context[i] and "[price-derived market wrap]" in w.context[i]


class FakeFred:
    """Stands in for fredapi.Fred: daily yields and ALFRED vintages of monthly series."""

    def get_series(self, sid, observation_start=None, observation_end=None):
        return pd.Series([4.0, 4.1, np.nan, 4.2], index=pd.bdate_range("2010-01-04", periods=4))

    def get_series_all_releases(self, sid):
        dates = pd.to_datetime(["2009-01-01", "2009-01-01", "2009-12-01", "2010-01-01", "2010-01-01"])
        rel = pd.to_datetime(["2009-02-13", "2009-06-01", "2010-01-15", "2010-02-12", "2010-03-01"])
        return pd.DataFrame({"realtime_start": rel, "date": dates, "value": [100.0, 999.0, 102.0, 103.0, 888.0]})


def test_fred_uses_first_release_dates_and_values():
    from stockr1.data.providers.fred import fred_macro

    macro = fred_macro(FakeFred())
    s = PointInTimeStore(_frames(), macro={"lvl": MacroSeries("lvl", "CPI", macro["cpilfesl"].values, release="explicit",
                                                              released=macro["cpilfesl"].released)})
    assert s.macro_asof("2010-02-12")["lvl"].value == 102.0  # Jan 2010 first released on 02-12: not before
    assert s.macro_asof("2010-02-13")["lvl"].value == 103.0  # the first release, not the 03-01 revision
    assert s.macro_asof("2010-03-02")["lvl"].value == 103.0
    yoy = PointInTimeStore(_frames(), macro={"cpi": macro["cpilfesl"]}).macro_asof("2010-02-13")["cpi"]
    assert yoy.value == pytest.approx(100 * (103 / 100 - 1))  # vs the first release of Jan 2009 (100, not 999)
    assert macro["dgs10"].values.index[-1] == pd.Timestamp("2010-01-07") and macro["dgs10"].values.notna().all()


# ---- offline macro timing: conservative for every month of the sample ----------------------------
ARCH_MONTHLY = ("core_cpi", "aaa", "baa", "default_spread", "brent")


def test_offline_cpi_never_seen_before_a_late_bls_release():
    """The September 2013 CPI came out on 2013-10-30 (delayed by the federal shutdown), not by the
    15th: a decision on 10-30 must still see August as the latest CPI."""
    from stockr1.data.providers.arch_macro import arch_macro

    s = PointInTimeStore(_frames("2013-01-02", 300), macro=arch_macro())
    assert s.macro_asof("2013-10-30")["core_cpi"].period < pd.Timestamp("2013-09-01")
    assert s.macro_asof("2013-10-16")["core_cpi"].period < pd.Timestamp("2013-09-01")


@pytest.mark.parametrize("name", ARCH_MONTHLY)
def test_offline_monthly_series_wait_a_full_month_after_their_period(name):
    """Every offline monthly value is public only after the last day of the month following its
    period (all BLS CPI, H.15 and EIA monthly publications of 1999-2018 came out within it)."""
    from stockr1.data.providers.arch_macro import arch_macro

    s = arch_macro()[name]
    rel = s.release_dates()
    month_after_end = pd.DatetimeIndex(s.values.index).to_period("M").to_timestamp() + pd.offsets.MonthBegin(2) \
        - pd.Timedelta(days=1)
    assert (rel >= month_after_end).all()
    store = PointInTimeStore(_frames("1999-01-04", 5200), macro={name: s})
    for t in pd.date_range("1999-03-01", "2018-11-30", freq="7D"):
        obs = store.macro_asof(t).get(name)
        if obs is not None:
            assert obs.period.to_period("M") <= t.to_period("M") - 2, (name, t)


class FakeAlfred:
    """fredapi.Fred stand-in: ALFRED vintages (a first release, then a revision) for any monthly id."""

    def __init__(self):
        self.asked: list[str] = []

    def get_series_all_releases(self, sid):
        self.asked.append(sid)
        months = pd.date_range("2008-01-01", "2011-12-01", freq="MS")
        base = {"CPILFESL": 200.0, "AAA": 5.0, "BAA": 6.5, "MCOILBRENTEU": 80.0}[sid]
        first = pd.DataFrame({"date": months, "realtime_start": months + pd.offsets.MonthBegin(1) + pd.Timedelta(days=17),
                              "value": base + np.arange(len(months)) * 0.01})
        revised = first.assign(realtime_start=first["realtime_start"] + pd.Timedelta(days=60), value=first["value"] + 7.0)
        return pd.concat([revised, first], ignore_index=True)  # unsorted, as a client may return it


def test_sample_macro_uses_alfred_first_releases_when_fred_is_configured():
    from stockr1.data.providers.arch_macro import arch_macro

    client = FakeAlfred()
    macro = arch_macro(client)
    assert sorted(client.asked) == ["AAA", "BAA", "CPILFESL", "MCOILBRENTEU"]
    s = PointInTimeStore(_frames("2010-01-04", 300), macro=macro)
    m = s.macro_asof("2010-03-18")  # Feb 2010 first released 03-18: not before
    assert m["aaa"].period == pd.Timestamp("2010-01-01") and m["aaa"].value == pytest.approx(5.0 + 24 * 0.01)
    m = s.macro_asof("2010-03-19")
    assert m["aaa"].period == pd.Timestamp("2010-02-01") and m["aaa"].value == pytest.approx(5.0 + 25 * 0.01)
    assert m["default_spread"].value == pytest.approx(1.5)  # first releases of both, not the +7 revisions
    assert m["brent"].value == pytest.approx(80.0 + 25 * 0.01)
    assert m["core_cpi"].value == pytest.approx(100 * ((200 + 0.25) / (200 + 0.13) - 1))
    assert m["wti"].label == arch_macro()["wti"].label  # daily closes stay the offline ones
    assert arch_macro()["aaa"].release != "explicit"  # no client, no key: offline rules


@pytest.mark.parametrize("source, days", [("fred", ("2010-01-07", "2010-02-12")), ("alfred_sample", ("2010-03-18",))])
def test_fred_providers_invariant_and_leak_is_caught(source, days):
    """The FRED/ALFRED providers under the invariance harness (values perturbed from their release
    on); a one-day store leak on a release day must be caught."""
    from stockr1.data.leakage import check_context_invariance
    from stockr1.data.providers.arch_macro import arch_macro
    from stockr1.data.providers.fred import fred_macro

    macro = fred_macro(FakeFred()) if source == "fred" else arch_macro(FakeAlfred())
    frames = _frames("2009-06-01", 300)
    for t in days:
        for leak, caught in ((0, False), (1, True)):
            def make(fr, macro, leak=leak):
                return PointInTimeStore(fr, macro=macro, leak_days=leak)

            assert bool(check_context_invariance(make, frames, t, {"macro": macro}, n_days=5)) == caught, (t, leak)
