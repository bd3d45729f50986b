"""AlphaQuanter rewards (§4.2, App. B.2): total = alpha * outcome + format + tool.

Outcome. The future is smoothed over several horizons, ``R = mean_h (P_{t+h} / P_t - 1)`` for
h in ``horizons``, and thresholded by theta into a regime: up (R > theta), down (R < -theta) or
neutral. Rewards: the matching action (BUY/up, SELL/down, HOLD/neutral) +1; the opposite side of
a strong trend (SELL in up, BUY in down) -1.0; HOLD in a trend (a missed opportunity) -0.75.
The paper gives no value for BUY/SELL in a neutral regime; we use -0.5 (trading on noise is
wrong, but milder than missing or fighting a trend). A missing/invalid decision scores -1.0.
Defaults theta = 1%, horizons (3, 5, 10) days, alpha = 2 (the paper: alpha emphasises outcome).

Process. Format score in [0, 1]: 0 without a valid ``<answer>BUY|SELL|HOLD</answer>`` or without
any ``<think>`` reasoning; otherwise 1 inside the target length interval of model-written words,
decaying linearly to 0 at half the lower bound / twice the upper bound. Tool score in [-1, 1]: 1
inside the target call-count interval (decaying by 0.5 per call outside), minus 0.25 per duplicate
call (same name and arguments), 0.5 per malformed call, and 0.5 for collect-then-conclude (two or
more calls with no reasoning between any consecutive pair, i.e. data gathered blindly).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl.methods.alphaquanter.tools import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
    parse_call,
)

ACTIONS = ("SELL", "HOLD", "BUY")
_ANSWER = re.compile(r"<answer>\s*(BUY|SELL|HOLD)\s*</answer>", re.I)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE)
                    + r"|" + re.escape(TOOL_RESPONSE_OPEN) + r".*?" + re.escape(TOOL_RESPONSE_CLOSE), re.S)


@dataclass(frozen=True)
class RewardConfig:
    theta: float = 0.01
    horizons: tuple[int, ...] = (3, 5, 10)
    alpha: float = 2.0
    neutral_trade: float = -0.5
    len_range: tuple[int, int] = (60, 400)  # model-written words
    call_range: tuple[int, int] = (2, 5)


def smoothed_return(prices: Sequence[float], horizons: Sequence[int]) -> float:
    """``prices[0]`` is P_t; mean of P_{t+h}/P_t - 1 over horizons (NaN if the path is too short)."""
    p = np.asarray(prices, float)
    if len(p) <= max(horizons):
        return float("nan")
    return float(np.mean([p[h] / p[0] - 1.0 for h in horizons]))


def regime(r: float, theta: float) -> int:
    return 1 if r > theta else (-1 if r < -theta else 0)


def outcome_score(action: str | None, smoothed: float, cfg: RewardConfig = RewardConfig()) -> float:
    if action not in ACTIONS:
        return -1.0
    side, reg = ACTIONS.index(action) - 1, regime(smoothed, cfg.theta)
    if side == reg:
        return 1.0
    if reg == 0:
        return cfg.neutral_trade
    return -0.75 if side == 0 else -1.0


@dataclass(frozen=True)
class Episode:
    """A parsed agent trajectory. calls: (name, arguments) or None when malformed; gaps[i] = words
    of model reasoning between call i-1 and call i (gaps[0]: before the first call)."""

    reasoning_words: int
    has_think: bool
    calls: tuple[tuple[str, str] | None, ...]
    gaps: tuple[int, ...]
    action: str | None


def parse_episode(text: str) -> Episode:
    calls, gaps, model_words, last = [], [], 0, 0
    for m in _BLOCK.finditer(text):
        between = len(re.sub(r"</?think>", " ", text[last:m.start()]).split())
        model_words += between
        last = m.end()
        if m.group(1) is None:  # a tool response: written by the tool, not the model
            continue
        gaps.append(between)
        try:
            name, args = parse_call(m.group(1))
            calls.append((name, json.dumps(args, sort_keys=True)))
        except ValueError:
            calls.append(None)
    model_words += len(re.sub(r"</?think>", " ", text[last:]).split())
    ans = _ANSWER.findall(text)
    return Episode(model_words, bool(_THINK.search(text)), tuple(calls), tuple(gaps), ans[-1].upper() if ans else None)


def _interval(x: float, lo: float, hi: float, below: float, above: float) -> float:
    if lo <= x <= hi:
        return 1.0
    return max(0.0, 1.0 - (lo - x) / below) if x < lo else max(0.0, 1.0 - (x - hi) / above)


def format_score(ep: Episode, cfg: RewardConfig = RewardConfig()) -> float:
    if ep.action is None or not ep.has_think:
        return 0.0
    lo, hi = cfg.len_range
    return _interval(ep.reasoning_words, lo, hi, lo / 2, hi)


def tool_score(ep: Episode, cfg: RewardConfig = RewardConfig()) -> float:
    lo, hi = cfg.call_range
    n = len(ep.calls)
    count = 1.0 if lo <= n <= hi else max(0.0, 1.0 - 0.5 * ((lo - n) if n < lo else (n - hi)))
    valid = [c for c in ep.calls if c is not None]
    duplicates = len(valid) - len(set(valid))
    malformed = len(ep.calls) - len(valid)
    blind = n >= 2 and all(g == 0 for g in ep.gaps[1:])
    return max(-1.0, count - 0.25 * duplicates - 0.5 * malformed - 0.5 * blind)


def total_reward(text: str, smoothed: float, cfg: RewardConfig = RewardConfig()) -> float:
    ep = parse_episode(text)
    return cfg.alpha * outcome_score(ep.action, smoothed, cfg) + format_score(ep, cfg) + tool_score(ep, cfg)


def _text(c) -> str:
    return c if isinstance(c, str) else "".join(m.get("content", "") for m in c)


def alphaquanter_rewards(prompts, completions, smoothed_return, **_) -> list[float | None]:
    """TRL-style total reward; ``smoothed_return`` per sample (None/NaN -> None)."""
    return [None if r is None or math.isnan(r) else total_reward(_text(c), float(r))
            for c, r in zip(completions, smoothed_return, strict=True)]
