"""g(y): hand-computed paths, train-only threshold fitting, save/load, batch over windows and forecasts."""

import dataclasses

import numpy as np
import pytest

from forecast_action.derive import (
    ActionThresholds,
    Trajectory,
    actions_from_forecast,
    actions_from_windows,
    derive_action,
    derive_actions,
    path_features,
)
from stockr1.data import synthetic_windows
from stockr1.types import CLOSE, Forecast, train_only

CUTS = {"volatility": (0.01, 0.02), "range_pct": (3.0, 6.0), "drawdown": (0.02, 0.04),
        "tail_risk": (0.01, 0.02), "trend_r2": (0.3, 0.7)}
TH = ActionThresholds(cuts=CUTS, horizon=5)


def test_hand_computed_path() -> None:
    # p = [100, 102, 101, 104, 99, 103]
    a = derive_action(Trajectory(close=np.array([102.0, 101, 104, 99, 103]), start=100.0), TH)
    assert (a.start_value, a.end_value, a.max_value, a.min_value) == (100.0, 103.0, 104.0, 99.0)
    assert a.mean_close == pytest.approx(101.8)
    assert a.end_change_pct == pytest.approx(3.0) and a.direction == "up"
    assert a.range_pct == pytest.approx(5.0) and a.range_width_bin == "moderate"
    # drawdown: peak 104 -> 99 = 4.81% > 0.04 -> high; worst day ln(99/104) = -4.93% -> tail high
    assert a.max_drawdown_bin == "high" and a.tail_risk_level == "high"
    # moves + - + - + : 4 sign changes
    assert a.turning_point_count == 4
    # peak day 3 of 5: 9 <= 10 -> middle; trough day 4: 12 > 10 -> late
    assert a.peak_timing_bin == "middle" and a.trough_timing_bin == "late"
    assert a.future_window == "t+1_t+5"
    f = path_features(np.array([[102.0, 101, 104, 99, 103]]), np.array([100.0]))
    # Kendall tau on 6 points: concordant minus discordant over 15 pairs
    p = [100, 102, 101, 104, 99, 103]
    tau = sum(np.sign(p[j] - p[i]) for i in range(6) for j in range(i + 1, 6)) / 15
    assert f["tau"][0] == pytest.approx(tau)
    assert a.monotonicity == "mixed"  # tau = 5/15 < 0.6


def test_monotone_flat_and_down_paths() -> None:
    up = derive_action(Trajectory(close=np.array([101.0, 102, 103, 104, 105]), start=100.0), TH)
    assert up.monotonicity == "increasing" and up.trendline_fit == "strong" and up.turning_point_count == 0
    assert up.volatility_level == "low" and up.peak_timing_bin == "late" and up.trough_timing_bin == "early"
    flat = derive_action(Trajectory(close=np.array([100.2, 99.9, 100.1, 100.0, 100.4]), start=100.0), TH)
    assert flat.direction == "flat"  # +0.4% is inside the 0.5% band
    down = derive_action(Trajectory(close=np.array([99.0, 98, 97, 96, 95]), start=100.0), TH)
    assert down.direction == "down" and down.monotonicity == "decreasing"


def test_thresholds_fit_on_train_only_and_roundtrip(tmp_path) -> None:
    w = synthetic_windows()
    th = ActionThresholds.fit(train_only(w))
    assert th.n_fit == int((w.split == "train").sum()) and th.horizon == w.future.shape[1]
    # Perturbing val/test futures must not move the thresholds.
    fut = w.future.copy()
    fut[w.split != "train"] *= np.exp(np.random.default_rng(0).normal(0, 0.2, fut[w.split != "train"].shape))
    assert ActionThresholds.fit(train_only(dataclasses.replace(w, future=fut))) == th
    th.save(tmp_path / "th.json")
    assert ActionThresholds.load(tmp_path / "th.json") == th
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        ActionThresholds.load(tmp_path / "bad.json")
    # Tertiles: each quantile bin holds about a third of train windows.
    acts = actions_from_windows(w.split_of("train"), th)
    vols = [a.volatility_level for a in acts]
    for v in ("low", "medium", "high"):
        assert abs(vols.count(v) / len(vols) - 1 / 3) < 0.02


def test_batch_matches_single_and_rejects_bad_input() -> None:
    rng = np.random.default_rng(1)
    close = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, (4, 5)), axis=1))
    start = np.full(4, 50.0)
    batch = derive_actions(close, start, TH)
    assert batch[2] == derive_action(Trajectory(close=close[2], start=50.0), TH)
    with pytest.raises(ValueError, match="positive"):
        derive_actions(-close, start, TH)


def test_forecast_profile_sample_consensus_and_mean() -> None:
    w = synthetic_windows().split_of("test").select(np.arange(6))
    th = ActionThresholds.fit(train_only(synthetic_windows()))
    start = w.last_close
    rng = np.random.default_rng(0)
    # Sample paths: strongly rising, noisy. Mean path: exactly linear.
    steps = 0.02 + rng.normal(0, 0.03, (6, 200, 10))
    samples = start[:, None, None] * np.exp(np.cumsum(steps, axis=2))
    mean = start[:, None] * np.exp(0.02 * np.arange(1, 11))[None, :]
    fc = Forecast(close=mean, close_samples=samples, high=mean * 1.01, low=mean * 0.99, volume=mean)
    cons = actions_from_forecast(fc, start, th)
    mean_prof = actions_from_forecast(fc, start, th, source="mean")
    assert all(a.direction == "up" for a in cons)
    assert all(a.volatility_level == "high" for a in cons)  # 3% daily noise is above train tertiles
    assert all(a.volatility_level == "low" and a.monotonicity == "increasing" for a in mean_prof)
    med_end = np.median(samples[:, :, -1], axis=1)
    assert [a.end_value for a in cons] == pytest.approx(list(med_end))
    assert [a.start_value for a in cons] == pytest.approx(list(start))
    assert actions_from_windows(w, th)[0].end_value == pytest.approx(w.future[0, -1, CLOSE])
