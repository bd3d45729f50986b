"""The structured forecast action (Stock-R1 §3.3, App. B.2): a typed, field-factorised profile of the
next S days that the policy writes and the decoder executes.

Every field is optional so that partial actions (an LLM that wrote only ``direction``) exist as
values; completeness is measured separately (``score.completeness``, the paper's M4).

Field kinds decide how a field is scored (``score.py``) and embedded (``encoder.py``):

- categorical: unordered set, exact-match credit (``direction``, ``monotonicity``).
- ordinal: ordered bins, credit ``1 - |i - j| / (B - 1)`` (volatility, range width, drawdown, tail
  risk, peak/trough timing, trendline fit).
- numeric: real or integer value with a clip range, tolerance credit (prices, percentages, counts).

``future_window`` is metadata (it is fixed by the horizon): it is parsed, rendered and counted for
completeness but not scored or embedded (``FieldSpec.scored = False``), so a model cannot earn
reward for copying it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

try:
    from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: F401 (the parser's)
except ImportError:  # GPU images ship without pydantic and cannot install it (docs/scale.md): a tested stand-in
    from forecast_action._standin import BaseModel, ConfigDict, Field, ValidationError  # noqa: F401

ACTION_OPEN, ACTION_CLOSE = "<forecast_action>", "</forecast_action>"

Kind = Literal["categorical", "ordinal", "numeric"]
LEVELS = ("low", "medium", "high")
TIMING = ("early", "middle", "late")
WINDOW_RE = re.compile(r"^t\+(\d+)_t\+(\d+)$")


@dataclass(frozen=True)
class FieldSpec:
    """How one action field is typed, scored and clipped.

    values: allowed values (categorical) or bins in increasing order (ordinal); None for numeric.
    lo, hi: clip range for numeric fields (the parser clips and records an error outside it).
    scale:  ``price`` (same unit as the close), ``pct`` (percent of the start close), ``count``,
            ``window`` (the ``t+a_t+b`` string).
    """

    name: str
    kind: Kind
    description: str
    values: tuple[str, ...] | None = None
    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False
    scale: Literal["price", "pct", "count", "window", "none"] = "none"
    scored: bool = True

    @property
    def n_bins(self) -> int:
        return len(self.values or ())


_SPECS = [
    FieldSpec("future_window", "categorical", "forecast window, 't+1_t+S'", scale="window", scored=False),
    FieldSpec("start_value", "numeric", "close at the decision day t", lo=0.0, hi=1e9, scale="price"),
    FieldSpec("end_value", "numeric", "close at t+S", lo=0.0, hi=1e9, scale="price"),
    FieldSpec("max_value", "numeric", "highest close over t+1..t+S", lo=0.0, hi=1e9, scale="price"),
    FieldSpec("min_value", "numeric", "lowest close over t+1..t+S", lo=0.0, hi=1e9, scale="price"),
    FieldSpec("mean_close", "numeric", "mean close over t+1..t+S", lo=0.0, hi=1e9, scale="price"),
    FieldSpec("direction", "categorical", "sign of the end change beyond a flat band", ("up", "down", "flat")),
    FieldSpec("end_change_pct", "numeric", "(end - start) / start in %", lo=-100.0, hi=1000.0, scale="pct"),
    FieldSpec("range_pct", "numeric", "(max - min) / start in %", lo=0.0, hi=1000.0, scale="pct"),
    FieldSpec("volatility_level", "ordinal", "std of daily close log returns, train tertiles", LEVELS),
    FieldSpec("range_width_bin", "ordinal", "range_pct, train tertiles", ("narrow", "moderate", "wide")),
    FieldSpec("max_drawdown_bin", "ordinal", "peak-to-trough decline of the close path, train tertiles", LEVELS),
    FieldSpec("tail_risk_level", "ordinal", "worst single-day close loss, train tertiles", LEVELS),
    FieldSpec("turning_point_count", "numeric", "direction changes of the close path", lo=0, hi=100,
              integer=True, scale="count"),
    FieldSpec("peak_timing_bin", "ordinal", "third of the window holding the highest close", TIMING),
    FieldSpec("trough_timing_bin", "ordinal", "third of the window holding the lowest close", TIMING),
    FieldSpec("monotonicity", "categorical", "Kendall tau of the close path vs time beyond +-0.6",
              ("increasing", "decreasing", "mixed")),
    FieldSpec("trendline_fit", "ordinal", "R^2 of a linear trend on the close path, train tertiles",
              ("weak", "moderate", "strong")),
]
FIELD_SPECS: dict[str, FieldSpec] = {s.name: s for s in _SPECS}
FIELD_ORDER: tuple[str, ...] = tuple(FIELD_SPECS)
SCORED_FIELDS: tuple[str, ...] = tuple(n for n, s in FIELD_SPECS.items() if s.scored)
# Price fields are rounded to 2 decimals and percentages to 2 decimals in the canonical text form.
_ROUND = {"price": 2, "pct": 2}


def _lit(name: str) -> Any:
    return Literal[FIELD_SPECS[name].values]  # type: ignore[valid-type]


class ForecastAction(BaseModel):
    """One forecast action; ``None`` means the field was not given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    future_window: str | None = Field(default=None, pattern=WINDOW_RE.pattern)
    start_value: float | None = Field(default=None, ge=0.0, le=1e9, allow_inf_nan=False)
    end_value: float | None = Field(default=None, ge=0.0, le=1e9, allow_inf_nan=False)
    max_value: float | None = Field(default=None, ge=0.0, le=1e9, allow_inf_nan=False)
    min_value: float | None = Field(default=None, ge=0.0, le=1e9, allow_inf_nan=False)
    mean_close: float | None = Field(default=None, ge=0.0, le=1e9, allow_inf_nan=False)
    direction: _lit("direction") | None = None
    end_change_pct: float | None = Field(default=None, ge=-100.0, le=1000.0, allow_inf_nan=False)
    range_pct: float | None = Field(default=None, ge=0.0, le=1000.0, allow_inf_nan=False)
    volatility_level: _lit("volatility_level") | None = None
    range_width_bin: _lit("range_width_bin") | None = None
    max_drawdown_bin: _lit("max_drawdown_bin") | None = None
    tail_risk_level: _lit("tail_risk_level") | None = None
    turning_point_count: int | None = Field(default=None, ge=0, le=100)
    peak_timing_bin: _lit("peak_timing_bin") | None = None
    trough_timing_bin: _lit("trough_timing_bin") | None = None
    monotonicity: _lit("monotonicity") | None = None
    trendline_fit: _lit("trendline_fit") | None = None

    def present(self) -> dict[str, Any]:
        """The given fields, in canonical order."""
        return {k: getattr(self, k) for k in FIELD_ORDER if getattr(self, k) is not None}

    def rounded(self) -> ForecastAction:
        """The action as its canonical text form carries it (prices and percentages to 2 dp)."""
        out = {}
        for k, v in self.present().items():
            digits = _ROUND.get(FIELD_SPECS[k].scale)
            out[k] = round(float(v), digits) if digits is not None else v
        return ForecastAction(**out)

    def to_text(self) -> str:
        """Canonical single-line JSON, keys in App. B.2 order: what the LLM is trained to write."""
        return json.dumps(self.rounded().present(), separators=(", ", ": "))

    def to_block(self) -> str:
        """``<forecast_action>{json}</forecast_action>``: the tool call as it appears in a rollout."""
        return f"{ACTION_OPEN}{self.to_text()}{ACTION_CLOSE}"


def _field_schema(spec: FieldSpec) -> dict[str, Any]:
    if spec.kind != "numeric":
        if spec.values is None:
            return {"type": "string", "pattern": WINDOW_RE.pattern, "description": spec.description}
        return {"type": "string", "enum": list(spec.values), "description": spec.description}
    out: dict[str, Any] = {"type": "integer" if spec.integer else "number", "description": spec.description}
    if math.isfinite(spec.lo):
        out["minimum"] = spec.lo
    if math.isfinite(spec.hi):
        out["maximum"] = spec.hi
    return out


def action_json_schema() -> dict[str, Any]:
    """JSON schema of the action built from ``FIELD_SPECS`` (no ``null`` unions, so it is clean enough
    for constrained decoding and OpenAI tool calling). No field is required: partial actions are
    legal and scored by completeness."""
    return {
        "type": "object",
        "title": "ForecastAction",
        "properties": {name: _field_schema(spec) for name, spec in FIELD_SPECS.items()},
        "additionalProperties": False,
    }


def openai_tool_spec(horizon: int = 10) -> dict[str, Any]:
    """The action as an OpenAI-style function tool for served models."""
    return {
        "type": "function",
        "function": {
            "name": "forecast_action",
            "description": (
                f"Describe your outlook for the next {horizon} trading days as a structured profile; "
                "a time-series decoder conditioned on it returns forecast Close/High/Low/Volume paths."
            ),
            "parameters": action_json_schema(),
        },
    }
