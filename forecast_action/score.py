"""Field-level comparison of two forecast actions (Stock-R1 §3.5): R_act, R_cons and completeness (M4).

Per-field credit in [0, 1]:

- categorical: 1 if equal else 0.
- ordinal with B bins: 1 - |i - j| / (B - 1)   (low vs high = 0, low vs medium = 0.5 for B = 3).
- numeric: 1 - min(1, err / tol), a linear tolerance, with a scale-normalised error:
    price fields (start/end/max/min/mean): err = |p - t| / ref, ref = the target's start_value
        (else |t|), tol = 0.05, i.e. a miss of 1% of the start price earns 0.8, 5% or more earns 0;
    percentage fields (end_change_pct, range_pct): err = |p - t| in percentage points, tol = 5;
    turning_point_count: err = |p - t|, tol = 3.
  Ten-day index moves have a std of about 3-5%, so 5% / 5 pp is "the right order of magnitude".

The score averages credit over the fields the target states (``SCORED_FIELDS`` by default; the
metadata ``future_window`` is not scored). A field the prediction lacks scores 0 with reason
``missing``; a target field that is absent cannot be scored and is skipped. A missing prediction
(parse failure) scores 0 on every field. Reasons are kept for logging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forecast_action.schema import FIELD_ORDER, FIELD_SPECS, SCORED_FIELDS, ForecastAction

TOLERANCES: dict[str, float] = {"price": 0.05, "pct": 5.0, "count": 3.0}


@dataclass(frozen=True)
class ActionScore:
    """score: mean credit in [0, 1]; per_field: credit per scored field; reasons: why a field lost credit."""

    score: float
    per_field: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


def field_credit(name: str, pred: Any, target: Any, ref: float | None = None,
                 tolerances: dict[str, float] = TOLERANCES) -> float:
    """Credit for one field value against the target value (both non-None)."""
    spec = FIELD_SPECS[name]
    if spec.kind == "categorical":
        return float(pred == target)
    if spec.kind == "ordinal":
        values = spec.values or ()
        i, j = values.index(pred), values.index(target)
        return 1.0 - abs(i - j) / (len(values) - 1)
    err = abs(float(pred) - float(target))
    if spec.scale == "price":
        scale = ref if ref is not None and ref > 0 else abs(float(target))
        err = err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
    return 1.0 - min(1.0, err / tolerances[spec.scale])


def score_action(pred: ForecastAction | None, target: ForecastAction,
                 fields: tuple[str, ...] = SCORED_FIELDS,
                 tolerances: dict[str, float] = TOLERANCES) -> ActionScore:
    """Field-level agreement of ``pred`` with ``target`` over ``fields`` that the target states."""
    names = [f for f in fields if getattr(target, f) is not None]
    if not names:
        return ActionScore(0.0, {}, {"_target": "target states none of the scored fields"})
    ref = target.start_value
    per_field: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for f in names:
        p, t = (getattr(pred, f) if pred is not None else None), getattr(target, f)
        if p is None:
            per_field[f] = 0.0
            reasons[f] = "missing" if pred is not None else "no action"
            continue
        c = field_credit(f, p, t, ref, tolerances)
        per_field[f] = c
        if c < 1.0:
            reasons[f] = f"predicted {p!r}, target {t!r}"
    return ActionScore(sum(per_field.values()) / len(names), per_field, reasons)


def r_act(pred: ForecastAction | None, target: ForecastAction) -> float:
    """R_act(a_hat, a*): agreement with the action derived from the realised future."""
    return score_action(pred, target).score


def r_cons(pred: ForecastAction | None, decoded_profile: ForecastAction) -> float:
    """R_cons(a_hat, g(y_hat)): agreement of the action with the profile of the decoded trajectory."""
    return score_action(pred, decoded_profile).score


def completeness(action: ForecastAction | None) -> float:
    """Share of all schema fields present and valid (M4 action success rate; 1.0 = complete)."""
    if action is None:
        return 0.0
    return sum(getattr(action, f) is not None for f in FIELD_ORDER) / len(FIELD_ORDER)
