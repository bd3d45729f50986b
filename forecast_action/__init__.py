"""Structured forecast actions (Stock-R1 §3.3): schema, g(y), parser, scorer; the action encoder and
the action-conditioned decoder live in ``encoder``/``decoder`` (they import torch, so not re-exported)."""

from forecast_action.derive import ActionThresholds, Trajectory, derive_action, derive_actions
from forecast_action.parser import FieldError, ParseResult, parse_action
from forecast_action.schema import FIELD_SPECS, ForecastAction
from forecast_action.score import ActionScore, completeness, r_act, r_cons, score_action

__all__ = [
    "FIELD_SPECS", "ActionScore", "ActionThresholds", "FieldError", "ForecastAction", "ParseResult",
    "Trajectory", "completeness", "derive_action", "derive_actions", "parse_action", "r_act", "r_cons",
    "score_action",
]
