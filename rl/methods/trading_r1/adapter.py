"""Trading-R1 in side-by-side runs (``stockr1 bench compare``): the decision query, its format
teacher and how its text becomes a side. ``env`` is a `rl.methods.env.DecisionEnv`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl.methods.env import DecisionEnv
    from rl.methods.trading_r1.prompt import PromptConfig


def prompt_config(m: Mapping[str, Any]) -> PromptConfig:
    """Trading-R1's PromptConfig: ``prompt_days`` values per indicator, optional ``sections`` subset
    (the tiny config keeps three so the thesis fits a CPU token budget)."""
    from rl.methods.trading_r1.prompt import SECTIONS, PromptConfig

    return PromptConfig(n_days=int(m.get("prompt_days", 5)), sections=tuple(m.get("sections") or SECTIONS))


def build_query(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> tuple[str, str, dict]:
    """(snapshot prompt, evidence shown = the prompt's sections, reward columns label / excess_return)
    for row ``i`` of ``env.windows``; a day without a label (-1) gets ``label`` None."""
    from rl.methods.trading_r1.curriculum import excess_returns
    from rl.methods.trading_r1.prompt import build_prompt, snapshot_blocks

    tk, t = env.ref(i)
    pc = prompt_config(m)
    blocks = snapshot_blocks(env.store, tk, t, pc)
    evidence = "\n".join(blocks[k] for k in pc.sections if k in blocks)
    label = int(env.labels[i])
    er = float(excess_returns(env.frames, tk, [t], env.bt.holding, env.cfg.benchmark)[0])
    return build_prompt(env.store, tk, t, pc), evidence, {"label": label if label >= 0 else None, "excess_return": er}


def format_teacher(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> str:
    """The method's own format teacher: ``prompt.template_thesis`` (stage 3) for the day's label
    (HOLD where the day has none), the short structured variant when the section says ``thesis: short``.
    The label is the only thing it takes from after the decision day (the SFT target, as the paper's
    volatility-adjusted labels); its quotes and sources are the prompt's own, stamped at or before t."""
    from rl.methods.trading_r1.prompt import snapshot_blocks, template_thesis

    tk, t = env.ref(i)
    label = int(env.labels[i])
    pc = prompt_config(m)
    blocks = {k: v for k, v in snapshot_blocks(env.store, tk, t, pc).items() if k in pc.sections}
    return template_thesis(blocks, label if label >= 0 else 2, 3, short=m.get("thesis", "full") == "short")


def position(text: str) -> int | None:
    """``parse_decision`` (terminal ``DECISION: [[[X]]]``) -> ``evaluate.SIDE``: STRONG BUY / BUY
    long, HOLD flat, SELL / STRONG SELL short (intensity does not change the size)."""
    from rl.methods.trading_r1.evaluate import SIDE
    from rl.methods.trading_r1.labels import ACTIONS
    from rl.methods.trading_r1.rewards import parse_decision

    c = parse_decision(text)
    return None if c is None else SIDE[ACTIONS[c]]
