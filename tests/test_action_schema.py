"""Schema: field kinds, canonical text, JSON-schema / tool export agree with the pydantic model."""

import json

import pytest
from pydantic import ValidationError

from forecast_action.schema import (
    FIELD_ORDER,
    FIELD_SPECS,
    SCORED_FIELDS,
    ForecastAction,
    action_json_schema,
    openai_tool_spec,
)

PAPER_FIELDS = ["future_window", "start_value", "end_value", "max_value", "min_value", "mean_close", "direction",
                "end_change_pct", "range_pct", "volatility_level", "range_width_bin", "max_drawdown_bin",
                "turning_point_count", "peak_timing_bin", "trough_timing_bin", "monotonicity", "trendline_fit",
                "tail_risk_level"]


def test_every_paper_field_has_a_kind() -> None:
    assert set(FIELD_ORDER) == set(PAPER_FIELDS) == set(ForecastAction.model_fields)
    assert FIELD_SPECS["direction"].kind == "categorical"
    assert FIELD_SPECS["volatility_level"].values == ("low", "medium", "high")
    assert FIELD_SPECS["peak_timing_bin"].kind == "ordinal"
    assert FIELD_SPECS["turning_point_count"].integer
    assert "future_window" not in SCORED_FIELDS and len(SCORED_FIELDS) == 17


def test_canonical_text_order_and_rounding() -> None:
    a = ForecastAction(trendline_fit="weak", start_value=86.0049, direction="down", end_change_pct=-2.7912)
    assert a.to_text() == '{"start_value": 86.0, "direction": "down", "end_change_pct": -2.79, "trendline_fit": "weak"}'
    assert a.to_block().startswith("<forecast_action>{") and a.to_block().endswith("}</forecast_action>")
    assert ForecastAction().to_text() == "{}"


def test_model_rejects_invalid_values() -> None:
    for bad in ({"direction": "sideways"}, {"start_value": -1.0}, {"future_window": "next week"},
                {"volatility_level": "extreme"}, {"range_pct": float("nan")}, {"colour": "red"}):
        with pytest.raises(ValidationError):
            ForecastAction(**bad)


def test_json_schema_matches_the_model() -> None:
    schema = action_json_schema()
    props = schema["properties"]
    assert list(props) == list(FIELD_ORDER) and schema["additionalProperties"] is False
    for name, spec in FIELD_SPECS.items():
        if spec.values:
            assert props[name]["enum"] == list(spec.values)
    assert props["turning_point_count"]["type"] == "integer" and props["end_change_pct"]["minimum"] == -100.0
    tool = openai_tool_spec(horizon=7)
    assert tool["type"] == "function" and tool["function"]["name"] == "forecast_action"
    assert "7 trading days" in tool["function"]["description"]
    json.dumps(tool)  # serialisable


def test_json_schema_validates_model_output() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    a = ForecastAction(future_window="t+1_t+10", direction="flat", turning_point_count=2, range_pct=1.5)
    jsonschema.validate(json.loads(a.to_text()), action_json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"direction": "sideways"}, action_json_schema())
