"""g(y): the deterministic map from a trajectory to a full forecast action (Stock-R1 §3.5, App. B.2).

Used three ways: a* = g(realised future) is the R_act target and the SFT target; g(decoded) is the
R_cons profile; and a* is the teacher action the decoder is trained on.

Definitions, on the close path p = [c_0, c_1, .., c_S] (c_0 = start close, r_s = ln(c_s / c_{s-1})):

- start/end/max/min/mean: c_0, c_S, max/min/mean of c_1..c_S (the case study's max/min are closes).
- end_change_pct = 100 (c_S - c_0) / c_0; range_pct = 100 (max - min) / c_0.
- direction: up if end_change_pct > flat_pct, down if < -flat_pct, else flat (flat_pct = 0.5 by default,
  a fixed documented band, not a quantile, so "up" means the same thing on every dataset).
- volatility = std(r_1..r_S); drawdown = max_s (runmax_s - c_s) / runmax_s; tail risk = -min_s r_s
  (worst single-day loss); trendline fit = R^2 of OLS of p on 0..S. Each is binned into three levels at
  the train-split tertiles (``ActionThresholds.fit``); range_width_bin bins range_pct the same way.
- turning_point_count: sign changes between consecutive moves |c_s - c_{s-1}| > turn_eps * c_0.
- peak/trough timing: day d (1..S) of the first max/min close; early if 3d <= S, middle if 3d <= 2S,
  else late (S=10: days 1-3, 4-6, 7-10).
- monotonicity: Kendall tau of p against time; increasing if tau >= mono_tau (0.6), decreasing if
  <= -mono_tau, else mixed (a strict "every move up" rule would call nearly every real path mixed).

Choice (paper is silent): g uses the close path only. The ``Forecast`` contract carries sampled paths
only for the close, so a close-only g gives the same statistic on realised and decoded trajectories;
high/low/volume are accepted in ``Trajectory`` for completeness and ignored. For a decoded ``Forecast``
the default profile is the per-field consensus of g over its sample paths (mode for bins, median for
numbers): the mean path is smooth, so g(mean path) would call almost every forecast low-volatility
and monotone, whereas the sample paths carry the predicted volatility. ``source="mean"`` is kept.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from forecast_action.schema import FIELD_SPECS, ForecastAction
from stockr1.types import CLOSE, Forecast, TrainWindows, Windows, require_train

QUANTILE_FEATURES = ("volatility", "range_pct", "drawdown", "tail_risk", "trend_r2")
_BIN_FEATURE = {
    "volatility_level": "volatility",
    "range_width_bin": "range_pct",
    "max_drawdown_bin": "drawdown",
    "tail_risk_level": "tail_risk",
    "trendline_fit": "trend_r2",
}


@dataclass(frozen=True)
class Trajectory:
    """One future trajectory. close/high/low/volume: [S]; start: close at the decision day."""

    close: np.ndarray
    start: float
    high: np.ndarray | None = None
    low: np.ndarray | None = None
    volume: np.ndarray | None = None


@dataclass(frozen=True)
class ActionThresholds:
    """Cut points of g. ``cuts[f] = (q1/3, q2/3)`` of feature f over train-split realised futures.

    ``fit(train_only(windows))`` is the call sites' entry; ``fit_paths`` is its array-level core and
    trusts its caller to pass train paths."""

    cuts: dict[str, tuple[float, float]]
    flat_pct: float = 0.5
    mono_tau: float = 0.6
    turn_eps: float = 1e-4
    horizon: int = 10
    n_fit: int = 0

    @classmethod
    def fit_paths(cls, close: np.ndarray, start: np.ndarray, **kw: float) -> ActionThresholds:
        """Tertiles of each quantile feature over paths close [N, S] with start [N]."""
        close = np.asarray(close, dtype=np.float64)
        if close.ndim != 2 or len(close) < 3:
            raise ValueError(f"need close paths [N>=3, S] to fit thresholds, got shape {close.shape}")
        feats = path_features(close, np.asarray(start, dtype=np.float64), turn_eps=kw.get("turn_eps", 1e-4))
        cuts = {f: tuple(float(q) for q in np.quantile(feats[f], [1 / 3, 2 / 3])) for f in QUANTILE_FEATURES}
        return cls(cuts=cuts, horizon=close.shape[1], n_fit=len(close), **kw)  # type: ignore[arg-type]

    @classmethod
    def fit(cls, train: TrainWindows, **kw: float) -> ActionThresholds:
        """Tertiles over the realised futures of ``train_only(windows)``; anything but a ``TrainWindows``
        is refused (TypeError), so no call site can hand the tertiles validation or test paths."""
        train = require_train(train, "ActionThresholds.fit")
        if len(train) < 3:
            raise ValueError(f"ActionThresholds.fit needs >= 3 train windows, got {len(train)}")
        return cls.fit_paths(train.future[:, :, CLOSE], train.last_close, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cuts": {k: [float(v[0]), float(v[1])] for k, v in self.cuts.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ActionThresholds:
        d = dict(d)
        d["cuts"] = {k: (float(v[0]), float(v[1])) for k, v in d["cuts"].items()}
        missing = set(QUANTILE_FEATURES) - set(d["cuts"])
        if missing:
            raise KeyError(f"thresholds lack cuts for {sorted(missing)}")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> ActionThresholds:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"cannot read action thresholds from {path}: {e}") from e


def path_features(close: np.ndarray, start: np.ndarray, turn_eps: float = 1e-4) -> dict[str, np.ndarray]:
    """Every statistic g needs, vectorised. close: [N, S], start: [N] -> dict of [N] arrays."""
    n, s = close.shape
    p = np.concatenate([start[:, None], close], axis=1)  # [N, S+1]
    r = np.diff(np.log(p), axis=1)
    d = np.diff(p, axis=1)
    runmax = np.maximum.accumulate(p, axis=1)
    t = np.arange(s + 1, dtype=np.float64)
    tc, pc = t - t.mean(), p - p.mean(axis=1, keepdims=True)
    sxy, syy = pc @ tc, (pc**2).sum(axis=1)
    r2 = np.where(syy > 0, sxy**2 / ((tc**2).sum() * np.where(syy > 0, syy, 1.0)), 0.0)
    # Kendall tau (ties contribute 0): sign(p_j - p_i) summed over i < j.
    iu = np.triu_indices(s + 1, k=1)
    tau = np.sign(p[:, iu[1]] - p[:, iu[0]]).sum(axis=1) / len(iu[0])
    # Turning points: sign changes between consecutive significant moves.
    sig = np.where(np.abs(d) > turn_eps * start[:, None], np.sign(d), 0.0)
    turns = np.zeros(n, dtype=np.int64)
    last = np.zeros(n)
    for k in range(s):
        cur = sig[:, k]
        turns += ((cur != 0) & (last != 0) & (cur != last)).astype(np.int64)
        last = np.where(cur != 0, cur, last)
    return {
        "start": start,
        "end": close[:, -1],
        "max": close.max(axis=1),
        "min": close.min(axis=1),
        "mean": close.mean(axis=1),
        "end_change_pct": 100.0 * (close[:, -1] - start) / start,
        "range_pct": 100.0 * (close.max(axis=1) - close.min(axis=1)) / start,
        "volatility": r.std(axis=1),
        "drawdown": ((runmax - p) / runmax).max(axis=1),
        "tail_risk": -r.min(axis=1),
        "trend_r2": r2,
        "tau": tau,
        "turns": turns,
        "peak_day": close.argmax(axis=1) + 1,
        "trough_day": close.argmin(axis=1) + 1,
    }


def timing_bin(day: np.ndarray | int, horizon: int) -> np.ndarray:
    """Day 1..S -> 0 early (3d <= S), 1 middle (3d <= 2S), 2 late."""
    day = np.asarray(day)
    return np.where(3 * day <= horizon, 0, np.where(3 * day <= 2 * horizon, 1, 2))


def field_codes(feats: dict[str, np.ndarray], th: ActionThresholds) -> dict[str, np.ndarray]:
    """Per-field values: float arrays for numeric fields, integer codes into ``FIELD_SPECS[f].values``."""
    s = th.horizon
    chg = feats["end_change_pct"]
    out: dict[str, np.ndarray] = {
        "start_value": feats["start"], "end_value": feats["end"], "max_value": feats["max"],
        "min_value": feats["min"], "mean_close": feats["mean"], "end_change_pct": chg,
        "range_pct": feats["range_pct"], "turning_point_count": feats["turns"].astype(np.float64),
        # direction values are ("up", "down", "flat")
        "direction": np.where(chg > th.flat_pct, 0, np.where(chg < -th.flat_pct, 1, 2)),
        # monotonicity values are ("increasing", "decreasing", "mixed")
        "monotonicity": np.where(feats["tau"] >= th.mono_tau, 0, np.where(feats["tau"] <= -th.mono_tau, 1, 2)),
        "peak_timing_bin": timing_bin(feats["peak_day"], s),
        "trough_timing_bin": timing_bin(feats["trough_day"], s),
    }
    for field, feat in _BIN_FEATURE.items():
        out[field] = np.digitize(feats[feat], th.cuts[feat], right=True)
    return out


def _to_actions(codes: dict[str, np.ndarray], horizon: int) -> list[ForecastAction]:
    n = len(codes["start_value"])
    window = f"t+1_t+{horizon}"
    actions = []
    for i in range(n):
        kw: dict[str, object] = {"future_window": window}
        for field, arr in codes.items():
            spec = FIELD_SPECS[field]
            if spec.kind == "numeric":
                kw[field] = int(round(arr[i])) if spec.integer else float(arr[i])
            else:
                kw[field] = spec.values[int(arr[i])]  # type: ignore[index]
        actions.append(ForecastAction(**kw))
    return actions


def derive_actions(close: np.ndarray, start: np.ndarray, thresholds: ActionThresholds) -> list[ForecastAction]:
    """g over a batch: close [N, S], start [N] -> N full actions."""
    close = np.asarray(close, dtype=np.float64)
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if close.ndim != 2 or close.shape[0] != start.shape[0]:
        raise ValueError(f"close must be [N, S] with start [N]; got {close.shape} and {start.shape}")
    if not (np.all(np.isfinite(close)) and np.all(close > 0) and np.all(start > 0)):
        raise ValueError("g needs finite, positive closes and start prices")
    feats = path_features(close, start, thresholds.turn_eps)
    return _to_actions(field_codes(feats, thresholds), close.shape[1])


def derive_action(traj: Trajectory, thresholds: ActionThresholds) -> ForecastAction:
    """g(y) for one trajectory."""
    return derive_actions(np.asarray(traj.close)[None, :], np.array([traj.start]), thresholds)[0]


def actions_from_windows(windows: Windows, thresholds: ActionThresholds) -> list[ForecastAction]:
    """a* = g(realised future) for every window."""
    return derive_actions(windows.future[:, :, CLOSE], windows.last_close, thresholds)


def _mode(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Mode along the last axis of integer codes [N, M] -> [N] (ties go to the lower code)."""
    counts = np.stack([(codes == v).sum(axis=1) for v in range(n_values)], axis=1)
    return counts.argmax(axis=1)


def actions_from_forecast(
    forecast: Forecast, start: np.ndarray, thresholds: ActionThresholds, source: str = "samples"
) -> list[ForecastAction]:
    """g(decoded) for each window: consensus over sample paths (default) or g of the mean path."""
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    if source == "mean":
        return derive_actions(forecast.close, start, thresholds)
    if source != "samples":
        raise ValueError(f"source must be 'samples' or 'mean', got {source!r}")
    samples = np.asarray(forecast.close_samples, dtype=np.float64)  # [N, M, S]
    n, m, s = samples.shape
    samples = np.clip(np.nan_to_num(samples, nan=1e-6, posinf=1e12), 1e-6, None)
    feats = path_features(samples.reshape(n * m, s), np.repeat(start, m), thresholds.turn_eps)
    codes = field_codes(feats, thresholds)
    agg: dict[str, np.ndarray] = {}
    for field, arr in codes.items():
        spec = FIELD_SPECS[field]
        arr = arr.reshape(n, m)
        agg[field] = np.median(arr, axis=1) if spec.kind == "numeric" else _mode(arr, spec.n_bins)
    agg["start_value"] = start
    return _to_actions(agg, s)
