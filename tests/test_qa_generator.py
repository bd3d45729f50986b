"""QA generator: hand-computed answers, no look-ahead, balance, splits, baselines, grading."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from llm.qa import (
    TEMPLATES,
    TEMPLATES_BY_KEY,
    MajorityBaseline,
    NewsItem,
    QAConfig,
    QAContext,
    QAGenerator,
    is_correct,
    load_items,
    normalize_answer,
    random_walk_answer,
    save_items,
)
from llm.qa.core import decision_at, realised_path
from stockr1.types import Windows

L, S = 30, 10


def make_windows(n: int = 240, seed: int = 0) -> Windows:
    """A random-walk price series cut into overlapping point-in-time windows (train/val/test)."""
    rng = np.random.default_rng(seed)
    days = n + L + S
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.012, days)))
    ohlcv = np.stack([close * 0.999, close * 1.006, close * 0.994, close, rng.uniform(1e6, 2e6, days)], 1)
    hist = np.stack([ohlcv[k : k + L] for k in range(n)])
    fut = np.stack([ohlcv[k + L : k + L + S] for k in range(n)])
    split = np.array(["train"] * (n // 2) + ["val"] * (n // 4) + ["test"] * (n - n // 2 - n // 4))
    dates = np.datetime64("2010-01-01") + np.arange(n).astype("timedelta64[D]")
    return Windows(
        ticker=np.array(["SP500"] * n), date=dates.astype("datetime64[ns]"),
        x=np.zeros((n, 5, L), np.float32), y=np.zeros((n, 5, S), np.float32),
        hist=hist, future=fut, split=split, context=np.array([""] * n, dtype=object),
    )


def context_fn(ticker: str, t: np.datetime64) -> QAContext:
    """Deterministic stand-in for the PointInTimeStore: depends on (ticker, t) only."""
    k = int((np.datetime64(t, "D") - np.datetime64("2010-01-01")).astype(int))
    sent = ["positive", "negative", "neutral", "negative", "positive"]
    news = tuple(NewsItem(str(np.datetime64(t, "D") - 1 - j), f"headline {k}-{j}", sent[(k + j) % 5])
                 for j in range(4 + k % 3))
    macro = {"3M": 1.0 + 0.01 * k, "2Y": 1.5, "10Y": 2.0 + 0.005 * (k % 50), "30Y": 3.0}
    return QAContext(macro=macro, macro_prev={"10Y": 2.1}, news=news)


def fixed_windows() -> Windows:
    """One window with a hand-written future: today's close 100."""
    w = make_windows(4)
    hist = w.hist.copy()
    hist[0, :, 3] = np.linspace(90, 100, L)  # closes rise to 100
    hist[0, :, 4] = 1000.0
    fut = w.future.copy()
    fut[0, :, 3] = [99, 97, 101, 104, 103, 98, 96, 100, 102, 95]
    fut[0, :, 4] = [900, 1300, 1000, 1000, 1600, 1000, 1000, 1000, 1000, 1000]
    return Windows(w.ticker, w.date, w.x, w.y, hist, fut, w.split, w.context)


@pytest.mark.parametrize(
    "key,params,expected",
    [
        ("fq_pct_change_paper", {"x": 3}, "1.00"),  # 101/100 - 1
        ("fq_pct_change_paper", {"x": 10}, "-5.00"),
        ("fq_mdd_paper", {"x": 3}, "3.00"),  # 100 -> 97
        ("fq_mdd_paper", {"x": 7}, "7.69"),  # peak 104 -> 96: 1 - 96/104
        ("fq_max_gain", {"x": 5}, "4.00"),
        ("fq_return_bucket", {"x": 5, "b": 2.0}, "above"),  # +3%
        ("ev_drop_paper", {"x": 3, "k": 2}, "Yes"),  # 97 < 98
        ("ev_drop_paper", {"x": 3, "k": 5}, "No"),
        ("ev_rise_paper", {"x": 5, "k": 3}, "Yes"),  # 104 > 103
        ("ev_rise_paper", {"x": 3, "k": 1}, "No"),  # 101 is not > 101
        ("ev_close_above", {"x": 7}, "No"),
        ("ev_volume_spike", {"x": 5, "m": 1.5}, "Yes"),  # 1600 > 1500
        ("ev_volume_spike", {"x": 3, "m": 1.5}, "No"),
        ("ms_strategy_paper", {"x": 10, "b": 2.0}, "scale-out"),
        ("ms_peak_timing", {"x": 10}, "middle"),  # 104 on day 4
        ("fd_macro_drawdown", {"x": 10, "k": 3}, "Yes"),  # 1 - 95/104 = 8.7%
        ("nw_negative_recover_paper", {"x": 3}, "Yes"),
    ],
)
def test_answers_match_hand_computation(key: str, params: dict, expected: str) -> None:
    w = fixed_windows()
    gen = QAGenerator(w, context_fn)
    assert gen.make_item(0, TEMPLATES_BY_KEY[key], params, "train", "q").answer == expected


def test_volatility_answer_by_hand() -> None:
    w = fixed_windows()
    d = decision_at(w, 0)
    fut_lr = np.diff(np.log([100, 99, 97, 101, 104, 103]))
    past_lr = np.diff(np.log(np.linspace(90, 100, L)[-6:]))
    expected = "higher" if fut_lr.std() > past_lr.std() else "lower"
    assert expected == "higher"
    t = TEMPLATES_BY_KEY["fd_spread_vol_paper"]
    assert t.answer(realised_path(w, 0), d, {"x": 5}) == expected


def test_questions_never_see_the_future() -> None:
    """Perturbing y/future leaves every question text unchanged; answers follow the new labels."""
    w = make_windows()
    gen = QAGenerator(w, context_fn)
    items, _ = gen.generate(QAConfig(n_train=100, n_val=20, n_test=40, seed=1))
    rng = np.random.default_rng(5)
    w2 = Windows(w.ticker, w.date, w.x, rng.normal(size=w.y.shape).astype(np.float32), w.hist,
                 w.future * np.exp(rng.normal(0, 0.05, w.future.shape)), w.split, w.context)
    gen2 = QAGenerator(w2, context_fn)
    changed = 0
    for it in items:
        t = TEMPLATES_BY_KEY[it.template]
        it2 = gen2.make_item(it.window, t, it.params, it.split, it.id)
        assert it2.question == it.question
        assert it2.answer == t.answer(realised_path(w2, it.window), gen2.decision(it.window), it.params)
        changed += it2.answer != it.answer
    assert changed > 0  # the labels did move with the future
    # every template renders from the decision alone, for all its parameters
    d = gen.decision(0)
    for t in TEMPLATES:
        if t.usable(d):
            for p in t.grid:
                assert t.render(d, p) == t.render(gen2.decision(0), p)


def test_balance_splits_and_roundtrip(tmp_path) -> None:
    w = make_windows()
    items, report = QAGenerator(w, context_fn).generate(QAConfig(n_train=300, n_val=50, n_test=100, seed=0))
    assert Counter(i.split for i in items) == {"train": 300, "val": 50, "test": 100}
    for it in items:
        assert w.split[it.window] == it.split  # split follows the data layer's labels
    train = [i for i in items if i.split == "train"]
    fam = Counter(i.family for i in train)
    assert set(fam) == {"forecast", "event", "fundamental", "news", "multi_signal"}
    assert max(fam.values()) - min(fam.values()) <= 1
    yn = [i for i in train if i.answer_type == "yes_no"]
    share = np.mean([i.answer == "Yes" for i in yn])
    assert 0.4 <= share <= 0.6, share
    assert len({(i.window, i.template, tuple(sorted(i.params.items()))) for i in items}) == len(items)
    assert load_items(save_items(items, tmp_path / "qa.jsonl")) == items


def test_no_context_skips_context_families() -> None:
    items, report = QAGenerator(make_windows()).generate(QAConfig(n_train=60, n_val=0, n_test=0))
    assert set(report.unavailable["train"]) == {"fundamental", "news"}
    assert len(items) == 60 and {i.family for i in items} == {"forecast", "event", "multi_signal"}


def test_baselines() -> None:
    w = fixed_windows()
    gen = QAGenerator(w, context_fn)
    drop = gen.make_item(0, TEMPLATES_BY_KEY["ev_drop_paper"], {"x": 3, "k": 2}, "test", "a")
    pct = gen.make_item(0, TEMPLATES_BY_KEY["fq_pct_change_paper"], {"x": 3}, "test", "b")
    assert random_walk_answer(drop, w) == "No" and random_walk_answer(pct, w) == "0.00"
    assert not is_correct(pct, "0.00") and is_correct(pct, "1.5")  # tolerance 0.35*sqrt(3)=0.61
    drop_train = dataclasses.replace(drop, split="train")  # the baseline fits on train items only
    maj = MajorityBaseline().fit([drop_train, drop_train, gen.make_item(0, TEMPLATES_BY_KEY["ev_drop_paper"],
                                                                        {"x": 3, "k": 5}, "train", "c")])
    assert maj.answer(drop) == "Yes"


def test_answer_normalisation() -> None:
    w = fixed_windows()
    gen = QAGenerator(w, context_fn)
    yn = gen.make_item(0, TEMPLATES_BY_KEY["ev_drop_paper"], {"x": 3, "k": 2}, "test", "a")
    ch = gen.make_item(0, TEMPLATES_BY_KEY["ms_strategy_paper"], {"x": 10, "b": 2.0}, "test", "b")
    num = gen.make_item(0, TEMPLATES_BY_KEY["fq_mdd_paper"], {"x": 3}, "test", "c")
    assert normalize_answer(yn, "Yes, it will") == "Yes" and normalize_answer(yn, "maybe") is None
    assert normalize_answer(ch, "I recommend scale-out.") == "scale-out"
    assert normalize_answer(ch, "scale-in or scale-out") is None
    assert normalize_answer(num, "about 2.9%") == "2.90" and is_correct(num, "2.9%")
    assert normalize_answer(num, "no idea") is None


def test_store_context_adapter_is_point_in_time() -> None:
    import pandas as pd

    from llm.qa.context import store_context
    from stockr1.data.context import synthetic_store
    from stockr1.data.sources import load_source

    frames = load_source("synthetic", n_tickers=2, n_days=300, seed=0)
    fn = store_context(synthetic_store(frames, seed=0))
    tk = sorted(frames)[0]
    t = frames[tk].index[200]
    ctx = fn(tk, t.to_datetime64())
    assert ctx.macro and ctx.macro_labels.keys() >= ctx.macro.keys()
    assert all(pd.Timestamp(n.date) < t for n in ctx.news)
