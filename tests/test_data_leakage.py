"""Point-in-time invariance for every source and context provider, and proof that the check
catches a deliberately introduced one-day look-ahead (``leak_days=1``)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from stockr1.data import build_windows, load_source
from stockr1.data.context import PointInTimeStore
from stockr1.data.leakage import check_context_invariance, check_windows_invariance, public_from
from stockr1.data.providers.arch_macro import arch_macro
from stockr1.data.providers.base import MacroObs
from stockr1.data.providers.market_wrap import SAMPLE_PROFILES, market_wrap_news
from stockr1.data.providers.synthetic import synthetic_context
from stockr1.data.quality import check_frames
from stockr1.data.splits import SplitSpec

SMALL = {"lookback": 30, "horizon": 5, "split": SplitSpec(0.2, 0.2)}


def _frames(source, tmp_path):
    if source == "sample":
        frames = {k: f.loc["2009":"2011"] for k, f in load_source("sample").items()}
    elif source == "synthetic":
        frames = load_source("synthetic", n_tickers=2, n_days=300, seed=3)
    else:  # csv: plain OHLCV files written here
        for k, f in load_source("synthetic", n_tickers=2, n_days=300, seed=4).items():
            f.rename(columns=str.title).rename_axis("Date").to_csv(tmp_path / f"{k}.csv")
        frames = load_source("csv", path=tmp_path)
    return check_frames(frames)[0]


@pytest.mark.parametrize("source", ["sample", "synthetic", "csv"])
def test_windows_invariant_to_data_after_t_and_leak_is_caught(source, tmp_path):
    frames = _frames(source, tmp_path)
    t = sorted(frames[next(iter(frames))].index)[150]
    assert check_windows_invariance(frames, t, **SMALL) == []
    caught = check_windows_invariance(frames, t, **SMALL, leak_days=1)
    assert any(f"{pd.Timestamp(t).date()}" in c for c in caught)


def test_deleting_data_after_t_keeps_earlier_windows_and_labels():
    frames = _frames("sample", None)
    t = pd.Timestamp("2010-06-30")
    kw = {"lookback": 30, "horizon": 5, "split": SplitSpec(val_start="2031-01-01", test_start="2032-01-01")}
    full = build_windows(frames, **kw)  # one split, so dropping the tail cannot move an embargo
    cut = build_windows({k: f.loc[:t] for k, f in frames.items()}, **kw)
    last = cut.date.max()
    a = full.select(full.date <= last)
    assert len(a) == len(cut) and (a.date == cut.date).all()
    for name in ("x", "y", "hist", "future"):  # labels too: they end by t
        np.testing.assert_array_equal(getattr(a, name), getattr(cut, name))


@pytest.mark.parametrize("source", ["sample", "synthetic", "csv", "back_adjusted"])
def test_price_block_invariant_to_data_after_t_and_leak_is_caught(source, tmp_path):
    """The context's price lines read the close of t and nothing later, in every frame."""
    from stockr1.data.leakage import check_price_block_invariance
    from stockr1.data.price_frame import mark_back_adjusted

    frames = _frames("synthetic" if source == "back_adjusted" else source, tmp_path)
    if source == "back_adjusted":
        frames = {k: mark_back_adjusted(f) for k, f in frames.items()}
    t = sorted(frames[next(iter(frames))].index)[150]
    assert check_price_block_invariance(lambda fr: PointInTimeStore(fr), frames, t, n_days=10) == []
    assert check_price_block_invariance(lambda fr: PointInTimeStore(fr, leak_days=1), frames, t, n_days=10)


def _sample_store(leak):
    def make(frames, macro):
        return PointInTimeStore(frames, macro=macro, news=market_wrap_news(frames, SAMPLE_PROFILES),
                                profiles=SAMPLE_PROFILES, leak_days=leak)

    return make


@pytest.mark.parametrize("t", ["2010-03-15", "2010-03-16", "2011-01-03"])
def test_sample_context_invariant_and_leak_is_caught(t):
    frames = _frames("sample", None)
    tables = {"macro": arch_macro()}
    assert check_context_invariance(_sample_store(0), frames, t, tables, n_days=5) == []
    assert check_context_invariance(_sample_store(1), frames, t, tables, n_days=5)


@pytest.mark.parametrize("provider", ["macro", "fundamentals", "news"])
def test_synthetic_providers_each_invariant_and_leak_is_caught(provider):
    frames = _frames("synthetic", None)
    macro, fundamentals, news, profiles = synthetic_context(frames, seed=3)
    tables = {"macro": macro, "fundamentals": fundamentals, "news": news}
    only = {provider: tables[provider]}
    cal = frames["SYN00"].index
    if provider == "fundamentals":  # t = a filing day, so a one-day leak reveals a statement
        filed = pd.DatetimeIndex(fundamentals["filed"])
        t = next(d for d in filed if d in cal and d > cal[40])
    else:
        t = cal[200]

    def store(leak):
        return lambda fr, **tb: PointInTimeStore(fr, profiles=profiles, leak_days=leak, **tb)

    assert check_context_invariance(store(0), frames, t, only, n_days=10) == []
    assert check_context_invariance(store(1), frames, t, only, n_days=10)
    # the synthetic text itself is generated from data up to t: regenerate it from perturbed frames

    def regen(fr, **_):
        m, f, n, p = synthetic_context(fr, seed=3)
        return PointInTimeStore(fr, profiles=p, **{provider: {"macro": m, "fundamentals": f, "news": n}[provider]})

    assert check_context_invariance(regen, frames, t, {}, n_days=10) == []


MONTHLY = ("core_cpi", "aaa", "baa", "default_spread", "brent")


def test_public_from_reads_the_period_not_the_declared_rule():
    """A monthly value is public no earlier than the end of its month, whatever its rule says."""
    brent = arch_macro()["brent"]
    wrong = replace(brent, release="same_day")  # stamped the 15th, 'released' on its stamp
    i = brent.values.index.get_loc(pd.Timestamp("2010-03-15"))
    assert public_from(wrong)[i] == pd.Timestamp("2010-03-31")
    assert public_from(brent)[i] >= pd.Timestamp("2010-04-01")
    daily = arch_macro()["wti"]
    assert (public_from(daily) == daily.values.index).all()  # a close is public at its own close


@pytest.mark.parametrize("name", MONTHLY)
def test_harness_catches_a_monthly_series_released_on_its_own_stamp(name):
    """Plant: one monthly series declared 'same_day' (e.g. Brent's March average seen from 03-16)."""
    frames = _frames("sample", None)
    macro = arch_macro()
    macro[name] = replace(macro[name], release="same_day")
    hits = [check_context_invariance(_sample_store(0), frames, t, {"macro": macro}, n_days=5)
            for t in ("2010-03-16", "2010-03-31")]
    assert any(hits)


class _PeriodLookupStore(PointInTimeStore):
    """Plant: macro looked up by observation period (period < t) instead of release date."""

    def macro_asof(self, t):
        out = {}
        for name, (rel, vals, periods) in self._macro.items():
            k = int(periods.searchsorted(pd.Timestamp(t), side="left")) - 1
            if k >= 0:
                s = self.macro[name]
                out[name] = MacroObs(name, s.label, float(vals[k]), s.unit, periods[k], pd.Timestamp(rel[k]))
        return out


def test_harness_catches_macro_looked_up_by_period():
    frames = _frames("sample", None)

    def make(fr, macro):
        return _PeriodLookupStore(fr, macro=macro, news=market_wrap_news(fr, SAMPLE_PROFILES), profiles=SAMPLE_PROFILES)

    assert check_context_invariance(make, frames, "2010-03-15", {"macro": arch_macro()}, n_days=5)
