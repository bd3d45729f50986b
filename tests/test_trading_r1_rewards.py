"""Trading-R1 App. 10-11 reward formulas against hand-computed values."""

import pytest

from rl.methods.trading_r1 import rewards as R

PLAIN60 = " ".join(["word"] * 60)
OP20 = " ".join(["view"] * 20)


def test_count_reward_cases():
    got = [R.count_reward(s) for s in (0, 3, 4, 5, 7, 8, 12)]
    assert got == pytest.approx([0.3, 0.42, 0.56, 1.0, 1.0, 0.85, 0.3])


def test_section_structure_elements():
    assert R.section_structure("too short") == 0.2
    assert R.section_structure(PLAIN60) == 0.0
    assert R.section_structure("## Head\n" + PLAIN60 + "\n- a point") == pytest.approx(0.7)
    full = "## Head\n" + PLAIN60 + "\n- a **bold** point\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert R.section_structure(full) == pytest.approx(1.0)


def test_structure_reward_by_hand():
    analysis = "".join(f"<s{i}>\n# H\n{PLAIN60}\n</s{i}>\n" for i in range(5))
    text = "<think>ignored " + PLAIN60 + "</think>\n" + analysis + "<conclusion>Buy it.</conclusion>\nDECISION: [[[BUY]]]"
    assert R.structure_reward(text) == pytest.approx(0.6 * 1.0 + 0.4 * (5 * 0.3 + 0.2) / 6)
    assert R.structure_reward(analysis) == 0.0  # no mandatory conclusion
    three = "".join(f"<s{i}>x</s{i}>" for i in range(3)) + "<conclusion>y</conclusion>"
    assert R.structure_reward(three) == pytest.approx(0.6 * 0.42 + 0.4 * 0.2)


def test_opinion_and_bullet_rewards():
    assert [R.opinion_reward(n, True) for n in (15, 10, 100, 200)] == pytest.approx([1.0, 10 / 15, 0.8, 0.5])
    assert [R.opinion_reward(n, False) for n in (10, 30)] == pytest.approx([0.2, 0.3])
    assert R.bullet_reward(f"{OP20} *revenue grew 12%* `10-Q`") == pytest.approx(1.0)
    assert R.bullet_reward(f"{OP20} *revenue grew 12%*") == pytest.approx(0.4 * 0.3 + 0.35)
    assert R.bullet_reward("five words of pure opinion") == pytest.approx(0.4 * 0.1)
    # opinion counted only up to the first marker (source first here)
    assert R.bullet_reward("short view `src` then *quote*") == pytest.approx(0.4 * 2 / 15 + 0.6)


def test_section_and_overall_evidence_harmonic_means():
    good, half = f"- {OP20} *q* `s`", f"- {OP20} *q*"
    sec = f"{good}\n{half}\n"
    h = 2 / (1 / 1.0 + 1 / 0.47)
    assert R.section_evidence(sec) == pytest.approx(0.3 * 0.5 + 0.7 * h)
    assert R.section_evidence("no bullets at all") == 0.0
    sec4 = "\n".join([good] * 4)
    text = f"<a>{sec}</a><b>{sec4}</b><conclusion>{sec4}</conclusion>"
    s1, s2 = 0.3 * 0.5 + 0.7 * h, 1.0
    assert R.evidence_reward(text) == pytest.approx(2 / (1 / s1 + 1 / s2))
    assert R.evidence_reward("<a>nothing</a>") == pytest.approx(0.01)  # floor 0.01 inside the harmonic mean
    assert R.bullets("*italic start* is not a bullet\n* but this is") == ["but this is"]


def test_decision_matrix_and_parsing():
    t = "<conclusion>c</conclusion>\nDECISION: [[[STRONG BUY]]]"
    assert R.decision_reward(t, label=1) == -1.5  # SB predicted, SELL true
    assert R.decision_reward(t, label=4) == 1.0
    assert R.decision_reward("x\nDECISION: [[[strong_buy]]]", label=0) == -2.0
    assert R.decision_reward("DECISION: [[[STRONG SELL]]]", label=4) == -2.25
    assert R.decision_reward("DECISION: [[[HOLD]]]", label=0, lambda_dec=2.0) == -3.0
    assert R.decision_reward("no decision here", label=2) == -1.5
    assert R.decision_reward("DECISION: [[[MAYBE]]]", label=2) == -1.5
    far = "DECISION: [[[BUY]]]\n" + "\n".join(["more text"] * 3)
    assert R.parse_decision(far) is None  # must be within the last three lines
    assert R.decision_placement_reward("<a>x</a>\nDECISION: [[[BUY]]]") == 1.0
    assert R.decision_placement_reward("<a>DECISION: [[[BUY]]]</a>") == 0.5
    assert R.decision_placement_reward("<a>x</a>") == 0.0


@pytest.mark.parametrize(
    "pred,e,expected",
    [
        (2, 0.005, 0.5),  # HOLD inside the band: b(1 - |e|/delta)
        (2, -0.03, -0.5),  # HOLD outside: -b gamma (|e| - delta)/(u - delta)
        (2, 0.2, -1.0),  # clipped at -gamma b
        (3, 0.03, 0.55),  # BUY, I(e) = 1: m = 0.6, minus cost
        (4, 0.03, 0.25),  # STRONG BUY, wrong intensity: half credit
        (0, -0.06, 0.95),  # STRONG SELL, I = 2, saturated
        (1, -0.06, 0.45),
        (3, -0.01, -0.25),  # wrong direction: -b gamma m - kappa
        (4, -0.10, -1.0),  # clipped
        (3, 0.0, -0.05),  # no move: cost only
        (3, 0.005, 0.0),  # I = 0 vs |s| = 1: half of m = 0.1, minus 0.05
        (None, 0.03, -1.0),
    ],
)
def test_outcome_reward_cases(pred, e, expected):
    assert R.outcome_reward(pred, e) == pytest.approx(expected)


def test_trl_wrappers():
    comps = ["<conclusion>c</conclusion>\nDECISION: [[[BUY]]]", [{"role": "assistant", "content": "DECISION: [[[SELL]]]"}]]
    assert R.decision_rewards(None, comps, label=[3, None]) == [1.0, None]
    assert R.outcome_rewards(None, comps, excess_return=[0.03, -0.01]) == pytest.approx([0.55, 0.5 * 0.2 - 0.05])  # SELL on -1%: right side, I = 0
    assert len(R.structure_rewards(None, comps)) == 2 and len(R.evidence_rewards(None, comps)) == 2
    assert R.placement_rewards(None, comps) == [1.0, 1.0]
