"""Trade-R1 gates, market reward, retrieval and the offline triangular judge vs hand values."""

import pytest

from rl.methods.trade_r1 import gates as G
from rl.methods.trade_r1.judge import OfflineJudge, OpenAIJudge, TriangularScores, polarity
from rl.methods.trade_r1.retrieval import chunk, mentions, retrieve

CONTEXT = """AAPL revenue grew 12% in Q3 on strong iPhone sales
Fed held rates at 5.25%
MSFT cloud growth slowed and shares fell
AAPL faces an antitrust probe in the EU"""
GOOD = ("<think>AAPL revenue grew 12% on strong iPhone sales. Margins expanded to 48% last quarter.</think>"
        "<answer>BUY AAPL</answer>")


@pytest.mark.parametrize("r,s,f,d,m,n", [
    (0.02, 0.8, 1.62, 0.026, 0.02, 0.016),
    (-0.02, 0.8, 1.58, -0.024, -0.02, -0.016),
    (0.0, 0.5, 1.0, 0.0, 0.0, 0.0),
    (-0.1, 0.0, -0.1, -0.2, -0.1, 0.0),  # DSR: a loss with no grounding is doubled
])
def test_gates_by_hand(r, s, f, d, m, n):
    assert G.fsr(r, s) == pytest.approx(f)
    assert G.dsr(r, s) == pytest.approx(d)
    assert G.market_only(r, s) == pytest.approx(m)
    assert G.naive(r, s) == pytest.approx(n)


def test_market_reward_app_a3():
    assert G.market_reward([2, 1], [0.05, -0.01], 0.01, cost=0.001) == pytest.approx(0.018)
    assert G.market_reward([], [], 0.01, cost=0.001) == pytest.approx(-0.002)


def test_retrieval_hard_match_then_bm25():
    ch = chunk(CONTEXT)
    assert mentions(ch, ["aapl"]) == [0, 3]
    ev = retrieve(CONTEXT, ["AAPL"], "antitrust probe risk", k=1)
    assert ev == ["AAPL faces an antitrust probe in the EU"]
    assert retrieve(CONTEXT, ["AAPL"], "iPhone sales revenue", k=2)[0].startswith("AAPL revenue")
    assert len(retrieve(CONTEXT, ["TSLA"], "rates", k=1)) == 1  # no mention -> all chunks ranked
    assert retrieve(CONTEXT, ["TSLA"], "Fed rates", k=1) == ["Fed held rates at 5.25%"]


def test_offline_judge_by_hand():
    ev = ["AAPL revenue grew 12% in Q3 on strong iPhone sales"]
    sc = OfflineJudge().score(ev, "AAPL revenue grew 12% on strong iPhone sales. Margins expanded to 48% last quarter.", "BUY AAPL")
    # claim 1 fully supported, claim 2 has a number (48) absent from the evidence
    assert (sc.factuality, sc.n_claims, sc.n_unsupported) == (0.5, 2, 1)
    assert sc.deduction == 1.0 and sc.consistency == 1.0  # bullish reasoning/evidence, BUY
    assert sc.s == pytest.approx(2.5 / 3)
    sell = OfflineJudge().score(ev, "AAPL revenue grew 12% on strong iPhone sales.", "SELL AAPL")
    assert sell.deduction == 0.0 and sell.consistency == 0.0  # polarity +1 vs side -1
    assert polarity("shares fell but revenue grew") == 0.0


def test_gated_reward_end_to_end_and_metrics():
    fsr, dsr = G.gated_reward("fsr"), G.gated_reward("dsr")
    cols = dict(context=[CONTEXT, CONTEXT, CONTEXT], ticker=["AAPL"] * 3, excess_return=[0.02, -0.02, float("nan")])
    bad = "<think>Everything will moon 300% tomorrow.</think><answer>BUY AAPL</answer>"
    out = fsr(None, [GOOD, bad, GOOD], **cols)
    sc_good = G.verify(CONTEXT, GOOD, ["AAPL"], "AAPL", OfflineJudge())
    sc_bad = G.verify(CONTEXT, bad, ["AAPL"], "AAPL", OfflineJudge())
    assert out[0] == pytest.approx(0.02 + 2 * sc_good.s) and out[1] == pytest.approx(-0.02 + 2 * sc_bad.s)
    assert out[2] is None
    assert sc_bad.factuality == 0.0 and sc_good.s > sc_bad.s
    assert dsr(None, [bad], context=[CONTEXT], ticker=["AAPL"], excess_return=[-0.02])[0] == pytest.approx(-0.02 * (2 - sc_bad.s))
    assert G.verify(CONTEXT, "no answer at all", ["AAPL"], "AAPL", OfflineJudge()).error == "no decision"
    m = G.reasoning_metrics([sc_good, sc_bad])
    assert m["hallucination_rate"] == pytest.approx((1 + 1) / (2 + 1))
    assert m["similarity"] == pytest.approx((sc_good.s + sc_bad.s) / 2)
    with pytest.raises(ValueError, match="unknown gate"):
        G.gated_reward("profit")


def test_llm_judge_reply_parsing_never_raises():
    ok = OpenAIJudge.parse('Sure: {"factuality": 0.9, "deduction": 1.2, "consistency": 0.5, "total_claims": 4, "unsupported_claims": 1}')
    assert (ok.factuality, ok.deduction, ok.consistency, ok.n_claims, ok.n_unsupported) == (0.9, 1.0, 0.5, 4, 1)
    bad = OpenAIJudge.parse("I think it is fine")
    assert bad.s == 0.0 and "malformed" in bad.error
    dead = OpenAIJudge("http://127.0.0.1:9", "m", timeout=0.5).score(["e"], "r", "BUY")
    assert isinstance(dead, TriangularScores) and dead.error.startswith("judge call failed")


def test_method_registry_rewards(monkeypatch):
    from rl.methods import METHODS, reward_functions

    monkeypatch.delenv("STOCKR1_JUDGE_URL", raising=False)  # offline judge
    (fsr,) = reward_functions("trade_r1_fsr").values()
    out = fsr(None, [GOOD], context=[CONTEXT], ticker=["AAPL"], excess_return=[0.02])
    assert out == G.gated_reward("fsr")(None, [GOOD], context=[CONTEXT], ticker=["AAPL"], excess_return=[0.02])
    assert set(reward_functions("trading_r1")) == {"structure", "evidence", "decision", "outcome", "placement"}
    assert all(reward_functions(m) for m in METHODS)
    with pytest.raises(ValueError, match="unknown method"):
        reward_functions("stock_r2")


def test_aliases_extend_the_hard_match():
    ctx = "Ticker: SP500\nS&P 500 rallies 1.1% to 1,951.70\nVIX at 20.5"
    comp = "<think>S&P 500 rallies 1.1% to 1,951.70.</think><answer>BUY SP500</answer>"
    plain = G.verify(ctx, comp, ["SP500"], "SP500", OfflineJudge(), k=1)
    named = G.verify(ctx, comp, ["SP500"], "SP500", OfflineJudge(), k=1, aliases={"SP500": ["S&P 500"]})
    assert plain.factuality == 0.0 and named.factuality == 1.0  # evidence was "Ticker: SP500" only


def test_excess_return_column_by_hand():
    import numpy as np
    import pandas as pd

    idx = pd.bdate_range("2020-01-01", periods=12)
    frames = {"A": pd.DataFrame({"close": np.linspace(100, 111, 12)}, idx),
              "M": pd.DataFrame({"close": np.full(12, 50.0)}, idx)}
    got = G.excess_return_column(frames, [("A", idx[0]), ("A", idx[5])], "M", horizon=10, cost=0.001)
    assert got[0] == pytest.approx(110 / 100 - 1 - 0.002)
    assert np.isnan(got[1])  # t + 10 is past the data
