"""The sibling methods on the shared stack, each a set of labels, prompts and TRL-style rewards.

``reward_functions(method)`` returns ``{name: (prompts, completions, **columns) -> list[float | None]}``
for GRPO / ``stockr1 bench compare``; the columns each reward needs are listed in ``COLUMNS``.
Modules are imported lazily so importing this package stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

METHODS: tuple[str, ...] = ("trading_r1", "trade_r1_fsr", "trade_r1_dsr", "trade_r1_market_only", "trade_r1_naive",
                            "alphaquanter")

COLUMNS: dict[str, tuple[str, ...]] = {
    "trading_r1": ("label", "excess_return"),  # class index (labels.ACTIONS order), H-day excess log return
    "trade_r1": ("context", "ticker", "excess_return"),  # + optional "universe"; r of App. A.3
    "alphaquanter": ("smoothed_return",),  # rewards.smoothed_return over the future path
}


def reward_functions(method: str) -> dict[str, Callable[..., list[float | None]]]:
    if method == "trading_r1":
        from rl.methods.trading_r1.stages import REWARD_HEADS

        return dict(REWARD_HEADS)
    if method.startswith("trade_r1_"):
        from rl.methods.trade_r1.gates import gated_reward
        from rl.methods.trade_r1.judge import judge_from_env

        return {method: gated_reward(method.removeprefix("trade_r1_"), judge_from_env())}
    if method == "alphaquanter":
        from rl.methods.alphaquanter.rewards import alphaquanter_rewards

        return {"total": alphaquanter_rewards}
    raise ValueError(f"unknown method {method!r}; choose from {METHODS}")


ENGINE_KEYS = ("max_new_tokens", "temperature", "max_tool_calls")  # rft keys of the rollout engine


def rft_train_config(rft: Mapping[str, Any], accelerator: str = "cpu", n_queries: int | None = None):
    """The ``rl.trainer.GRPOTrainConfig`` of an rft dict: its keys other than the engine's (``steps`` ->
    ``max_steps``; ``queries_per_step`` at most ``n_queries``). A misspelled key is an error naming it."""
    import dataclasses

    from rl.trainer import GRPOTrainConfig
    from stockr1.config import check_keys

    check_keys(rft, {f.name for f in dataclasses.fields(GRPOTrainConfig)} | {*ENGINE_KEYS, "steps"}, "rft")
    r = {k: v for k, v in rft.items() if k not in ENGINE_KEYS}
    qps = int(r.pop("queries_per_step", 2))
    return GRPOTrainConfig.from_dict({"max_steps": int(r.pop("steps", 1)), "accelerator": accelerator,
                                     "queries_per_step": qps if n_queries is None else min(qps, n_queries), **r})


def run_grpo(policy, prompts: list[str], columns: list[dict], funcs: dict[str, Callable], weights: dict[str, float],
             rft: dict, out, tools=(), sample_refs: list | None = None, accelerator: str = "cpu",
             resume: bool = False) -> list[dict]:
    """GRPO of any method on the shared stack: ``rl.trainer.GRPOTrainer`` + ``FuncScorer`` over the
    method's TRL-style rewards. prompts: raw user prompts (chat-formatted here); columns: per-prompt
    reward columns; rft: engine settings (max_new_tokens, temperature, max_tool_calls) + GRPO config
    keys (steps -> max_steps); ``resume``: continue from ``out/last.ckpt`` when there is one. Returns the
    per-step logged scalars (the resumed run's earlier steps included)."""
    from pathlib import Path

    from llm.rollout import RolloutEngine
    from llm.tokenizer import chat_prompt
    from rl.trainer import FuncScorer, GRPOSample, GRPOTrainer

    engine = RolloutEngine(policy, policy.tokenizer, tools, max_new_tokens=int(rft.get("max_new_tokens", 256)),
                           temperature=float(rft.get("temperature", 1.0)), max_tool_calls=int(rft.get("max_tool_calls", 1)),
                           seed=int(rft.get("seed", 0)))
    refs = sample_refs if sample_refs is not None else list(range(len(prompts)))
    samples = [GRPOSample(chat_prompt(policy.tokenizer, p), ref, c) for p, ref, c in zip(prompts, refs, columns, strict=True)]
    cfg = rft_train_config(rft, accelerator, len(samples))
    return GRPOTrainer(policy, engine, samples, FuncScorer(funcs, weights), cfg, Path(out)).fit(resume=resume)
