"""Trading-R1 Algorithm 1 labels against an independent loop implementation and hand cases."""

import statistics

import numpy as np
import pandas as pd
import pytest

from rl.methods.trading_r1 import labels as L


def _prices(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.Series(100 * np.exp(np.cumsum(rng.normal(0.0005, 0.01, n))), index=pd.bdate_range("2020-01-01", periods=n))


def _ema_loop(p: list[float], span: int) -> list[float]:
    """pandas ewm(adjust=True): weighted mean with weights (1-a)^i, a = 2/(span+1)."""
    a = 2 / (span + 1)
    return [sum((1 - a) ** i * p[t - i] for i in range(t + 1)) / sum((1 - a) ** i for i in range(t + 1))
            for t in range(len(p))]


def test_literal_algorithm_matches_loop_implementation():
    p = _prices()
    ema = _ema_loop(p.tolist(), 3)
    w = L.weighted_signal(p, forward=False)
    for u in (40, 77, 119):
        total = 0.0
        for tau, wt in ((3, 0.3), (7, 0.5), (15, 0.2)):
            r = [(ema[k] - ema[k - tau]) / ema[k - tau] for k in range(u - 19, u + 1)]
            total += wt * r[-1] / statistics.stdev(r)
        assert w.iloc[u] == pytest.approx(total, rel=1e-10)
    # defined only once R_15 has 20 values: first valid index 15 + 19 = 34
    assert w.iloc[:34].isna().all() and not np.isnan(w.iloc[34])


def test_forward_alignment_uses_the_move_after_t():
    p = _prices()
    lit, fwd = L.weighted_signal(p, forward=False), L.weighted_signal(p, forward=True)
    t = 50
    # the forward value is the weighted sum of each literal S_tau read at t + tau
    ema = p.ewm(span=3).mean()
    expect = 0.0
    for tau, wt in ((3, 0.3), (7, 0.5), (15, 0.2)):
        r = (ema - ema.shift(tau)) / ema.shift(tau)
        expect += wt * (r / r.rolling(20).std()).iloc[t + tau]
    assert fwd.iloc[t] == pytest.approx(expect)
    assert fwd.iloc[t] != pytest.approx(lit.iloc[t])
    # causality of the label: prices after t+15 cannot change it, a price inside (t, t+15] does
    q = p.copy()
    q.iloc[t + 16:] *= 1.5
    assert L.weighted_signal(q).iloc[t] == pytest.approx(fwd.iloc[t])
    q = p.copy()
    q.iloc[t + 5] *= 1.05
    assert L.weighted_signal(q).iloc[t] != pytest.approx(fwd.iloc[t])
    assert fwd.iloc[-15:].isna().all()  # no 15-day future, no label


def test_class_assignment_boundaries():
    thr = np.array([-2.0, -1.0, 1.0, 2.0])
    x = pd.Series([-3.0, -2.0, -1.5, -1.0, 0.0, 1.0, 1.9, 2.0, 5.0, np.nan])
    got = L.assign_classes(x, thr).tolist()
    assert got == [0, 1, 1, 2, 2, 3, 3, 4, 4, -1]
    assert [L.ACTIONS[i] for i in got[:3]] == ["STRONG SELL", "SELL", "SELL"]


def test_thresholds_fit_on_train_only_and_match_quantiles():
    p = _prices(n=3000, seed=1)
    cut = p.index[2000]
    classes, thr = L.label_series(p, train_end=cut)
    w = L.weighted_signal(p)
    np.testing.assert_allclose(thr, w[w.index <= cut].dropna().quantile([0.03, 0.15, 0.53, 0.85]).to_numpy())
    dist = L.class_distribution(classes[classes.index <= cut])
    np.testing.assert_allclose(dist, L.PAPER_DISTRIBUTION, atol=0.005)
    q = p.copy()
    q.iloc[2100:] *= np.linspace(1, 3, len(q) - 2100)  # a test-period rally must not move thresholds
    _, thr2 = L.label_series(q, train_end=cut)
    np.testing.assert_allclose(thr2, thr)
    with pytest.raises(ValueError, match="no valid signal"):
        L.fit_thresholds(pd.Series([np.nan, np.nan]))


# ---- no label reads prices of a later split ------------------------------------------------------
def _lookahead_by_perturbation(cfg: L.LabelConfig) -> int:
    """The look-ahead measured, not read from the config: the smallest k such that prices after t+k
    never change the label of t."""
    p = _prices(n=200, seed=2)
    t = 80
    base = L.weighted_signal(p, cfg).iloc[t]
    for k in range(60):
        q = p.copy()
        q.iloc[t + k + 1:] *= 1.3
        if L.weighted_signal(q, cfg).iloc[t] == pytest.approx(base, rel=1e-12):
            return k
    raise AssertionError("label depends on the whole future")


@pytest.mark.parametrize("cfg", [L.LabelConfig(), L.LabelConfig(horizons=(3, 7, 20)),
                                 L.LabelConfig(horizons=(2, 5), weights=(0.5, 0.5))])
def test_label_lookahead_is_computed_from_the_config(cfg):
    assert L.label_lookahead(cfg) == _lookahead_by_perturbation(cfg)


def _sample():
    from stockr1.data import load_source, sample_windows

    return sample_windows(), load_source("sample")


def _label_end_days(windows, frames, lookahead: int) -> np.ndarray:
    """The last price day each window's label reads (NaT past the end of the ticker's series)."""
    out = np.full(len(windows), np.datetime64("NaT"), dtype="datetime64[ns]")
    for tk in set(windows.ticker.tolist()):
        idx = np.flatnonzero(windows.ticker == tk)
        cal = frames[tk].index
        pos = cal.get_indexer(pd.DatetimeIndex(windows.date[idx])) + lookahead
        ok = pos < len(cal)
        out[idx[ok]] = cal[pos[ok]].to_numpy()
    return out


@pytest.mark.parametrize("windows_of", ["stock_r1", "trading_r1"])
def test_no_label_reads_prices_of_a_later_split(windows_of):
    """A valid label of split s reads no price on or after the first decision day of a later split,
    whether the windows are Trading-R1's own (embargo = its look-ahead) or shared ones with the
    Stock-R1 embargo (S = 10 < 15), where the labels that would cross are undefined instead."""
    from stockr1.data import load_source

    frames = load_source("sample")
    w = L.sample_label_windows() if windows_of == "trading_r1" else _sample()[0]
    labels = L.labels_for_windows(w, frames)
    end = _label_end_days(w, frames, L.label_lookahead())
    for s, nxt in (("train", "val"), ("val", "test")):
        first_next = w.date[w.split == nxt].min()
        m = (w.split == s) & (labels >= 0)
        assert m.sum() > 1000 and (end[m] < first_next).all(), s


def test_train_labels_and_thresholds_ignore_validation_prices():
    """Perturb every price from the first validation day on: no train label (nor threshold) moves;
    likewise validation labels ignore test prices."""
    w, frames = _sample()
    base = L.labels_for_windows(w, frames)
    for nxt, earlier in (("val", ("train",)), ("test", ("train", "val"))):
        start = pd.Timestamp(w.date[w.split == nxt].min())
        q = {tk: f.assign(close=f["close"].where(f.index < start, f["close"] * np.linspace(0.5, 2.0, len(f))))
             for tk, f in frames.items()}
        m = np.isin(w.split, earlier)
        np.testing.assert_array_equal(L.labels_for_windows(w, q)[m], base[m])


def test_trading_r1_windows_embargo_is_the_label_lookahead():
    """Trading-R1's windows: the split gap on the calendar exceeds the 15-day look-ahead, nothing has
    to be masked, and the test rows are exactly Stock-R1's."""
    from stockr1.data import load_source, trading_calendar

    frames = load_source("sample")
    w, stock = L.sample_label_windows(), _sample()[0]
    cal = trading_calendar(frames)
    pos = cal.get_indexer(pd.DatetimeIndex(w.date))
    for a, b in (("train", "val"), ("val", "test")):
        assert pos[w.split == b].min() - pos[w.split == a].max() > L.label_lookahead()
    labels = L.labels_for_windows(w, frames)
    unmasked = L.assign_classes(L.weighted_signal(frames["SP500"]["close"]), np.array([-np.inf, -1e9, 1e9, np.inf]))
    sp = w.ticker == "SP500"
    defined = unmasked.reindex(pd.DatetimeIndex(w.date[sp])).to_numpy() >= 0
    assert ((labels[sp] >= 0) == defined).all()  # the embargo already covers the look-ahead: no mask
    t1, t2 = w.select(w.split == "test"), stock.select(stock.split == "test")
    assert (t1.ticker == t2.ticker).all() and (t1.date == t2.date).all()
    for s in ("train", "val"):  # 5 fewer days per ticker at the end of each
        assert (w.split == s).sum() == (stock.split == s).sum() - 10
