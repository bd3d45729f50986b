"""AlphaQuanter in side-by-side runs (``stockr1 bench compare``): the episode prompt, a format
teacher and how its text becomes a side. ``env`` is a `rl.methods.env.DecisionEnv`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rl.methods.env import DecisionEnv


def build_query(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> tuple[str, str, dict]:
    """(episode prompt with ``max_tool_calls``, no evidence up front (it comes from the data tools),
    reward column smoothed_return)."""
    from rl.methods.alphaquanter.env import episode_prompt, smoothed_return_column

    tk, t = env.ref(i)
    r = smoothed_return_column(env.frames, [(tk, t)])[0]
    return episode_prompt(tk, t, int(m.get("max_tool_calls", 3))), "", {"smoothed_return": r}


def format_teacher(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> str:
    """Format teacher (AlphaQuanter ships none): one RSI call, its real point-in-time response, a
    short reasoning and the regime action of the outcome reward. The response tokens are trained
    on too (text SFT has no tool mask); at rollout the engine writes them, never the model."""
    from rl.methods.alphaquanter.rewards import RewardConfig, regime
    from rl.methods.alphaquanter.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, AlphaQuanterTool

    tk, t = env.ref(i)
    call = '{"name": "get_indicator", "arguments": {"indicator": "rsi"}}'
    obs = AlphaQuanterTool(env.store)((tk, t), call).observation
    r = build_query(env, i, m)[2]["smoothed_return"]
    act = ("SELL", "HOLD", "BUY")[1 + regime(r, RewardConfig().theta)] if np.isfinite(r) else "HOLD"
    return (f"<think>Momentum first: check the RSI of {tk}.</think>{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}{obs}"
            f"<think>The RSI reading sets the momentum view for the next days.</think><answer>{act}</answer>")


def position(text: str) -> int | None:
    """``parse_episode`` action BUY / SELL / HOLD -> +1 / -1 / 0. SELL goes short here (the C.5
    rules for every method); AlphaQuanter's long-only all-in rules stay in its ``env.py``."""
    from rl.methods.alphaquanter.rewards import parse_episode

    action = parse_episode(text).action
    return None if action is None else {"BUY": 1, "SELL": -1, "HOLD": 0}[action]
