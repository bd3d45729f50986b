"""Trading-R1 snapshot prompt: point-in-time, indicator values, and the format-teacher thesis."""

import numpy as np
import pandas as pd
import pytest

from rl.methods.trading_r1 import prompt as P
from rl.methods.trading_r1 import rewards as R
from stockr1.data.context import PointInTimeStore


def _store(n=300, seed=0):
    rng = np.random.default_rng(seed)
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    idx = pd.bdate_range("2020-01-01", periods=n, name="date")
    df = pd.DataFrame({"open": c, "high": c * 1.01, "low": c * 0.99, "close": c,
                       "volume": rng.integers(1_000_000, 2_000_000, n).astype(float)}, index=idx)
    news = pd.DataFrame({"ticker": ["AAA"] * 3, "time": pd.to_datetime(["2020-06-01 10:00", "2020-09-01 10:00", "2021-01-05 10:00"]),
                         "title": ["AAA beats", "AAA misses", "AAA future headline"], "summary": [""] * 3,
                         "sentiment": [0.5, -0.2, 0.9]})
    return PointInTimeStore({"AAA": df}, news=news), df


def test_prompt_is_point_in_time():
    store, df = _store()
    t = df.index[250]
    before = P.build_prompt(store, "AAA", t)
    fut = df.copy()
    fut.loc[fut.index > t, ["open", "high", "low", "close"]] *= 3.0
    store2 = PointInTimeStore({"AAA": fut}, news=store.news)
    assert P.build_prompt(store2, "AAA", t) == before
    assert "future headline" not in before and "AAA misses" in before
    assert "mean news sentiment +0.150 over 2 items" in before


def test_indicator_values_by_hand():
    _, df = _store()
    tech = P.technicals(df)
    assert tech["sma_50"].iloc[-1] == pytest.approx(df["close"].iloc[-50:].mean())
    conv = (df["high"].iloc[-9:].max() + df["low"].iloc[-9:].min()) / 2
    assert tech["ichimoku_conversion"].iloc[-1] == pytest.approx(conv)
    assert set(tech.columns) == set(P.INDICATORS) and len(P.INDICATORS) == 28


def test_template_thesis_scores_and_stages():
    store, df = _store()
    blocks = P.snapshot_blocks(store, "AAA", df.index[250])
    th3 = P.template_thesis(blocks, label=4, stage=3)
    assert R.parse_decision(th3) == 4 and R.decision_reward(th3, 4) == 1.0
    assert R.structure_reward(th3) >= 0.8
    assert R.evidence_reward(th3) > R.evidence_reward(P.template_thesis(blocks, 4, stage=1))
    assert R.parse_decision(P.template_thesis(blocks, 4, stage=2)) is None
    assert P.build_prompt(store, "AAA", df.index[250], P.PromptConfig(shuffle_seed=1)) != P.build_prompt(store, "AAA", df.index[250])
