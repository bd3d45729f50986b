"""The real QA context adapter (``llm.qa.context.store_context``) over real stores, under the data
layer's invariance harness: perturb everything a decision at t may not see (prices after t for the
windows; prices from t-1, macro public from t, statements published from t, news from the close of
t-1 for the store), then require the same QAContext and the same text for every template and every
parameter on each of the last decision days <= t. A store with a one-day look-ahead must fail. The
cases: the sample's store, a synthetic one, and one read back from a built dataset."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llm.qa import TEMPLATES, TEMPLATES_BY_KEY
from llm.qa.context import store_context
from llm.qa.core import decision_at
from stockr1.data import BuildConfig, build_dataset, build_windows, load_frames, load_source, load_store
from stockr1.data.context import PointInTimeStore
from stockr1.data.leakage import check_context_invariance, perturb_context_inputs, perturb_frames
from stockr1.data.providers.arch_macro import arch_macro
from stockr1.data.providers.market_wrap import SAMPLE_PROFILES, market_wrap_news
from stockr1.data.providers.synthetic import synthetic_context
from stockr1.data.quality import check_frames
from stockr1.data.splits import SplitSpec

KW = {"lookback": 30, "horizon": 10, "split": SplitSpec(val_start="2031-01-01", test_start="2032-01-01")}


def _sample(leak: int = 0):
    frames = check_frames({k: f.loc["2009":"2011"] for k, f in load_source("sample").items()})[0]

    def make(fr, macro):
        return PointInTimeStore(fr, macro=macro, news=market_wrap_news(fr, SAMPLE_PROFILES), profiles=SAMPLE_PROFILES,
                                leak_days=leak)

    return frames, make, {"macro": arch_macro()}


def _synthetic(leak: int = 0):
    frames = check_frames(load_source("synthetic", n_tickers=2, n_days=300, seed=3))[0]
    macro, fundamentals, news, profiles = synthetic_context(frames, seed=3)

    def make(fr, **tables):
        return PointInTimeStore(fr, profiles=profiles, leak_days=leak, **tables)

    return frames, make, {"macro": macro, "fundamentals": fundamentals, "news": news}


@functools.lru_cache(maxsize=1)
def _dataset_store():
    """The store of a built dataset, read back from its files (``stockr1.data.load_store``)."""
    out = Path(tempfile.mkdtemp(prefix="stockr1-pit-"))
    build_dataset(BuildConfig(source="synthetic", n_days=300, seed=5, lookback=30, horizon=10), out)
    return load_store(out, load_frames(out))


def _dataset(leak: int = 0):
    st = _dataset_store()

    def make(fr, **tables):
        return PointInTimeStore(fr, profiles=st.profiles, filing_lag_days=st.filing_lag_days, leak_days=leak, **tables)

    return st.frames, make, {"macro": st.macro, "fundamentals": st.fundamentals, "news": st.news}


CASES = {"sample": (_sample, ["2009-03-10", "2010-03-16", "2010-04-01", "2011-01-03"]),  # 2009-03-10: negative news
         "synthetic": (_synthetic, [200, 230]),
         "dataset": (_dataset, [200, 260])}  # a `stockr1 data build` output, as `data: {source: dataset}` reads it


def _t(frames, t) -> pd.Timestamp:
    return frames[sorted(frames)[0]].index[t] if isinstance(t, int) else pd.Timestamp(t)


def qa_view(store, ticker, d):
    return store_context(store)(ticker, d.to_datetime64())


def all_questions(windows, store, t, n_days: int) -> dict[tuple, str]:
    """Every usable template x every grid parameter, rendered for the last ``n_days`` windows <= t
    of each ticker, with the context the real adapter gives for that day."""
    fn = store_context(store)
    out = {}
    for tk in sorted(set(windows.ticker.tolist())):
        rows = np.flatnonzero((windows.ticker == tk) & (windows.date <= t.to_datetime64()))[-n_days:]
        for i in rows:
            d = decision_at(windows, int(i), fn(tk, windows.date[i]))
            for tpl in TEMPLATES:
                if tpl.usable(d):
                    for p in tpl.grid:
                        out[(tk, str(windows.date[i])[:10], tpl.key, tuple(sorted(p.items())))] = tpl.render(d, p)
    return out


def test_the_cases_render_every_template():
    """So that 'every question' is literal: each template is usable on some tested day."""
    seen = set()
    for make_case, days in CASES.values():
        frames, make, tables = make_case(0)
        w, store = build_windows(frames, **KW), make(frames, **tables)
        for t in days:
            seen |= {k[2] for k in all_questions(w, store, _t(frames, t), 5)}
    assert seen == set(TEMPLATES_BY_KEY)


def question_mismatches(case: str, t, leak: int = 0, n_days: int = 5) -> list[tuple]:
    frames, make, tables = CASES[case][0](leak)
    t = _t(frames, t)
    base_store = make(frames, **tables)
    pert_frames, pert_tables = perturb_context_inputs(frames, t, tables, base_store.filing_lag_days)
    w_base = build_windows(frames, **KW)
    w_pert = build_windows(perturb_frames(frames, t), **KW)
    a = all_questions(w_base, base_store, t, n_days)
    b = all_questions(w_pert, make(pert_frames, **pert_tables), t, n_days)
    assert len(a) > 100
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))  # a template usable on one side only counts


@pytest.mark.parametrize("case", CASES)
def test_real_adapter_context_is_point_in_time(case):
    make_case, days = CASES[case]
    for t in days:
        frames, make, tables = make_case(0)
        assert check_context_invariance(make, frames, _t(frames, t), tables, n_days=5, view=qa_view) == []
        frames, leaky, tables = make_case(1)
        assert check_context_invariance(leaky, frames, _t(frames, t), tables, n_days=5, view=qa_view), t


@pytest.mark.parametrize("case", CASES)
def test_every_question_text_is_point_in_time(case):
    for t in CASES[case][1]:
        assert question_mismatches(case, t) == []
    assert question_mismatches(case, CASES[case][1][0], leak=1)  # the check can fail
