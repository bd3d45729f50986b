"""Formula tests for every score type, against hand-computed values."""

import pytest

from forecast_action.schema import ForecastAction
from forecast_action.score import completeness, field_credit, r_act, r_cons, score_action


def test_categorical_exact_match() -> None:
    assert field_credit("direction", "up", "up") == 1.0
    assert field_credit("direction", "up", "flat") == 0.0
    assert field_credit("monotonicity", "mixed", "increasing") == 0.0


def test_ordinal_distance_credit() -> None:
    # B = 3: |i - j| = 1 -> 1 - 1/2; |i - j| = 2 -> 0
    assert field_credit("volatility_level", "low", "medium") == pytest.approx(0.5)
    assert field_credit("volatility_level", "high", "low") == pytest.approx(0.0)
    assert field_credit("peak_timing_bin", "late", "late") == 1.0
    assert field_credit("trendline_fit", "strong", "moderate") == pytest.approx(0.5)


def test_numeric_tolerance_credit() -> None:
    # price: |101 - 100| / ref 100 = 0.01; 1 - 0.01/0.05 = 0.8
    assert field_credit("end_value", 101.0, 100.0, ref=100.0) == pytest.approx(0.8)
    # ref defaults to |target|: |95 - 100| / 100 = 0.05 -> 0
    assert field_credit("max_value", 95.0, 100.0) == pytest.approx(0.0)
    # pct: 2 pp off with tol 5 -> 0.6
    assert field_credit("end_change_pct", -1.0, 1.0) == pytest.approx(0.6)
    # count: 1 off with tol 3 -> 2/3
    assert field_credit("turning_point_count", 4, 3) == pytest.approx(2 / 3)
    assert field_credit("range_pct", 20.0, 1.0) == 0.0


def test_score_action_mean_missing_and_reasons() -> None:
    target = ForecastAction(start_value=100.0, end_value=102.0, direction="up", volatility_level="high",
                            future_window="t+1_t+10")
    pred = ForecastAction(start_value=100.0, end_value=101.0, direction="up", future_window="t+1_t+5")
    s = score_action(pred, target)
    # fields the target states (future_window unscored): start 1, end 1-0.01/0.05=0.8, direction 1, vol 0
    assert set(s.per_field) == {"start_value", "end_value", "direction", "volatility_level"}
    assert s.score == pytest.approx((1 + 0.8 + 1 + 0) / 4)
    assert s.reasons["volatility_level"] == "missing"
    assert "end_value" in s.reasons and "direction" not in s.reasons
    assert r_act(pred, target) == pytest.approx(s.score) == r_cons(pred, target)


def test_no_prediction_scores_zero() -> None:
    target = ForecastAction(direction="down", range_width_bin="wide")
    s = score_action(None, target)
    assert s.score == 0.0 and s.reasons == {"direction": "no action", "range_width_bin": "no action"}
    assert score_action(target, ForecastAction()).score == 0.0


def test_completeness_fraction_of_all_fields() -> None:
    assert completeness(None) == 0.0
    assert completeness(ForecastAction(direction="up", start_value=1.0)) == pytest.approx(2 / 18)
