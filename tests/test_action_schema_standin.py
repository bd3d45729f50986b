"""forecast_action/_standin.py (the schema's model where pydantic is missing, e.g. the GPU image) agrees
with pydantic on what it accepts, what it coerces to, and which field an error names."""

import importlib
import json
import sys

import pytest

pytest.importorskip("pydantic")

CASES = [{}, {"start_value": 86.0049}, {"start_value": 3}, {"start_value": "1.5"}, {"start_value": True},
         {"start_value": -1.0}, {"start_value": 1e10}, {"start_value": float("inf")}, {"range_pct": float("nan")},
         {"start_value": "abc"}, {"start_value": None}, {"start_value": [1]}, {"end_change_pct": -100.0},
         {"end_change_pct": -100.5}, {"turning_point_count": 3}, {"turning_point_count": 3.0},
         {"turning_point_count": 3.5}, {"turning_point_count": "4"}, {"turning_point_count": True},
         {"turning_point_count": 101}, {"turning_point_count": -1}, {"turning_point_count": 2**70},
         {"direction": "up"}, {"direction": "UP"}, {"direction": "sideways"}, {"direction": 1},
         {"volatility_level": "extreme"}, {"trendline_fit": "strong"}, {"future_window": "t+1_t+10"},
         {"future_window": "next week"}, {"future_window": 10}, {"colour": "red"},
         {"direction": "down", "colour": "red", "start_value": -5},
         {"direction": "flat", "max_value": 10.0, "min_value": 9.0, "monotonicity": "mixed", "peak_timing_bin": "late"}]


@pytest.fixture(scope="module")
def standin():
    """forecast_action.schema imported afresh with pydantic unimportable."""
    import forecast_action

    saved = {k: sys.modules.pop(k) for k in [m for m in sys.modules if m == "pydantic" or m.startswith("pydantic.")]}
    schema = sys.modules.pop("forecast_action.schema")
    sys.modules["pydantic"] = None  # import raises ImportError
    try:
        mod = importlib.import_module("forecast_action.schema")
    finally:
        del sys.modules["pydantic"]
        sys.modules.update(saved)
        sys.modules["forecast_action.schema"] = schema
        forecast_action.schema = schema  # the package attribute too: later imports get pydantic's again
    assert mod.BaseModel.__module__ == "forecast_action._standin"
    return mod


def outcome(schema, case):
    try:
        a = schema.ForecastAction(**case)
    except schema.ValidationError as e:
        return "error", sorted(str(err["loc"][0]) for err in e.errors())
    return "ok", [(k, v, type(v).__name__) for k, v in a.present().items()], a.to_text()


@pytest.mark.parametrize("case", CASES, ids=lambda c: json.dumps(c, default=str)[:60])
def test_standin_agrees_with_pydantic(standin, case) -> None:
    from forecast_action import schema

    assert schema.BaseModel.__module__.startswith("pydantic")
    assert outcome(standin, case) == outcome(schema, case)


def test_standin_model_api(standin) -> None:
    from forecast_action import schema

    a, b = standin.ForecastAction(direction="up", start_value=1.0), standin.ForecastAction(start_value=1, direction="up")
    assert a == b and hash(a) == hash(b) and a != standin.ForecastAction(direction="down")
    assert list(standin.ForecastAction.model_fields) == list(schema.ForecastAction.model_fields)
    assert a.model_dump() == schema.ForecastAction(direction="up", start_value=1.0).model_dump()
    assert a.model_dump_json(exclude_none=True) == schema.ForecastAction(direction="up", start_value=1.0).model_dump_json(
        exclude_none=True)
    with pytest.raises(TypeError):
        a.direction = "down"
    assert isinstance(standin.ValidationError([{"loc": ("x",), "msg": "m"}]), ValueError)
