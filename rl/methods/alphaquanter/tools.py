"""AlphaQuanter's point-in-time data tools (§3, §6.2, App. A) on the shared rollout engine.

The agent calls one tool at a time by writing Qwen's native tool-call block::

    <tool_call>{"name": "get_indicator", "arguments": {"indicator": "rsi"}}</tool_call>

and the engine appends ``<tool_response>...</tool_response>`` (not model-written, gen_mask 0).
Every tool is a typed function ``(store, ticker, t, **arguments) -> str`` over the data layer's
``PointInTimeStore`` as of the decision day t, so nothing after t can leak into an observation.
A malformed call (bad JSON, unknown tool, bad argument) returns an error observation and is
recorded in the payload, never raised: the process reward then scores it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llm.rollout import ToolResult
from llm.special_tokens import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN

# Indicator name -> (stockstats column template, category); {w} is the window argument.
INDICATORS: dict[str, tuple[str, str, int | None]] = {
    "sma": ("close_{w}_sma", "trend", 20),
    "ema": ("close_{w}_ema", "trend", 20),
    "macd": ("macd", "momentum", None),
    "macd_signal": ("macds", "momentum", None),
    "macd_hist": ("macdh", "momentum", None),
    "rsi": ("rsi_{w}", "momentum", 14),
    "roc": ("close_{w}_roc", "momentum", 12),
    "atr": ("atr_{w}", "volatility", 14),
    "boll_upper": ("boll_ub", "volatility", None),
    "boll_lower": ("boll_lb", "volatility", None),
    "obv": (None, "volume", None),  # hand-computed: cumulative signed volume
    "mfi": ("mfi", "volume", None),
    "vwma": ("vwma", "volume", None),
}


def _fmt(v: float) -> str:
    return "nan" if not np.isfinite(v) else f"{v:.4g}"


def obv(ohlcv: pd.DataFrame) -> pd.Series:
    """On-balance volume: cumulative volume signed by the close's daily direction."""
    return (np.sign(ohlcv["close"].diff().fillna(0.0)) * ohlcv["volume"]).cumsum()


def get_price_data(store, ticker: str, t: pd.Timestamp, days: int = 10) -> str:
    """Daily OHLCV for the last ``days`` trading days up to t."""
    if not 1 <= int(days) <= 60:
        raise ValueError("days must be in [1, 60]")
    f = store.ohlcv_until(ticker, t).tail(int(days))
    return "\n".join(f"{d.date()} O={_fmt(r.open)} H={_fmt(r.high)} L={_fmt(r.low)} C={_fmt(r.close)} V={_fmt(r.volume)}"
                     for d, r in f.iterrows())


def get_indicator(store, ticker: str, t: pd.Timestamp, indicator: str, window: int | None = None, days: int = 5) -> str:
    """Last ``days`` values of a technical indicator (trend / momentum / volatility / volume)."""
    import stockstats

    if indicator not in INDICATORS:
        raise ValueError(f"unknown indicator {indicator!r}; choose from {sorted(INDICATORS)}")
    col, cat, default_w = INDICATORS[indicator]
    w = int(window or default_w or 0)
    if default_w is not None and not 2 <= w <= 250:
        raise ValueError("window must be in [2, 250]")
    f = store.ohlcv_until(ticker, t)
    if col is None:
        series = obv(f)
    else:
        series = stockstats.wrap(f[["open", "high", "low", "close", "volume"]].astype(float).copy())[col.format(w=w)]
    name = indicator + (f"({w})" if default_w is not None else "")
    return f"{name} [{cat}]: " + ", ".join(_fmt(v) for v in series.tail(int(days)))


def get_fundamentals(store, ticker: str, t: pd.Timestamp) -> str:
    """The latest financial statement published before t."""
    st = store.fundamentals_asof(ticker, t)
    if st is None:
        return "no fundamentals published before this date"
    return f"{st.quarter} (published {st.published.date()}): " + ", ".join(f"{k}={_fmt(v)}" for k, v in st.items.items())


def get_news(store, ticker: str, t: pd.Timestamp, n: int = 5) -> str:
    """The ``n`` latest headlines stamped before the close of t-1, with their sentiment."""
    items = store.news_before(ticker, t, int(n))
    return "\n".join(f"{pd.Timestamp(x['time']).date()} [{x.get('sentiment')}] {x['title']}" for x in items) or "no news"


def get_macro(store, ticker: str, t: pd.Timestamp) -> str:
    """Latest release of each macro series before t (rates, inflation, ...)."""
    m = store.macro_asof(t)
    return "\n".join(f"{o.label}: {_fmt(o.value)}{o.unit} ({o.period.date()})" for o in m.values()) or "no macro data"


@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., str]
    args: dict[str, type]  # optional keyword arguments and their types
    doc: str


TOOLS: dict[str, ToolSpec] = {
    "get_price_data": ToolSpec(get_price_data, {"days": int}, "daily OHLCV for the last N days"),
    "get_indicator": ToolSpec(get_indicator, {"indicator": str, "window": int, "days": int},
                              f"technical indicator, one of {sorted(INDICATORS)}"),
    "get_fundamentals": ToolSpec(get_fundamentals, {}, "latest published financial statement"),
    "get_news": ToolSpec(get_news, {"n": int}, "latest headlines with sentiment"),
    "get_macro": ToolSpec(get_macro, {}, "latest macroeconomic indicators"),
}


def parse_call(call_text: str) -> tuple[str, dict[str, Any]]:
    """JSON ``{"name": ..., "arguments": {...}}`` -> (name, typed arguments); raises ValueError."""
    try:
        d = json.loads(call_text.strip())
    except json.JSONDecodeError as err:
        raise ValueError(f"tool call is not JSON ({err.msg})") from None
    if not isinstance(d, dict) or not isinstance(d.get("name"), str):
        raise ValueError('tool call needs {"name": str, "arguments": {...}}')
    name, args = d["name"], d.get("arguments") or {}
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; available: {sorted(TOOLS)}")
    if not isinstance(args, dict):
        raise ValueError("arguments must be an object")
    spec, typed = TOOLS[name], {}
    for k, v in args.items():
        if k not in spec.args:
            raise ValueError(f"{name}: unknown argument {k!r}; valid: {sorted(spec.args)}")
        try:
            typed[k] = spec.args[k](v)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: argument {k!r} must be {spec.args[k].__name__}") from None
    return name, typed


class AlphaQuanterTool:
    """The shared rollout engine's ``Tool`` for all data functions; ``sample_ref = (ticker, t)``."""

    name = "alphaquanter"
    open_tag = TOOL_CALL_OPEN
    close_tag = TOOL_CALL_CLOSE

    def __init__(self, store):
        self.store = store

    def __call__(self, sample_ref: Any, call_text: str) -> ToolResult:
        ticker, t = sample_ref[0], pd.Timestamp(sample_ref[1])
        try:
            name, args = parse_call(call_text)
            text = TOOLS[name].fn(self.store, ticker, t, **args)
        except (ValueError, KeyError, TypeError) as err:
            msg = str(err)
            return ToolResult(f"{TOOL_RESPONSE_OPEN}error: {msg}{TOOL_RESPONSE_CLOSE}", {"ok": False}, msg)
        return ToolResult(f"{TOOL_RESPONSE_OPEN}{text}{TOOL_RESPONSE_CLOSE}", {"ok": True, "name": name, "args": args})


def system_prompt(max_calls: int) -> str:
    tools = "\n".join(f"- {n}({', '.join(f'{a}: {tp.__name__}' for a, tp in s.args.items())}): {s.doc}" for n, s in TOOLS.items())
    return (
        "You are a trading agent. Plan which evidence you need, then call one tool at a time with\n"
        f'{TOOL_CALL_OPEN}{{"name": ..., "arguments": {{...}}}}{TOOL_CALL_CLOSE}, reason about each response inside '
        f"<think>...</think>, and use at most {max_calls} calls. Tools:\n{tools}\n"
        "Finish with <answer>BUY</answer>, <answer>SELL</answer> or <answer>HOLD</answer>."
    )
