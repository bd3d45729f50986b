"""rl.rewards on hand-made completions (valid, partial, malformed, truncated) with hand-computed values."""

import math

import numpy as np
import pytest

from forecast_action.schema import ForecastAction
from rl.rewards import (
    PENALTY,
    REWARD_NAMES,
    RewardWeights,
    compute_rewards,
    r_act,
    r_ans,
    r_cons,
    r_prec,
    r_total,
)

TARGET = ForecastAction(direction="up", volatility_level="low", monotonicity="increasing")
DECODED = ForecastAction(direction="up", volatility_level="high", monotonicity="mixed")
OBS = "<forecast_ts>close: 101.0 102.0 ...</forecast_ts>"
VALID = (
    'The outlook is constructive. <forecast_action>{"direction": "up", "volatility_level": "medium", '
    f'"monotonicity": "increasing"}}</forecast_action>{OBS} Trend confirmed. <answer>Yes</answer>'
)
PARTIAL = f'<forecast_action>{{"direction": "up"}}</forecast_action>{OBS}<answer>No</answer>'
MALFORMED = f"<forecast_action>no idea what to write here</forecast_action>{OBS}<answer>maybe</answer>"
TRUNCATED = '<forecast_action>{"direction": "up", "volatility_level": "med'
NO_ACTION = "I think it goes up. <answer>Yes</answer>"
ALL = [VALID, PARTIAL, MALFORMED, TRUNCATED, NO_ACTION]


def cols(n: int, **kw):
    return {k: [v] * n for k, v in kw.items()}


def test_r_ans_categorical_and_penalties() -> None:
    got = r_ans([""] * 5, ALL, **cols(5, answer="Yes", answer_type="yes_no", tolerance=0.0, choices=()))
    assert got == [1.0, 0.0, PENALTY, PENALTY, 1.0]  # right, wrong, unreadable, truncated, right


def test_r_ans_choice_numeric_tolerance_and_no_label() -> None:
    comps = ["<answer>Down, because momentum faded</answer>", "<answer>up</answer>"]
    assert r_ans(["", ""], comps, **cols(2, answer="down", answer_type="choice", choices=("up", "down", "flat"))) == [1.0, 0.0]
    nums = [f"<answer>{x}</answer>" for x in ("2.55", "2.65", "2.75", "about 2.50%", "n/a")]
    got = r_ans([""] * 5, nums, **cols(5, answer="2.50", answer_type="numeric", tolerance=0.1))
    # within tol -> 1; err 0.15 -> 1 - 0.05/0.1 = 0.5; err 0.25 >= 2 tol -> 0; exact -> 1; no number -> penalty
    assert got == pytest.approx([1.0, 0.5, 0.0, 1.0, PENALTY])
    assert r_ans(["", ""], ["<answer>2.51</answer>", "<answer>2.50</answer>"],
                 **cols(2, answer="2.50", answer_type="numeric", tolerance=0.0)) == [0.0, 1.0]
    assert r_ans(["", ""], ["<answer>Yes</answer>"] * 2, answer=[None, None]) == [None, None]


def test_r_act_field_level_against_realised_action() -> None:
    got = r_act([""] * 5, ALL, target_action=[TARGET] * 5)
    # valid: direction 1, volatility medium vs low = 1 - 1/2, monotonicity 1 -> 2.5/3
    assert got == pytest.approx([2.5 / 3, 1 / 3, PENALTY, PENALTY, PENALTY])
    assert r_act([""], [VALID], target_action=[None]) == [None]


def test_r_cons_against_decoded_profile() -> None:
    got = r_cons([""] * 5, ALL, decoded_action=[DECODED] * 5, target_action=[TARGET] * 5)
    # valid: direction 1, medium vs high 0.5, increasing vs mixed 0 -> 1.5/3
    assert got == pytest.approx([0.5, 1 / 3, PENALTY, PENALTY, PENALTY])
    # the decoder did not run: a penalty on an action task, not applicable otherwise
    assert r_cons(["", ""], [VALID, VALID], decoded_action=[None, None], target_action=[TARGET, None]) == [PENALTY, None]


def test_r_prec_hand_computed() -> None:
    c0 = 100.0
    true = c0 + np.arange(1, 11.0)
    up = true + 1.0  # MAE 1, no-change MAE 5.5, volume 10% off, every direction right
    down = c0 - np.arange(1, 11.0)  # MAE mean(2k) = 11, every direction wrong
    got = r_prec(
        [""] * 5, ["x"] * 5,
        pred_close=[up, down, None, np.full(10, np.nan), up],
        true_close=[true, true, true, true, None],
        start_close=[c0] * 5,
        pred_volume=[np.full(10, 1100.0), None, None, None, None],
        true_volume=[np.full(10, 1000.0)] * 5,
    )
    assert got[0] == pytest.approx((math.exp(-1 / 5.5) + math.exp(-0.1) + 1.0) / 3)
    assert got[1] == pytest.approx((math.exp(-2.0) + 0.0) / 2)
    assert got[2:] == [PENALTY, PENALTY, None]


def test_r_prec_is_scale_free() -> None:
    c0 = 100.0
    true = c0 * (1 + 0.01 * np.sin(np.arange(1, 11.0)))
    pred = c0 * (1 + 0.008 * np.sin(np.arange(1, 11.0) + 0.3))
    a = r_prec([""], ["x"], pred_close=[pred], true_close=[true], start_close=[c0])
    b = r_prec([""], ["x"], pred_close=[pred * 37.0], true_close=[true * 37.0], start_close=[c0 * 37.0])
    assert a == pytest.approx(b)


def test_total_weights_ablation_and_trl_conversational_format() -> None:
    kw = dict(
        answer=["Yes"] * 2, answer_type=["yes_no"] * 2, tolerance=[0.0] * 2, choices=[()] * 2,
        target_action=[TARGET] * 2, decoded_action=[DECODED] * 2,
        pred_close=[None] * 2, true_close=[np.arange(101, 111.0)] * 2, start_close=[100.0] * 2,
    )
    conv = [[{"role": "assistant", "content": VALID}], MALFORMED]
    br = compute_rewards(["p", "p"], conv, weights=RewardWeights(), **kw)
    assert set(br.components) == set(REWARD_NAMES)
    # VALID: 1 + 1 * 2.5/3 + 0.5 * PENALTY (no decoded path) + 1 * 0.5
    assert br.total[0] == pytest.approx(1 + 2.5 / 3 + 0.5 * PENALTY + 0.5)
    assert br.total[1] == pytest.approx(PENALTY * (1 + 1 + 0.5 + 1))
    assert r_total(["p", "p"], conv, **kw) == pytest.approx(list(br.total))
    no_act = compute_rewards(["p", "p"], conv, enabled=("r_ans", "r_prec", "r_cons"), **kw)
    assert np.isnan(no_act.components["r_act"]).all()
    assert no_act.total[0] == pytest.approx(1 + 0.5 * PENALTY + 0.5)
    nothing = compute_rewards(["p"], ["x"], answer=[None])
    assert np.isnan(nothing.total[0])  # unscorable: no labels at all
    with pytest.raises(ValueError, match="unknown reward components"):
        compute_rewards(["p"], ["x"], enabled=("r_fmt",))
    with pytest.raises(ValueError, match="target_action"):
        r_act(["p", "p"], ["x", "y"], target_action=[TARGET])


@pytest.mark.parametrize("junk", ["", "<answer></answer>", "<forecast_action></forecast_action>", "\x00\ufffd{{{",
                                  "<forecast_action>{'direction': 'sideways', 'turning_point_count': -4}</forecast_action>"])
def test_garbage_never_raises(junk: str) -> None:
    kw = dict(answer=["Yes"], answer_type=["yes_no"], target_action=[TARGET], decoded_action=[DECODED],
              pred_close=[np.arange(1, 11.0)], true_close=[np.arange(1, 11.0)], start_close=[1.0])
    for v in compute_rewards(["p"], [junk], **kw).components.values():
        assert v[0] == PENALTY or 0.0 <= v[0] <= 1.0
