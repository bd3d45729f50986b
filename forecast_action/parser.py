"""Parse a forecast action out of messy LLM text. ``parse_action`` never raises.

Accepted forms (inside ``<forecast_action>..</forecast_action>``, an unterminated block, or bare text):
strict JSON, JSON in code fences, trailing commas, single quotes, unquoted keys, Python literals,
OpenAI tool-call wrappers (``{"name": .., "arguments": {..}}``), and the ``key: value`` lines of the
paper's case study, several pairs per line (``start_value: 86.0   end_value: 83.6``).

Normalisation: keys and values are case-folded; key synonyms (``volatility`` -> ``volatility_level``,
``peak_timing`` -> ``peak_timing_bin``) and value synonyms (``bullish`` -> ``up``, ``non_monotonic`` ->
``mixed``) are mapped; timing given as days (``t+8_t+8``, ``day 8``, ``8``) is binned with the window's
horizon (``future_window`` if present, else 10). Numbers may carry ``$``, ``%``, ``+`` or a unicode minus.

Bad input loses nothing: unknown keys are listed in ``unknown_fields`` (and logged), invalid values
become ``FieldError``s and are dropped, out-of-range numbers are clipped with an error noted. If no field
survives, ``action`` is None and the errors say why.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from forecast_action.derive import timing_bin
from forecast_action.schema import ACTION_CLOSE, ACTION_OPEN, FIELD_SPECS, ForecastAction, ValidationError

log = logging.getLogger(__name__)
MAX_CHARS = 20_000  # an action is ~600 characters; longer blocks are truncated (and noted)


@dataclass(frozen=True)
class FieldError:
    """One problem with one field. code: unknown_field | invalid_value | out_of_range | no_block |
    no_fields | truncated | duplicate | internal."""

    field: str
    code: str
    message: str
    raw: str = ""


@dataclass(frozen=True)
class ParseResult:
    action: ForecastAction | None
    errors: list[FieldError] = field(default_factory=list)
    unknown_fields: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.action is not None


KEY_SYNONYMS: dict[str, str] = {
    "window": "future_window", "horizon": "future_window", "forecast_window": "future_window",
    "start": "start_value", "start_price": "start_value", "start_close": "start_value",
    "current_price": "start_value", "end": "end_value", "end_price": "end_value", "end_close": "end_value",
    "target_price": "end_value", "max": "max_value", "max_price": "max_value", "max_close": "max_value",
    "min": "min_value", "min_price": "min_value", "min_close": "min_value", "mean": "mean_close",
    "mean_value": "mean_close", "mean_price": "mean_close", "avg_close": "mean_close",
    "average_close": "mean_close", "trend": "direction", "trend_direction": "direction",
    "end_change": "end_change_pct", "change_pct": "end_change_pct", "pct_change": "end_change_pct",
    "return_pct": "end_change_pct", "end_change_percent": "end_change_pct", "range": "range_pct",
    "range_percent": "range_pct", "volatility": "volatility_level", "vol": "volatility_level",
    "volatility_bin": "volatility_level", "vol_level": "volatility_level", "range_width": "range_width_bin",
    "range_bin": "range_width_bin", "max_drawdown": "max_drawdown_bin", "drawdown": "max_drawdown_bin",
    "drawdown_bin": "max_drawdown_bin", "max_drawdown_level": "max_drawdown_bin", "tail_risk": "tail_risk_level",
    "tail_risk_bin": "tail_risk_level", "turning_points": "turning_point_count",
    "turning_point": "turning_point_count", "n_turning_points": "turning_point_count",
    "num_turning_points": "turning_point_count", "peak_timing": "peak_timing_bin", "peak_time": "peak_timing_bin",
    "peak_day": "peak_timing_bin", "trough_timing": "trough_timing_bin", "trough_time": "trough_timing_bin",
    "trough_day": "trough_timing_bin", "monotonic": "monotonicity", "monotone": "monotonicity",
    "trendline": "trendline_fit", "trend_fit": "trendline_fit", "trend_strength": "trendline_fit",
}
_LEVEL = {"low": "low", "lo": "low", "very_low": "low", "small": "low", "narrow": "low", "minimal": "low",
          "medium": "medium", "med": "medium", "mid": "medium", "middle": "medium", "moderate": "medium",
          "normal": "medium", "average": "medium", "high": "high", "hi": "high", "very_high": "high",
          "elevated": "high", "large": "high", "wide": "high", "extreme": "high", "severe": "high"}
VALUE_SYNONYMS: dict[str, dict[str, str]] = {
    "direction": {"up": "up", "bullish": "up", "rise": "up", "rising": "up", "increase": "up", "upward": "up",
                  "positive": "up", "higher": "up", "long": "up", "down": "down", "bearish": "down",
                  "fall": "down", "falling": "down", "decline": "down", "declining": "down", "downward": "down",
                  "negative": "down", "lower": "down", "short": "down", "flat": "flat", "sideways": "flat",
                  "neutral": "flat", "stable": "flat", "unchanged": "flat", "range_bound": "flat"},
    "volatility_level": _LEVEL, "max_drawdown_bin": _LEVEL, "tail_risk_level": _LEVEL,
    "range_width_bin": {k: {"low": "narrow", "medium": "moderate", "high": "wide"}[v] for k, v in _LEVEL.items()}
    | {"tight": "narrow"},
    "peak_timing_bin": {"early": "early", "beginning": "early", "start": "early", "front": "early",
                        "middle": "middle", "mid": "middle", "center": "middle", "midway": "middle",
                        "late": "late", "end": "late", "final": "late", "back": "late"},
    "monotonicity": {"increasing": "increasing", "up": "increasing", "rising": "increasing",
                     "monotonic_increasing": "increasing", "decreasing": "decreasing", "down": "decreasing",
                     "falling": "decreasing", "monotonic_decreasing": "decreasing", "mixed": "mixed",
                     "non_monotonic": "mixed", "nonmonotonic": "mixed", "not_monotonic": "mixed",
                     "choppy": "mixed", "none": "mixed", "oscillating": "mixed", "volatile": "mixed"},
    "trendline_fit": {"weak": "weak", "poor": "weak", "low": "weak", "none": "weak", "moderate": "moderate",
                      "medium": "moderate", "mid": "moderate", "fair": "moderate", "strong": "strong",
                      "high": "strong", "good": "strong", "very_strong": "strong"},
}
VALUE_SYNONYMS["trough_timing_bin"] = VALUE_SYNONYMS["peak_timing_bin"]

_FENCE = re.compile(r"```[a-zA-Z]*")
_KV = re.compile(
    r"""["']?([A-Za-z_][A-Za-z0-9_ \-]{0,40}?)["']?\s*[:=]\s*("[^"\n]*"|'[^'\n]*'|day\s+\d+|[^\s,;{}\[\]"']+)"""
)
_DAYS = re.compile(r"(?:t\s*\+\s*|day\s*|d)?(\d{1,3})")
_WINDOW = re.compile(r"t\s*\+\s*(\d{1,3})\s*(?:_|-|to|\.\.|,|~)\s*t\s*\+\s*(\d{1,3})")


def _safe_str(raw: Any, n: int = 200) -> str:
    try:
        return str(raw)[:n]
    except ValueError:  # e.g. an int too long to print
        return f"<unprintable {type(raw).__name__}>"


def _norm(s: str) -> str:
    return re.sub(r"[\s\-]+", "_", s.strip().strip("\"'").strip().lower())


def extract_block(text: str) -> tuple[str, list[FieldError]]:
    """The text of the action: between the first open tag and the next close tag (or the end)."""
    errors: list[FieldError] = []
    start = text.find(ACTION_OPEN)
    if start >= 0:
        body = text[start + len(ACTION_OPEN):]
        end = body.find(ACTION_CLOSE)
        if end < 0:
            errors.append(FieldError("_block", "truncated", f"no {ACTION_CLOSE}; parsed to the end of the text"))
        else:
            body = body[:end]
    else:
        end = text.find(ACTION_CLOSE)
        body = text[:end] if end >= 0 else text
    if len(body) > MAX_CHARS:
        errors.append(FieldError("_block", "truncated", f"action text longer than {MAX_CHARS} chars; truncated"))
        body = body[:MAX_CHARS]
    return body, errors


def _json_candidates(body: str) -> list[str]:
    s = _FENCE.sub("", body).replace("```", "")
    i = s.find("{")
    if i < 0:
        return []
    j = s.rfind("}")
    obj = s[i : j + 1] if j > i else s[i:] + "}"
    repaired = re.sub(r",\s*([}\]])", r"\1", obj)
    quoted = re.sub(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:", r'\1"\2":', repaired)
    return [obj, repaired, quoted.replace("'", '"')]


def _load_mapping(body: str) -> dict[str, Any] | None:
    """Try strict JSON, then light repairs, then a Python literal."""
    for cand in _json_candidates(body):
        for loader in (json.loads, ast.literal_eval):
            try:
                with warnings.catch_warnings():  # literal_eval warns on odd literals like "1_t"
                    warnings.simplefilter("ignore", SyntaxWarning)
                    obj = loader(cand)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(obj, dict):
                return _unwrap(obj)
    return None


def _unwrap(obj: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """OpenAI-style ``{"name": .., "arguments": {..} | "json"}`` or ``{"forecast_action": {..}}``."""
    if depth > 3:
        return obj
    for key in ("arguments", "parameters", "forecast_action", "action"):
        inner = obj.get(key)
        if isinstance(inner, str) and depth < 3:
            loaded = _load_mapping(inner)
            if loaded is not None:
                return loaded
        if isinstance(inner, dict):
            return _unwrap(inner, depth + 1)
    return obj


def _scan_pairs(body: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _KV.finditer(_FENCE.sub("", body))]


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        try:
            v = float(raw)
        except OverflowError:
            return None
    else:
        s = str(raw).strip().strip("\"'").replace("\u2212", "-").replace("$", "").replace("%", "")
        s = s.replace(",", "").replace("_", "").strip()
        try:
            v = float(s)
        except (ValueError, OverflowError):
            return None
    return v if math.isfinite(v) else None


def _horizon(window: str | None) -> int:
    if window:
        m = re.fullmatch(r"t\+(\d+)_t\+(\d+)", window)
        if m and int(m.group(2)) > 0:
            return int(m.group(2))
    return 10


def _value(name: str, raw: Any, horizon: int) -> tuple[Any, FieldError | None]:
    """(normalised value or None, error or None) for one known field."""
    spec = FIELD_SPECS[name]
    text = _safe_str(raw)
    if spec.kind == "numeric":
        v = _number(raw)
        if v is None:
            return None, FieldError(name, "invalid_value", f"{name} needs a finite number", text)
        err = None
        if v < spec.lo or v > spec.hi:
            clipped = min(max(v, spec.lo), spec.hi)
            err = FieldError(name, "out_of_range", f"{name}={v:g} outside [{spec.lo:g}, {spec.hi:g}]; "
                             f"clipped to {clipped:g}", text)
            v = clipped
        return (int(round(v)) if spec.integer else v), err
    s = _norm(text)
    if name == "future_window":
        m = _WINDOW.fullmatch(s) or _WINDOW.search(s)
        if m and 0 < int(m.group(1)) <= int(m.group(2)):
            return f"t+{int(m.group(1))}_t+{int(m.group(2))}", None
        m = re.fullmatch(r"(\d{1,3})(?:_?d|_?days?)?", s)
        if m and int(m.group(1)) > 0:
            return f"t+1_t+{int(m.group(1))}", None
        return None, FieldError(name, "invalid_value", "future_window must look like 't+1_t+10'", text)
    mapped = VALUE_SYNONYMS.get(name, {}).get(s)
    if mapped is None and s in (spec.values or ()):
        mapped = s
    if mapped is None and name in ("peak_timing_bin", "trough_timing_bin"):
        days = [int(d) for d in _DAYS.findall(s)]
        if days and all(0 < d <= horizon for d in days):
            mapped = spec.values[int(timing_bin(round(sum(days) / len(days)), horizon))]  # type: ignore[index]
    if mapped is None:
        return None, FieldError(name, "invalid_value", f"{name} must be one of {list(spec.values or ())}", text)
    return mapped, None


def _parse(text: str) -> ParseResult:
    if not isinstance(text, str):
        return ParseResult(None, [FieldError("_block", "no_block", f"expected text, got {type(text).__name__}")])
    body, errors = extract_block(text)
    mapping = _load_mapping(body)
    pairs = list(mapping.items()) if mapping is not None else _scan_pairs(body)
    if not pairs:
        errors.append(FieldError("_block", "no_fields", "no 'key: value' pairs found in the action text",
                                 body[:200]))
        return ParseResult(None, errors)
    known: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in pairs:
        k = _norm(str(key))
        k = KEY_SYNONYMS.get(k, k)
        if k not in FIELD_SPECS:
            unknown.append(_safe_str(key, 60))
            continue
        if k in known:
            errors.append(FieldError(k, "duplicate", f"{k} given more than once; the first value is kept",
                                     _safe_str(raw)))
            continue
        known[k] = raw
    values: dict[str, Any] = {}
    window = None
    if "future_window" in known:
        window, err = _value("future_window", known["future_window"], 10)
        if err:
            errors.append(err)
    horizon = _horizon(window)
    for k, raw in known.items():
        if raw is None or (isinstance(raw, str) and _norm(raw) in ("", "null", "none", "n/a", "na")
                           and FIELD_SPECS[k].kind == "numeric"):
            errors.append(FieldError(k, "invalid_value", f"{k} is empty", _safe_str(raw)))
            continue
        v, err = (window, None) if k == "future_window" else _value(k, raw, horizon)
        if err:
            errors.append(err)
        if v is not None:
            values[k] = v
    if unknown:
        log.info("forecast action: ignored unknown fields %s", unknown)
        errors.extend(FieldError(u, "unknown_field", f"unknown field {u!r} ignored") for u in unknown)
    if not values:
        errors.append(FieldError("_block", "no_fields", "no usable field in the action"))
        return ParseResult(None, errors, unknown)
    while values:
        try:
            return ParseResult(ForecastAction(**values), errors, unknown)
        except ValidationError as e:  # a value the normalisation let through; drop it, keep the rest
            bad = {str(err["loc"][0]) for err in e.errors() if err.get("loc")} or set(values)
            for k in bad:
                errors.append(FieldError(k, "invalid_value", f"{k} rejected by the schema",
                                         _safe_str(values.pop(k, ""))))
    errors.append(FieldError("_block", "no_fields", "no usable field in the action"))
    return ParseResult(None, errors, unknown)


def parse_action(text: str) -> ParseResult:
    """Parse the action in ``text``. Never raises: any failure is returned as a ``FieldError``."""
    try:
        return _parse(text)
    except Exception as e:  # noqa: BLE001 - the contract is "never raises"; the test asserts this never fires
        log.exception("parse_action internal error")
        return ParseResult(None, [FieldError("_block", "internal", f"{type(e).__name__}: {e}")])
