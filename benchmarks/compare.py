"""`stockr1 bench compare [--config configs/compare/tiny.yaml] [--out DIR]`: Stock-R1, Trading-R1,
Trade-R1 (FSR and DSR gates), AlphaQuanter and buy-and-hold side by side on one held-out period.

One stack, no parallel pipeline. Every method is its own labels / prompts / rewards / tools from
``rl.methods.*`` (Stock-R1: ``llm.qa`` prompt, ``ForecastTool``, ``StockR1Scorer``) on:
- the policy of ``llm.policy`` (the same tiny init for every method at demo scale),
- GRPO by the ONE trainer: ``rl.methods.run_grpo`` (sibling methods) / ``rl.cli.run_grpo``
  (Stock-R1's u-GRPO run), a few steps each with the budget of the config,
- generation through the ONE ``llm.rollout.RolloutEngine`` (greedy at evaluation), with each
  method's tools (AlphaQuanter's data tools, Stock-R1's forecast tool),
- trading through the ONE simulator ``benchmarks.backtest.simulate`` (Stock-R1 App. C.5 rules:
  a side is entered at the decision-day close and held ``holding`` days, costs per side) and
  ``stockr1.metrics.trading``; how each method's text becomes a side: the glue section below.

Held-out period and decision days: the offline sample's *test* split (both tickers, ~745 trading
days each). Decision days are every ``stride``-th test day per ticker, from the first, with
``stride = max(holding, ceil(n_test_days / decisions_per_ticker))``: evenly spread over the
whole period (so no sub-period is cherry-picked) and never closer than the holding period (so no
signal is ignored because a position is still open). Prices cover every test day, so buy-and-hold
and every method share one calendar. Training queries are ``n_train`` random *train-split* days,
the same (ticker, day) set for every sibling method.

Resume: each method's records go to ``<work_dir>/<method>/records.json`` (with the config they
came from); a rerun with the same config reuses them, so an interrupted benchmark continues.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.backtest import (
    BacktestConfig,
    directions_from_z,
    json_clean,
    prices_from_windows,
    zscore_signals,
)
from benchmarks.compare_plots import (
    BUY_AND_HOLD,
    DecisionRecord,
    buy_and_hold_metrics,
    method_metrics,
    plot_equity,
    table_md,
)

METHODS: tuple[str, ...] = ("stock_r1", "trading_r1", "trade_r1_fsr", "trade_r1_dsr", "alphaquanter")


# ------------------------------------------------------------------------------ glue: text -> side
SIDE_WORD = {1: "BUY", -1: "SELL", 0: "HOLD"}
_ANSWER_BLOCK = re.compile(r"<answer>.*?</answer>", re.S)


def position_trading_r1(text: str) -> int | None:
    """``parse_decision`` (terminal ``DECISION: [[[X]]]``) -> ``evaluate.SIDE``: STRONG BUY / BUY
    long, HOLD flat, SELL / STRONG SELL short (intensity does not change the size)."""
    from rl.methods.trading_r1.evaluate import SIDE
    from rl.methods.trading_r1.labels import ACTIONS
    from rl.methods.trading_r1.rewards import parse_decision

    c = parse_decision(text)
    return None if c is None else SIDE[ACTIONS[c]]


def position_trade_r1(text: str) -> int | None:
    """``gates.split_output`` decision; empty -> None, else ``judge.decision_side`` (a decision that
    only names assets *selects* them: long, Trade-R1's portfolio reading)."""
    from rl.methods.trade_r1.gates import split_output
    from rl.methods.trade_r1.judge import decision_side

    _, decision = split_output(text)
    return int(decision_side(decision)) if decision else None


def position_alphaquanter(text: str) -> int | None:
    """``parse_episode`` action BUY / SELL / HOLD -> +1 / -1 / 0. SELL goes short here (the C.5
    rules for every method); AlphaQuanter's long-only all-in rules stay in its ``env.py``."""
    from rl.methods.alphaquanter.rewards import parse_episode

    action = parse_episode(text).action
    return None if action is None else {"BUY": 1, "SELL": -1, "HOLD": 0}[action]


def position_stock_r1(forecast, action, window, cfg: BacktestConfig) -> int | None:
    """Stock-R1's *decoded forecast* through the C.5 z-score rule (what ``bench backtest`` does
    with any forecaster). Chosen over reading its QA answer: the forecast is what Stock-R1 makes
    verifiable (R_prec, R_cons) and the z-rule is the paper's own trading protocol. No parseable
    ``<forecast_action>`` -> None: the tool's fallback is the *unconditioned* decoder forecast,
    the TS encoder's view rather than the LLM's, so it is not traded.
    forecast: one-row decoded `Forecast`; window: the one-row `Windows` of the decision."""
    if action is None or forecast is None:
        return None
    z = zscore_signals(forecast, window, cfg)
    return int(directions_from_z(pd.Series(z), cfg.threshold).iloc[0])


def stock_r1_verification_text(model_text: str, position: int | None) -> str:
    """Stock-R1's reasoning with the side it trades as the decision (its QA answer removed), so
    the judge checks the reasoning against what was traded; None -> no decision (s = 0)."""
    reasoning = _ANSWER_BLOCK.sub("", model_text)
    return reasoning if position is None else f"{reasoning}<answer>{SIDE_WORD[position]}</answer>"


def consistency(evidence: str, text: str, ticker: str, aliases: Mapping[str, Sequence[str]] | None = None,
                judge=None, k: int = 5) -> float:
    """Trade-R1's triangular score s in [0, 1] (``gates.verify``; offline judge by default) of one
    output against the evidence the method was shown; 0 for an output with no decision."""
    from rl.methods.trade_r1.gates import verify
    from rl.methods.trade_r1.judge import OfflineJudge

    return float(verify(evidence, text, [ticker], ticker, judge or OfflineJudge(), k, None, aliases).s)


# ------------------------------------------------------------------------------ config and data
@dataclass(frozen=True)
class CompareConfig:
    """configs/compare/*.yaml (each key documented there)."""

    seed: int = 0
    threads: int = 2
    work_dir: str = "checkpoints/compare"
    data: Mapping[str, Any] = field(default_factory=lambda: {"lookback": 90, "horizon": 10})
    decisions_per_ticker: int = 24
    n_train: int = 16
    max_context_chars: int | None = 800
    benchmark: str | None = "SP500"
    backtest: Mapping[str, Any] = field(default_factory=dict)
    policy: Mapping[str, Any] = field(default_factory=dict)
    grpo: Mapping[str, Any] = field(default_factory=lambda: {"steps": 2, "group_size": 4, "queries_per_step": 2})
    eval: Mapping[str, Any] = field(default_factory=lambda: {"temperature": 0.0})
    methods: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {m: {} for m in METHODS})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompareConfig:
        bad = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if bad:
            raise ValueError(f"unknown compare config keys {bad}")
        unknown = sorted(set(d.get("methods", {})) - set(METHODS))
        if unknown:
            raise ValueError(f"unknown methods {unknown}; valid: {list(METHODS)}")
        return cls(**d)

    def method(self, name: str) -> dict[str, Any]:
        return dict(self.methods.get(name) or {})


def decision_rows(windows, per_ticker: int, holding: int) -> np.ndarray:
    """Test-split rows of the decision days (module docstring), sorted by ticker then date."""
    out = []
    for tk in sorted(set(windows.ticker[windows.split == "test"].tolist())):
        rows = np.flatnonzero((windows.split == "test") & (windows.ticker == tk))
        rows = rows[np.argsort(windows.date[rows], kind="stable")]
        stride = max(holding, math.ceil(len(rows) / per_ticker))
        out.append(rows[::stride][:per_ticker])
    return np.concatenate(out)


@dataclass
class Env:
    """What every method sees: windows with rendered context, daily frames, the point-in-time store,
    decision and training rows, and the test prices of each ticker."""

    cfg: CompareConfig
    windows: Any
    frames: dict[str, pd.DataFrame]
    store: Any
    rows: np.ndarray  # decision days (test split)
    train_rows: np.ndarray  # training queries (train split)
    prices: dict[str, pd.Series]
    bt: BacktestConfig
    aliases: dict[str, list[str]]
    _labels: np.ndarray | None = None

    @classmethod
    def build(cls, cfg: CompareConfig, windows=None, frames=None, store=None) -> Env:
        from stockr1.data import load_source, sample_windows
        from stockr1.data.context import sample_store
        from stockr1.data.quality import check_frames

        bt = BacktestConfig(**cfg.backtest)
        if windows is None:
            windows = sample_windows(int(cfg.data.get("lookback", 90)), int(cfg.data.get("horizon", 10)), context=True)
            frames, _ = check_frames(load_source("sample"))
            store = sample_store(frames)
        test = windows.select(np.flatnonzero(windows.split == "test"))
        prices = {tk: prices_from_windows(test, tk, bt.holding) for tk in sorted(set(test.ticker.tolist()))}
        tr = np.flatnonzero(windows.split == "train")
        pick = np.sort(np.random.default_rng(cfg.seed).choice(tr, size=min(cfg.n_train, len(tr)), replace=False))
        profiles = getattr(store, "profiles", None) or {}
        aliases = {tk: list(getattr(p, "keywords", ()) or ()) + [getattr(p, "name", tk)] for tk, p in profiles.items()}
        return cls(cfg, windows, frames, store, decision_rows(windows, cfg.decisions_per_ticker, bt.holding), pick,
                   prices, bt, aliases)

    def ref(self, i: int) -> tuple[str, pd.Timestamp]:
        return str(self.windows.ticker[i]), pd.Timestamp(self.windows.date[i])

    def context(self, i: int) -> str:
        from llm.qa.prompt import trim_context

        ctx = self.windows.context
        return trim_context(str(ctx[i]), self.cfg.max_context_chars) if len(ctx) else ""

    @property
    def labels(self) -> np.ndarray:
        if self._labels is None:
            from rl.methods.trading_r1.labels import labels_for_windows

            self._labels = labels_for_windows(self.windows, self.frames)
        return self._labels

    def bench_prices(self) -> pd.Series | None:
        return self.prices.get(self.cfg.benchmark) if self.cfg.benchmark else None


# ------------------------------------------------------------------------------ sibling methods
TRADE_R1_TASK = ("Decide a position in {ticker} for the next {h} trading days. Reason inside <think>...</think> "
                 "using only facts from the context above, then answer <answer>BUY {ticker}</answer>, "
                 "<answer>SELL {ticker}</answer> or <answer>HOLD {ticker}</answer>.")


def _prompt_cfg(m: Mapping):
    """Trading-R1's PromptConfig: ``prompt_days`` values per indicator, optional ``sections`` subset
    (the tiny config keeps three so the thesis fits a CPU token budget)."""
    from rl.methods.trading_r1.prompt import SECTIONS, PromptConfig

    return PromptConfig(n_days=int(m.get("prompt_days", 5)), sections=tuple(m.get("sections") or SECTIONS))


def _trading_r1(env: Env, i: int, m: Mapping) -> tuple[str, str, dict]:
    from rl.methods.trading_r1.curriculum import excess_returns
    from rl.methods.trading_r1.prompt import build_prompt, snapshot_blocks

    tk, t = env.ref(i)
    pc = _prompt_cfg(m)
    blocks = snapshot_blocks(env.store, tk, t, pc)
    evidence = "\n".join(blocks[k] for k in pc.sections if k in blocks)
    label = int(env.labels[i])
    er = float(excess_returns(env.frames, tk, [t], env.bt.holding, env.cfg.benchmark)[0])
    return build_prompt(env.store, tk, t, pc), evidence, {"label": label if label >= 0 else None, "excess_return": er}


def _trade_r1(env: Env, i: int, m: Mapping) -> tuple[str, str, dict]:
    from rl.methods.trade_r1.gates import excess_return_column

    tk, t = env.ref(i)
    ctx = env.context(i)
    r = excess_return_column(env.frames, [(tk, t)], env.cfg.benchmark, env.bt.holding, float(m.get("cost", 0.001)))[0]
    cols = {"context": ctx, "ticker": tk, "excess_return": r, "aliases": env.aliases}
    return f"{ctx}\n\n" + TRADE_R1_TASK.format(ticker=tk, h=env.bt.holding), ctx, cols


def _alphaquanter(env: Env, i: int, m: Mapping) -> tuple[str, str, dict]:
    from rl.methods.alphaquanter.env import episode_prompt, smoothed_return_column

    tk, t = env.ref(i)
    r = smoothed_return_column(env.frames, [(tk, t)])[0]
    return episode_prompt(tk, t, int(m.get("max_tool_calls", 3))), "", {"smoothed_return": r}


def _teacher_trading_r1(env: Env, i: int, m: Mapping) -> str:
    """The method's own format teacher: ``prompt.template_thesis`` (stage 3) for the day's label."""
    from rl.methods.trading_r1.prompt import snapshot_blocks, template_thesis

    tk, t = env.ref(i)
    label = int(env.labels[i])
    pc = _prompt_cfg(m)
    blocks = {k: v for k, v in snapshot_blocks(env.store, tk, t, pc).items() if k in pc.sections}
    return template_thesis(blocks, label if label >= 0 else 2, 3)


def _teacher_trade_r1(env: Env, i: int, m: Mapping) -> str:
    """Format teacher (rl/methods/trade_r1 has none): two context lines quoted verbatim as the
    reasoning (grounded by construction) and the side of the day's realised excess return."""
    from rl.methods.trade_r1.judge import claims

    tk, _ = env.ref(i)
    _, _, cols = _trade_r1(env, i, m)
    lines = [c for c in claims(cols["context"]) if "%" in c][:2] or claims(cols["context"])[:2]
    side = "BUY" if cols["excess_return"] > 0 else "SELL"
    return "<think>" + " ".join(ln.rstrip(".") + "." for ln in lines) + f"</think><answer>{side} {tk}</answer>"


def _teacher_alphaquanter(env: Env, i: int, m: Mapping) -> str:
    """Format teacher (AlphaQuanter ships none): one RSI call, its real point-in-time response, a
    short reasoning and the regime action of the outcome reward. The response tokens are trained
    on too (text SFT has no tool mask); at rollout the engine writes them, never the model."""
    from rl.methods.alphaquanter.rewards import RewardConfig, regime
    from rl.methods.alphaquanter.tools import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, AlphaQuanterTool

    tk, t = env.ref(i)
    call = '{"name": "get_indicator", "arguments": {"indicator": "rsi"}}'
    obs = AlphaQuanterTool(env.store)((tk, t), call).observation
    r = _alphaquanter(env, i, m)[2]["smoothed_return"]
    act = ("SELL", "HOLD", "BUY")[1 + regime(r, RewardConfig().theta)] if np.isfinite(r) else "HOLD"
    return (f"<think>Momentum first: check the RSI of {tk}.</think>{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}{obs}"
            f"<think>The RSI reading sets the momentum view for the next days.</think><answer>{act}</answer>")


@dataclass(frozen=True)
class TextMethod:
    """A sibling method: reward key of ``rl.methods.reward_functions``, default reward weights,
    ``build(env, row, method_cfg) -> (prompt, evidence shown, reward columns)``, the side parser,
    and whether the AlphaQuanter data tools are registered (sample_ref = (ticker, day))."""

    reward: str
    weights: Mapping[str, float]
    build: Callable[[Env, int, Mapping], tuple[str, str, dict]]
    position: Callable[[str], int | None]
    teacher: Callable[[Env, int, Mapping], str]
    data_tools: bool = False


TEXT_METHODS: dict[str, TextMethod] = {
    "trading_r1": TextMethod("trading_r1", {"decision": 1.0, "outcome": 0.5, "placement": 0.1}, _trading_r1,
                             position_trading_r1, _teacher_trading_r1),
    "trade_r1_fsr": TextMethod("trade_r1_fsr", {"trade_r1_fsr": 1.0}, _trade_r1, position_trade_r1,
                               _teacher_trade_r1),
    "trade_r1_dsr": TextMethod("trade_r1_dsr", {"trade_r1_dsr": 1.0}, _trade_r1, position_trade_r1,
                               _teacher_trade_r1),
    "alphaquanter": TextMethod("alphaquanter", {"total": 1.0}, _alphaquanter, position_alphaquanter,
                               _teacher_alphaquanter, data_tools=True),
}


def _policy(cfg: CompareConfig, m: Mapping, soft_tokens: bool):
    """A fresh policy from the config (seeded: every method starts from the same weights) or the
    method's trained checkpoint (``checkpoint: <dir with policy_config.json>``)."""
    import torch

    from llm.policy import Policy, PolicyConfig

    if m.get("checkpoint"):
        return Policy.load(m["checkpoint"]).to(eval_device(cfg))
    torch.manual_seed(cfg.seed)
    return Policy(PolicyConfig.from_dict({**cfg.policy, **dict(m.get("policy", {})), "soft_tokens": soft_tokens}))


def eval_device(cfg: CompareConfig) -> str:
    """``eval.device`` (default cpu; "cuda" on a GPU machine). Training devices come from ``grpo.accelerator``."""
    return str(cfg.eval.get("device", "cpu"))


def _rft(cfg: CompareConfig, m: Mapping) -> tuple[dict[str, Any], str]:
    """(``run_grpo``'s rft dict: engine settings + GRPOTrainConfig keys, accelerator)."""
    g = {**cfg.grpo, **dict(m.get("grpo", {}))}
    acc = str(g.pop("accelerator", "cpu"))
    rft = {**g, "ckpt_every": int(g.get("steps", 1)), "max_new_tokens": int(m.get("max_new_tokens", 128)),
           "max_tool_calls": int(m.get("max_tool_calls", 1)), "seed": cfg.seed}
    return rft, acc


def run_text_method(name: str, env: Env, out: Path) -> tuple[list[DecisionRecord], dict[str, Any]]:
    """Train (unless a checkpoint is given) and evaluate one sibling method on the decision days."""
    from rl.methods import reward_functions, run_grpo
    from rl.methods.alphaquanter.tools import AlphaQuanterTool

    spec, cfg, m = TEXT_METHODS[name], env.cfg, env.cfg.method(name)
    policy = _policy(cfg, m, soft_tokens=False)
    tools = [AlphaQuanterTool(env.store)] if spec.data_tools else []
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    if not m.get("checkpoint"):
        built = [spec.build(env, int(i), m) for i in env.train_rows]
        if m.get("warm_start"):  # format SFT with the shared prompt-masked text SFT, then GRPO
            from rl.methods.trading_r1.backend import text_sft

            targets = [spec.teacher(env, int(i), m) for i in env.train_rows]
            losses = text_sft(policy, [b[0] for b in built], targets, seed=cfg.seed, **dict(m["warm_start"]))
            info["warm_start_loss"] = [losses[0], losses[-1]]
        weights = dict(m.get("weights") or spec.weights)
        funcs = reward_functions(spec.reward)
        rft, acc = _rft(cfg, m)
        hist = run_grpo(policy, [b[0] for b in built], [b[2] for b in built], {k: funcs[k] for k in weights}, weights,
                        rft, out / "grpo", tools=tools,
                        sample_refs=[env.ref(int(i)) for i in env.train_rows] if tools else None, accelerator=acc)
        info["reward_per_step"] = [h.get("reward/total") for h in hist]
    info["train_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    records, example = evaluate_text_method(policy.to(eval_device(cfg)), name, env)
    info["eval_s"], info["example_output"] = time.perf_counter() - t0, example
    return records, info


def evaluate_text_method(policy, name: str, env: Env, tokenizer=None) -> tuple[list[DecisionRecord], str]:
    """Greedy rollouts of ``policy`` (the Policy forward contract and a ``.tokenizer``; a
    ``ScriptedPolicy`` with ``tokenizer=`` in tests) on the decision days -> records, first completion."""
    from llm.rollout import RolloutEngine
    from llm.tokenizer import chat_prompt
    from rl.methods.alphaquanter.tools import AlphaQuanterTool

    spec, cfg, m = TEXT_METHODS[name], env.cfg, env.cfg.method(name)
    tok = tokenizer or policy.tokenizer
    tools = [AlphaQuanterTool(env.store)] if spec.data_tools else []
    built = [spec.build(env, int(i), m) for i in env.rows]
    ev = {**cfg.eval, **dict(m.get("eval", {}))}
    engine = RolloutEngine(policy, tok, tools, max_new_tokens=int(m.get("max_new_tokens", 128)),
                           temperature=float(ev.get("temperature", 0.0)), max_tool_calls=int(m.get("max_tool_calls", 1)),
                           max_batch_rows=ev.get("max_batch_rows"), seed=cfg.seed)
    rollouts = engine.generate([chat_prompt(tok, b[0]) for b in built], sample_refs=[env.ref(int(i)) for i in env.rows])
    records = []
    for i, b, ro in zip(env.rows, built, rollouts, strict=True):
        tk, t = env.ref(int(i))
        obs = "\n".join(s.text for s in ro.segments if s.kind == "tool")
        s = consistency(f"{b[1]}\n{obs}".strip(), ro.completion, tk, env.aliases)
        records.append(DecisionRecord(tk, str(t.date()), spec.position(ro.completion), ro.n_generated, s))
    return records, rollouts[0].completion[:600] if rollouts else ""


# ------------------------------------------------------------------------------ Stock-R1
def stock_r1_item(windows, i: int, h: int):
    """The decision-day question for Stock-R1 (the forecast family's paper template, x = h): its
    answer is only bookkeeping, the traded quantity is the decoded forecast."""
    from llm.qa.core import QAItem
    from stockr1.types import CLOSE

    ret = 100.0 * (float(windows.future[i, h - 1, CLOSE]) / float(windows.last_close[i]) - 1.0)
    return QAItem(f"compare-{i}", "forecast", "fq_pct_change_paper",
                  f"What will be the percentage change in the closing price over the next {h} trading days?",
                  f"{ret:.2f}", "numeric", int(i), str(windows.ticker[i]), str(pd.Timestamp(windows.date[i]).date()),
                  str(windows.split[i]), tolerance=round(0.35 * math.sqrt(h), 2))


def stock_r1_sft(ws: Mapping[str, Any], cfg: CompareConfig, out: Path) -> Path:
    """Joint SFT of Stock-R1 (``llm.sft.run_sft``) on a derived copy of ``ws["config"]`` with
    ``ws["overrides"]`` merged in (seed and context trimming from the compare config)."""
    import yaml

    from llm.sft import load_yaml, run_sft
    from rl.cli import deep_update

    over = deep_update({"run": "sft", "max_context_chars": cfg.max_context_chars, "train": {"seed": cfg.seed},
                        "wandb": {"mode": "disabled"}},
                       ws.get("overrides") or {})
    derived = out / "sft_config.yaml"
    derived.parent.mkdir(parents=True, exist_ok=True)
    derived.write_text(yaml.safe_dump(deep_update(load_yaml(ws.get("config", "configs/sft/tiny.yaml")), over)))
    run_sft(derived, run="sft", out_root=out)
    return out / "sft"


def run_stock_r1(env: Env, out: Path) -> tuple[list[DecisionRecord], dict[str, Any]]:
    """u-GRPO through ``rl.cli.run_grpo`` (its own QA prompts, decoder, ForecastTool and scorer),
    then greedy rollouts on the decision days and the z-rule on each decoded forecast."""
    from llm.policy import Policy
    from llm.sft import load_decoder
    from rl.cli import deep_update, run_grpo

    cfg, m = env.cfg, env.cfg.method("stock_r1")
    g = {**cfg.grpo, **dict(m.get("grpo", {}))}
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_dir = Path(m["checkpoint"]) if m.get("checkpoint") else out / "grpo" / "stock_r1"
    if not m.get("checkpoint"):
        over = {"seed": cfg.seed, "sft": {"run_dir": None}, "max_context_chars": cfg.max_context_chars,
                "rollout": {"max_new_tokens": int(m.get("max_new_tokens", 128))},
                "train": {"max_steps": int(g.get("steps", 1)), "group_size": int(g.get("group_size", 4)),
                          "queries_per_step": int(g.get("queries_per_step", 2)), "lr": float(g.get("lr", 1e-4)),
                          "seed": cfg.seed, "ckpt_every": int(g.get("steps", 1)),
                          "accelerator": str(g.get("accelerator", "cpu"))}}
        sft_dir = None
        if m.get("warm_start"):  # Stock-R1's own joint SFT (llm.sft.run_sft), then u-GRPO from it
            sft_dir = stock_r1_sft(m["warm_start"], cfg, out)
            info["warm_start_s"] = time.perf_counter() - t0
        summary = run_grpo(m.get("config", "configs/grpo/tiny.yaml"), run="stock_r1", out_root=out / "grpo",
                           sft_dir=sft_dir, overrides=deep_update(over, m.get("overrides") or {}), use_wandb=False)
        info["reward_final"] = summary.get("final", {}).get("reward/total")
    info["train_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    policy, decoder = Policy.load(run_dir / "policy").to(eval_device(cfg)), load_decoder(run_dir / "decoder.pt")
    records, example = evaluate_stock_r1(policy, decoder, env)
    info["eval_s"], info["example_output"] = time.perf_counter() - t0, example
    return records, info


def stock_r1_samples(env: Env, decoder, tokenizer) -> list:
    """The decision-day queries as Stock-R1 sees them (``rl.cli.build_samples``: the shared QA
    prompt, K soft tokens from the decoder's encoder, U_q)."""
    from forecast_action.derive import ActionThresholds
    from rl.cli import build_samples

    w = env.windows
    items = [stock_r1_item(w, int(i), env.bt.holding) for i in env.rows]
    return build_samples(items, w, ActionThresholds.fit(w), decoder, tokenizer, env.cfg.max_context_chars)


def evaluate_stock_r1(policy, decoder, env: Env, tokenizer=None) -> tuple[list[DecisionRecord], str]:
    """Greedy rollouts with the ForecastTool on the decision days; side = z-rule on the decoded forecast."""
    import torch

    from llm.rollout import RolloutEngine
    from llm.tools import ForecastTool

    cfg, m, w = env.cfg, env.cfg.method("stock_r1"), env.windows
    tok = tokenizer or policy.tokenizer
    samples = stock_r1_samples(env, decoder, tok)
    ev = {**cfg.eval, **dict(m.get("eval", {}))}
    engine = RolloutEngine(policy, tok, [ForecastTool(decoder, w, int(m.get("n_samples", 16)))],
                           max_new_tokens=int(m.get("max_new_tokens", 128)), temperature=float(ev.get("temperature", 0.0)),
                           max_tool_calls=1, max_batch_rows=ev.get("max_batch_rows"), seed=cfg.seed)
    ts = torch.stack([s.ts_tokens for s in samples]) if samples[0].ts_tokens is not None else None
    rollouts = engine.generate([s.prompt for s in samples], ts, [s.sample_ref for s in samples])
    records = []
    for i, ro in zip(env.rows, rollouts, strict=True):
        tk, t = env.ref(int(i))
        pos = position_stock_r1(ro.forecast, ro.action, w.select(np.array([int(i)])), env.bt)
        model = "".join(s.text for s in ro.segments if s.kind == "model")
        obs = "\n".join(s.text for s in ro.segments if s.kind == "tool")
        s = consistency(f"{env.context(int(i))}\n{obs}".strip(), stock_r1_verification_text(model, pos), tk, env.aliases)
        records.append(DecisionRecord(tk, str(t.date()), pos, ro.n_generated, s))
    return records, rollouts[0].completion[:600] if rollouts else ""


# ------------------------------------------------------------------------------ benchmark
def run_method(name: str, env: Env, work: Path, fingerprint: str) -> tuple[list[DecisionRecord], dict[str, Any]]:
    """One method's records, cached in ``<work>/<name>/records.json`` for this config."""
    out = work / name
    cache = out / "records.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("fingerprint") == fingerprint:
            print(f"[compare] {name}: cached", flush=True)
            return [DecisionRecord(**r) for r in d["records"]], d["info"]
    print(f"[compare] {name}: training + evaluating", flush=True)
    records, info = run_stock_r1(env, out) if name == "stock_r1" else run_text_method(name, env, out)
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"fingerprint": fingerprint, "records": [dataclasses.asdict(r) for r in records],
                                 "info": json_clean(info)}, indent=1, default=str))
    return records, info


def compare(cfg: CompareConfig, out: Path, env: Env | None = None, methods: Sequence[str] | None = None) -> dict:
    """Run every method, write ``metrics.json``, ``table.md``, ``equity.png``, ``decisions.json``,
    ``run_info.json``; return the metrics."""
    import torch

    torch.set_num_threads(int(cfg.threads))
    t_all = time.perf_counter()
    env = env or Env.build(cfg)
    work = Path(cfg.work_dir)
    methods = list(methods or [m for m in METHODS if m in cfg.methods])
    bench = env.bench_prices()
    metrics, curves = {}, {}
    metrics[BUY_AND_HOLD], curves[BUY_AND_HOLD] = buy_and_hold_metrics(env.prices, env.bt, bench)
    timings, infos, decisions = {}, {}, {}
    for name in methods:
        fp = json.dumps([dataclasses.asdict(cfg) | {"methods": {name: cfg.method(name)}, "work_dir": None}],
                        sort_keys=True, default=str)
        records, info = run_method(name, env, work, fp)
        metrics[name], curves[name] = method_metrics(records, env.prices, env.bt, bench)
        timings[name] = {"train_s": info.get("train_s", float("nan")), "eval_s": info.get("eval_s", float("nan"))}
        infos[name], decisions[name] = info, [dataclasses.asdict(r) for r in records]
        print(f"[compare] {name}: {timings[name]}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(json_clean(metrics), indent=2))
    table = table_md(metrics, timings)
    (out / "table.md").write_text(table)
    (out / "decisions.json").write_text(json.dumps(decisions, indent=0))
    first = {tk: str(p.index[0].date()) for tk, p in env.prices.items()}
    last = {tk: str(p.index[-1].date()) for tk, p in env.prices.items()}
    plot_equity(curves, out / "equity.png",
                f"held-out period {min(first.values())} .. {max(last.values())}, {len(env.rows)} decisions per method")
    (out / "run_info.json").write_text(json.dumps(json_clean({
        "config": dataclasses.asdict(cfg), "methods": methods, "timings_s": timings, "total_s": time.perf_counter() - t_all,
        "decision_days": {"n": int(len(env.rows)), "per_ticker": {tk: int(np.sum(env.windows.ticker[env.rows] == tk))
                                                                 for tk in env.prices},
                          "period_start": first, "period_end": last, "backtest": dataclasses.asdict(env.bt)},
        "info": infos}), indent=1, default=str))
    print(table, flush=True)
    return metrics


def load_config(path: str | Path) -> CompareConfig:
    import yaml

    return CompareConfig.from_dict(yaml.safe_load(Path(path).read_text()) or {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench compare", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/compare/tiny.yaml")
    ap.add_argument("--out", default="results/compare")
    ap.add_argument("--methods", nargs="*", default=None, help=f"subset of {list(METHODS)}")
    a = ap.parse_args(argv)
    compare(load_config(a.config), Path(a.out), methods=a.methods)
    return 0
