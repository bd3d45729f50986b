"""Stock-R1 in side-by-side runs (``stockr1 bench compare``): the decision-day question and its
samples, the side rule on the decoded forecast, the text the judge verifies, and the warm-start
SFT config. ``env`` is a `rl.methods.env.DecisionEnv`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from stockr1.backtest import directions_from_z, zscore_signals

if TYPE_CHECKING:
    from llm.qa.core import QAItem
    from rl.methods.env import DecisionEnv

SIDE_WORD = {1: "BUY", -1: "SELL", 0: "HOLD"}
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.S)


def position(forecast, action, window, cfg) -> int | None:
    """Stock-R1's *decoded forecast* through the C.5 z-score rule (what ``bench backtest`` does
    with any forecaster). Chosen over reading its QA answer: the forecast is what Stock-R1 makes
    verifiable (R_prec, R_cons) and the z-rule is the paper's own trading protocol. No parseable
    ``<forecast_action>`` -> None: the tool's fallback is the *unconditioned* decoder forecast,
    the TS encoder's view rather than the LLM's, so it is not traded.
    forecast: one-row decoded `Forecast`; window: the one-row `Windows` of the decision;
    cfg: `stockr1.backtest.BacktestConfig`."""
    if action is None or forecast is None:
        return None
    z = zscore_signals(forecast, window, cfg)
    return int(directions_from_z(pd.Series(z), cfg.threshold).iloc[0])


def verification_text(model_text: str, position: int | None) -> str:
    """Stock-R1's reasoning with the side it trades as the decision (its QA answer removed), so
    the judge checks the reasoning against what was traded; None -> no decision (s = 0)."""
    reasoning = _ANSWER_BLOCK.sub("", model_text)
    return reasoning if position is None else f"{reasoning}<answer>{SIDE_WORD[position]}</answer>"


def decision_item(windows, i: int, h: int) -> QAItem:
    """The decision-day question for Stock-R1 (the forecast family's paper template, x = h): its
    answer is only bookkeeping, the traded quantity is the decoded forecast."""
    from llm.qa.core import QAItem
    from stockr1.types import CLOSE

    ret = 100.0 * (float(windows.future[i, h - 1, CLOSE]) / float(windows.last_close[i]) - 1.0)
    return QAItem(f"compare-{i}", "forecast", "fq_pct_change_paper",
                  f"What will be the percentage change in the closing price over the next {h} trading days?",
                  f"{ret:.2f}", "numeric", int(i), str(windows.ticker[i]), str(pd.Timestamp(windows.date[i]).date()),
                  str(windows.split[i]), tolerance=round(0.35 * math.sqrt(h), 2))


def decision_samples(env: DecisionEnv, decoder, tokenizer) -> list:
    """The decision-day queries as Stock-R1 sees them (``rl.setup.build_samples``: the shared QA
    prompt, K soft tokens from the decoder's encoder, U_q)."""
    from forecast_action.derive import ActionThresholds
    from rl.setup import build_samples
    from stockr1.types import train_only

    w = env.windows
    items = [decision_item(w, int(i), env.bt.holding) for i in env.rows]
    return build_samples(items, w, ActionThresholds.fit(train_only(w)), decoder, tokenizer, env.cfg.max_context_chars)


def warm_start_sft(ws: Mapping[str, Any], seed: int, max_context_chars: int | None, out: Path) -> Path:
    """Joint SFT of Stock-R1 (``llm.sft.run_sft``) on a derived copy of ``ws["config"]`` with
    ``ws["overrides"]`` merged in (seed and context trimming of the caller) -> the run dir."""
    import yaml

    from llm.sft import run_sft
    from stockr1.config import deep_update, load_yaml

    over = deep_update({"run": "sft", "max_context_chars": max_context_chars, "train": {"seed": seed},
                        "wandb": {"mode": "disabled"}},
                       ws.get("overrides") or {})
    derived = out / "sft_config.yaml"
    derived.parent.mkdir(parents=True, exist_ok=True)
    derived.write_text(yaml.safe_dump(deep_update(load_yaml(ws.get("config", "configs/sft/tiny.yaml")), over)))
    run_sft(derived, run="sft", out_root=out, resume=True)  # an interrupted compare continues it
    return out / "sft"


def grpo_overrides(g: Mapping[str, Any], seed: int, max_context_chars: int | None, max_new_tokens: int) -> dict:
    """Overrides of ``rl.setup.run_grpo``'s config for a compare run: the shared GRPO budget ``g``
    (steps, group_size, queries_per_step, lr, accelerator), the seed, context trimming, no SFT dir
    of the base config (the caller passes its own or none)."""
    steps = int(g.get("steps", 1))
    return {"seed": seed, "sft": {"run_dir": None}, "max_context_chars": max_context_chars,
            "rollout": {"max_new_tokens": max_new_tokens},
            "train": {"max_steps": steps, "group_size": int(g.get("group_size", 4)),
                      "queries_per_step": int(g.get("queries_per_step", 2)), "lr": float(g.get("lr", 1e-4)),
                      "seed": seed, "ckpt_every": steps, "accelerator": str(g.get("accelerator", "cpu"))}}
