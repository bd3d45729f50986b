"""The memorisation probe's transformation keeps every answer, label and reward and hides every name and date."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from rl.methods.trading_r1.labels import labels_for_windows
from stockr1.anonymise import Anonymiser
from stockr1.backtest import BacktestConfig, prices_from_windows, simulate, zscore_signals
from stockr1.data import load_source, sample_windows
from stockr1.data.context import sample_store
from stockr1.data.quality import check_frames
from stockr1.types import CLOSE, Forecast


@pytest.fixture(scope="module")
def sample():
    frames, _ = check_frames(load_source("sample"))
    store = sample_store(frames)
    names = {tk: [p.name, *p.keywords] for tk, p in store.profiles.items()}
    w = sample_windows(90, 10, context=True)
    return w, frames, names, Anonymiser.for_frames(frames, names)


def test_no_ticker_name_or_original_date_in_an_anonymised_context(sample):
    w, frames, names, an = sample
    rows = np.flatnonzero(w.split == "test")[::25]
    aw = an.windows(w.select(rows))
    hidden = [*frames, *(n for ns in names.values() for n in ns)]
    for orig, text, t in zip(w.context[rows], aw.context, w.date[rows], strict=True):
        assert "Nasdaq" in orig or "S&P" in orig  # the original names these things
        for name in hidden:
            assert name.lower() not in text.lower(), name
        assert str(pd.Timestamp(t).date()) not in text
        years = {int(y) for y in re.findall(r"\b(\d{4})-\d{2}-\d{2}\b", text)}
        assert years and min(years) > 2060  # every date written was shifted
        assert "TKR0" in text
    # a price level written in text follows the rescale; percentages do not
    i = int(rows[0])
    first = re.search(r"closed at ([\d,]+\.\d{2}) \(([-+]\d+\.\d{2})%", w.context[i])
    got = re.search(r"closed at ([\d,]+\.\d{2}) \(([-+]\d+\.\d{2})%", aw.context[0])
    assert first and got and got.group(2) == first.group(2)
    assert float(got.group(1).replace(",", "")) == pytest.approx(an.scale * float(first.group(1).replace(",", "")), abs=0.01)


def test_trading_r1_labels_are_identical(sample):
    w, frames, _, an = sample
    np.testing.assert_array_equal(labels_for_windows(an.windows(w), an.frames(frames)), labels_for_windows(w, frames))


def test_backtest_decisions_and_rewards_are_identical(sample):
    """The same forecast (rescaled with the prices) gives the same z-scores, sides, trades and metrics."""
    w, _, _, an = sample
    test = w.select(np.flatnonzero(w.split == "test"))
    at = an.windows(test)
    rng = np.random.default_rng(0)
    close = test.last_close[:, None] * np.exp(np.cumsum(rng.normal(0, 0.01, (len(test), 10)), axis=1))
    fc = Forecast(close=close, close_samples=close[:, None], high=close, low=close, volume=test.future[:, :, 4])
    afc = dataclasses.replace(fc, close=close * an.scale, close_samples=close[:, None] * an.scale,
                              high=close * an.scale, low=close * an.scale)
    z, az = zscore_signals(fc, test, BacktestConfig()), zscore_signals(afc, at, BacktestConfig())
    np.testing.assert_allclose(az, z, rtol=1e-9)
    cfg = BacktestConfig(holding=10)
    for tk in sorted(set(test.ticker.tolist())):
        idx = np.flatnonzero(test.ticker == tk)
        sides = pd.Series(np.sign(z[idx]).astype(int), pd.DatetimeIndex(test.date[idx])).sort_index()[::10]
        ref = simulate(sides, prices_from_windows(test, tk, cfg.holding), cfg)
        asides = pd.Series(sides.to_numpy(), an.date(sides.index))
        got = simulate(asides, prices_from_windows(at, an.ticker(tk), cfg.holding), cfg)
        assert [t.direction for t in got.trades] == [t.direction for t in ref.trades] and ref.trades
        np.testing.assert_allclose([t.net_return for t in got.trades], [t.net_return for t in ref.trades], rtol=1e-9)
        for k, v in ref.metrics.items():
            assert got.metrics[k] == pytest.approx(v, rel=1e-9, nan_ok=True), k
        np.testing.assert_allclose(got.equity.to_numpy(), ref.equity.to_numpy(), rtol=1e-12)
        # the decision days shift by whole weeks; the ``holding`` realised days after the last one are dated on
        # the calendar inferred from the decision days: the NYSE's for the real dates, weekdays for the shifted
        # ones (50 years on, the missing weekdays are no exchange's holidays); same count, same values
        n_dec = int((test.ticker == tk).sum())
        assert len(got.equity) == len(ref.equity) == n_dec + cfg.holding
        assert (got.equity.index[:n_dec] == an.date(ref.equity.index[:n_dec])).all()
    np.testing.assert_allclose(at.x, test.x)  # the log-return channels the TS encoder reads
    np.testing.assert_allclose(at.hist[..., CLOSE] / an.scale, test.hist[..., CLOSE])


def test_qa_answers_are_identical_and_questions_hide_names_and_dates():
    from llm.build import load_data
    from llm.qa import QAConfig, QAGenerator
    from llm.qa.prompt import user_message
    from tests.test_bench_qa_args import DATA

    w, ctx = load_data(DATA)
    frames, _ = check_frames(load_source("synthetic", n_tickers=2, n_days=400, seed=0))
    an = Anonymiser.for_frames(frames)
    back = {v: k for k, v in an.ids.items()}

    def actx(tk, t):  # the same point-in-time context, looked up under the original name and date
        return ctx(back[tk], pd.Timestamp(t) - pd.Timedelta(weeks=an.weeks))

    cfg = QAConfig(n_train=60, n_val=0, n_test=60, seed=0)
    items, _ = QAGenerator(w, ctx).generate(cfg)
    aitems, _ = QAGenerator(an.windows(w), actx).generate(cfg)
    assert [(i.template, i.window, i.answer) for i in aitems] == [(i.template, i.window, i.answer) for i in items]
    aw = an.windows(w)
    for it in items:  # the whole prompt: context, ticker / date line and question
        prompt = user_message(an.item(it), str(aw.context[it.window]))
        assert it.ticker.lower() not in prompt.lower() and it.date not in prompt
        assert not re.search(r"\b(19|20[0-5])\d-\d{2}-\d{2}\b", prompt)  # every date written was shifted
        assert an.item(it).answer == it.answer


def test_text_leaves_percentages_ratios_and_macro_dollars_alone():
    an = Anonymiser({"ABC": "TKR01"}, {"ABC": ["Abc Corp."]}, {"ABC": (90.0, 110.0)}, weeks=52, scale=0.5)
    s = "ABC (Abc Corp.) closed at 100.00 on 2020-01-06 (+1.50%); oil $95.00; spread +0.60 pp; ratio 1.09; 2019Q4"
    assert an.text(s, "ABC") == ("TKR01 (Company TKR01) closed at 50.00 on 2021-01-04 (+1.50%); oil $95.00; "
                                 "spread +0.60 pp; ratio 1.09; 2020Q4")
    with pytest.raises(KeyError, match="no neutral id for ticker 'XYZ'"):
        an.ticker("XYZ")


def test_rebased_windows_keep_their_frame_and_as_traded_ones_are_rescaled(sample):
    """In the rebased frame every close of t is 100: the probe keeps it (a rescaled 37 would be a level the
    policy never saw), in the arrays and in the text, and still rescales the as-traded windows beside them."""
    from stockr1.types import AS_OF_T, HIGH, LOW, OPEN, REBASED

    w, frames, names, _ = sample
    w = w.select(np.flatnonzero(w.split == "test")[::40])
    tk = str(w.ticker[0])
    reb = w.ticker == tk
    hist, future = w.hist.copy(), w.future.copy()
    c_t = hist[reb, -1, CLOSE][:, None, None]
    ohlc = [OPEN, HIGH, LOW, CLOSE]
    hist[np.ix_(reb, np.arange(hist.shape[1]), ohlc)] *= 100.0 / c_t
    future[np.ix_(reb, np.arange(future.shape[1]), ohlc)] *= 100.0 / c_t
    ctx = np.array([f"{tk} closed at 100.00 (+1.20%)" if r else str(c) for r, c in zip(reb, w.context, strict=True)],
                   dtype=object)
    w = dataclasses.replace(w, hist=hist, future=future, context=ctx, frame=np.where(reb, REBASED, AS_OF_T))
    an = Anonymiser.for_frames(frames, names, windows=w)
    assert an.rebased == {tk}
    aw = an.windows(w)
    np.testing.assert_allclose(aw.hist[reb, -1, CLOSE], 100.0)
    np.testing.assert_allclose(aw.future[reb], w.future[reb], equal_nan=True)
    np.testing.assert_allclose(aw.hist[~reb][..., CLOSE], an.scale * w.hist[~reb][..., CLOSE])
    assert all(f"{an.ticker(tk)} closed at 100.00 (+1.20%)" == c for c in aw.context[reb])
    assert Anonymiser.for_windows(w).rebased == {tk}
    # an anonymiser that does not know the frame would rescale the text but not the arrays: refused
    with pytest.raises(ValueError, match=rf"windows of \['{tk}'\] are in the rebased frame"):
        Anonymiser.for_frames(frames, names).windows(w)
