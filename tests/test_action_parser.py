"""parse_action: the messy forms LLMs write, normalisation, bad input, and a fuzz test.

Fuzz budget: 2500 random texts + 2000 token soups + 2000 x 3 truncations/mutations of valid actions +
1500 schema-shaped JSON objects + 1000 round trips = 13,000 strings, none may raise or hit the
parser's internal-error net."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_action.parser import parse_action
from forecast_action.schema import FIELD_ORDER, FIELD_SPECS, ForecastAction

CASE_STUDY = """The recovery is unlikely to reclaim the $86 starting level. <forecast_action> {future_window: t+1_t+10
start_value: 86.0   end_value: 83.6
max_value: 84.8   min_value: 77.6
direction: down    end_change_pct: -2.79
volatility: medium   peak_timing: t+8_t+8
trough_timing: t+5_t+6   monotonicity: non_monotonic
mean_close: 81.3    tail_risk: medium
... } </forecast_action> The time-series decoder forecasts"""


def test_paper_case_study_lines() -> None:
    r = parse_action(CASE_STUDY)
    assert r.errors == [] and r.unknown_fields == []
    assert r.action == ForecastAction(
        future_window="t+1_t+10", start_value=86.0, end_value=83.6, max_value=84.8, min_value=77.6,
        direction="down", end_change_pct=-2.79, volatility_level="medium", peak_timing_bin="late",
        trough_timing_bin="middle", monotonicity="mixed", mean_close=81.3, tail_risk_level="medium")


def test_json_variants() -> None:
    expected = ForecastAction(direction="up", volatility_level="high", range_pct=3.5)
    for text in [
        '<forecast_action>{"direction": "up", "volatility_level": "high", "range_pct": 3.5}</forecast_action>',
        '<forecast_action>\n```json\n{"direction": "up", "volatility_level": "high", "range_pct": 3.5,}\n```\n',
        "{'direction': 'UP', 'volatility_level': 'High', 'range_pct': '3.5%'}",
        "{direction: bullish, volatility: high, range_pct: 3.5}",
        '{"name": "forecast_action", "arguments": "{\\"direction\\": \\"up\\", \\"vol\\": \\"high\\", '
        '\\"range\\": 3.5}"}',
        "direction = Up; volatility-level: HIGH, Range_Pct: +3.5</forecast_action> trailing text",
    ]:
        r = parse_action(text)
        assert r.action == expected, text


def test_bad_input_is_kept_as_errors() -> None:
    r = parse_action('<forecast_action>{"direction": "sideways-ish", "start_value": -5, "foo": 1, '
                     '"range_pct": "wide", "turning_point_count": 2.6}</forecast_action>')
    codes = {(e.field, e.code) for e in r.errors}
    assert ("direction", "invalid_value") in codes and ("range_pct", "invalid_value") in codes
    assert ("start_value", "out_of_range") in codes and ("foo", "unknown_field") in codes
    assert r.unknown_fields == ["foo"]
    assert r.action == ForecastAction(start_value=0.0, turning_point_count=3)
    none = parse_action("<forecast_action>I think it goes up</forecast_action>")
    assert none.action is None and none.errors[-1].code == "no_fields"
    assert parse_action("").action is None
    trunc = parse_action('<forecast_action>{"direction": "down", "end_val')
    assert trunc.action == ForecastAction(direction="down") and trunc.errors[0].code == "truncated"
    dup = parse_action("direction: up direction: down")
    assert dup.action == ForecastAction(direction="up") and dup.errors[0].code == "duplicate"


def test_timing_days_use_the_window_horizon() -> None:
    assert parse_action("peak_timing: t+8_t+8").action.peak_timing_bin == "late"
    # horizon 30: day 8 is in the first third
    assert parse_action("future_window: t+1_t+30 peak_timing: day 8").action.peak_timing_bin == "early"
    assert parse_action("trough_timing: 12").action is None  # day 12 outside a 10-day window


# ---------------------------------------------------------------- fuzzing
def _value(name: str):
    spec = FIELD_SPECS[name]
    if name == "future_window":
        return st.integers(1, 60).map(lambda s: f"t+1_t+{s}")
    if spec.kind != "numeric":
        return st.sampled_from(spec.values)
    if spec.integer:
        return st.integers(0, 100)
    lo, hi = (0.0, 1e6) if spec.scale == "price" else (spec.lo, spec.hi)
    return st.floats(lo, hi, allow_nan=False)


valid_actions = st.fixed_dictionaries({}, optional={n: _value(n) for n in FIELD_ORDER}).map(
    lambda d: ForecastAction(**d)).filter(lambda a: bool(a.present()))


def _kv_lines(a: ForecastAction, per_line: int) -> str:
    items = [f"{k}: {v}" for k, v in json.loads(a.to_text()).items()]
    lines = ["   ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "<forecast_action> {" + "\n".join(lines) + "\n} </forecast_action>"


def _assert_clean(r) -> None:
    assert all(e.code != "internal" for e in r.errors), r.errors


@settings(max_examples=1000, deadline=None)
@given(valid_actions, st.integers(1, 4), st.booleans())
def test_valid_actions_round_trip(a: ForecastAction, per_line: int, kv: bool) -> None:
    r = parse_action(_kv_lines(a, per_line) if kv else "reasoning " + a.to_block() + " more")
    assert r.errors == [] and r.action == a.rounded()


@settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_random_text_never_raises(text: str) -> None:
    _assert_clean(parse_action(text))


TOKENS = (list(FIELD_ORDER) + ["volatility", "peak_timing", "tail_risk", "{", "}", "[", "]", ":", "=", ",",
          "'", '"', "```json", "```", "\n", " ", "<forecast_action>", "</forecast_action>", "null", "NaN",
          "-1e999", "1e400", "t+8_t+8", "up", "bearish", "non_monotonic", "high", "-", "%", "$", "9" * 5000])


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_token_soup_never_raises(text: str) -> None:
    _assert_clean(parse_action(text))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_actions, st.booleans(), st.data())
def test_truncated_and_mutated_actions_never_raise(a: ForecastAction, kv: bool, data) -> None:
    text = _kv_lines(a, 2) if kv else a.to_block()
    cut = data.draw(st.integers(0, len(text)))
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    junk = data.draw(st.text(max_size=8))
    for t in (text[:cut], text[:i] + junk + text[j:], text[:i] + text[j:]):
        r = parse_action(t)
        _assert_clean(r)
        if r.action is not None:  # whatever survives is a valid action
            assert ForecastAction(**r.action.present()) == r.action


_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
            | st.sampled_from([v for s in FIELD_SPECS.values() for v in (s.values or ())]))
json_values = _scalars | st.lists(_scalars, max_size=3) | st.dictionaries(st.text(max_size=6), _scalars, max_size=2)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(list(FIELD_ORDER) + ["vol", "peak_timing", "x", "arguments"]) | st.text(),
                       json_values, max_size=8), st.booleans())
def test_schema_shaped_json_never_raises(d: dict, fence: bool) -> None:
    body = json.dumps(d)
    r = parse_action("<forecast_action>" + (f"```json\n{body}\n```" if fence else body) + "</forecast_action>")
    _assert_clean(r)
