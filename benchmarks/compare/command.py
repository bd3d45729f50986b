"""`stockr1 bench compare [--config configs/compare/tiny.yaml] [--out DIR]`: Stock-R1, Trading-R1,
Trade-R1 (FSR and DSR gates), AlphaQuanter and buy-and-hold side by side on one held-out period.

One stack, no parallel pipeline. Every method is its own labels / prompts / rewards / tools from
``rl.methods.*`` (Stock-R1: ``llm.qa`` prompt, ``ForecastTool``, ``StockR1Scorer``) on:
- the policy of ``llm.policy`` (the same tiny init for every method at demo scale),
- GRPO by the ONE trainer: ``rl.methods.run_grpo`` (sibling methods) / ``rl.setup.run_grpo``
  (Stock-R1's u-GRPO run), a few steps each with the budget of the config,
- generation through the ONE ``llm.rollout.RolloutEngine`` (greedy at evaluation), with each
  method's tools (AlphaQuanter's data tools, Stock-R1's forecast tool),
- trading through the ONE simulator ``stockr1.backtest.simulate`` (Stock-R1 App. C.5 rules:
  a side is entered at the decision-day close and held ``holding`` days, costs per side) and
  ``stockr1.metrics.trading``; each method's query, format teacher and text -> side rule:
  ``rl/methods/<method>/adapter.py``, its reasoning consistency: ``trade_r1.adapter.consistency``.

Held-out period and decision days: the *test* split of the config's ``data`` (the offline sample by
default: both tickers, ~745 trading days each; ``data: {source: dataset, path: DIR}`` reads a
``stockr1 data build`` dataset, whose data Stock-R1's u-GRPO run then trains on too). Decision days are every test day whose holding period does not overlap the previous decision's
(every ``holding``-th test day per ticker, from the first; ``rl.methods.env.decision_rows``): the
whole period (so no sub-period is cherry-picked) and never closer than the holding period (so no
signal is ignored because a position is still open). ``decisions_per_ticker`` optionally caps them
(stride ``max(holding, ceil(n_test_days / cap))``). Prices cover every test day, so buy-and-hold
and every method share one calendar. Training queries are ``n_train`` random *train-split* days,
the same (ticker, day) set for every sibling method.

Resume: each method's records go to ``<work_dir>/<method>/records.json`` (with the config they
came from); a rerun with the same config reuses them, so an interrupted benchmark continues.
``--out`` is written at the end through a temporary directory (``stockr1.outdir``): one that holds
results is refused unless ``--overwrite``; ``--report-only`` rewrites its README.md and table.md from
the saved metrics.json / run_info.json without running anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.backtest import json_clean
from benchmarks.compare.config import METHODS, CompareConfig
from benchmarks.compare.plots import (
    BUY_AND_HOLD,
    DecisionRecord,
    buy_and_hold_metrics,
    buy_and_hold_results,
    method_metrics,
    method_results,
    nan_for_none,
    readme,
    table_md,
    write_report,
)
from rl.methods.alphaquanter import adapter as alphaquanter
from rl.methods.env import DecisionEnv
from rl.methods.stock_r1 import adapter as stock_r1
from rl.methods.trade_r1 import adapter as trade_r1
from rl.methods.trading_r1 import adapter as trading_r1
from rl.soft_tokens import soft_tokens
from stockr1.anonymise import Anonymiser
from stockr1.backtest import bootstrap_intervals
from stockr1.config import parse_config_args, print_config
from stockr1.cutoff import cutoff_line
from stockr1.manifest import git_commit
from stockr1.outdir import atomic_write, command_line, generated_line, output_dir, refuse_existing
from stockr1.progress import Progress


# ------------------------------------------------------------------------------ sibling methods
@dataclass(frozen=True)
class TextMethod:
    """A sibling method: reward key of ``rl.methods.reward_functions``, default reward weights,
    ``build(env, row, method_cfg) -> (prompt, evidence shown, reward columns)``, the side parser,
    and whether the AlphaQuanter data tools are registered (sample_ref = (ticker, day))."""

    reward: str
    weights: Mapping[str, float]
    build: Callable[[DecisionEnv, int, Mapping], tuple[str, str, dict]]
    position: Callable[[str], int | None]
    teacher: Callable[[DecisionEnv, int, Mapping], str]
    data_tools: bool = False


TEXT_METHODS: dict[str, TextMethod] = {
    "trading_r1": TextMethod("trading_r1", {"decision": 1.0, "outcome": 0.5, "placement": 0.1},
                             trading_r1.build_query, trading_r1.position, trading_r1.format_teacher),
    "trade_r1_fsr": TextMethod("trade_r1_fsr", {"trade_r1_fsr": 1.0}, trade_r1.build_query, trade_r1.position,
                               trade_r1.format_teacher),
    "trade_r1_dsr": TextMethod("trade_r1_dsr", {"trade_r1_dsr": 1.0}, trade_r1.build_query, trade_r1.position,
                               trade_r1.format_teacher),
    "alphaquanter": TextMethod("alphaquanter", {"total": 1.0}, alphaquanter.build_query, alphaquanter.position,
                               alphaquanter.format_teacher, data_tools=True),
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
    return cfg.eval.device


def eval_engine(policy, tok, tools: list, cfg: CompareConfig, m: Mapping, max_tool_calls: int):
    """The evaluation `RolloutEngine`: ``eval`` settings (greedy by default) with the method's on top."""
    from llm.rollout import RolloutEngine

    ev = cfg.eval_settings(m)
    return RolloutEngine(policy, tok, tools, max_new_tokens=int(m.get("max_new_tokens", 128)),
                         temperature=ev.temperature, max_tool_calls=max_tool_calls,
                         max_batch_rows=ev.max_batch_rows, seed=cfg.seed)


Records = list[DecisionRecord]


SFT_FAMILY = {"trading_r1": "trading_r1", "trade_r1_fsr": "trade_r1", "trade_r1_dsr": "trade_r1",
              "alphaquanter": "alphaquanter"}  # methods with one teacher share one SFT run
GRPO_ONLY = ("weights", "grpo", "cost", "checkpoint", "real_config")  # section keys the SFT stage does not read


def sft_fingerprint(cfg: CompareConfig, name: str) -> str:
    """What a method's SFT stage (and its validation parse check) depends on: data, seed, trimming,
    the policy and tokenizer bytes, the SFT budget and the method's teacher / prompt / eval settings."""
    m = cfg.method(name)
    policy = {**cfg.policy, **dict(m.get("policy", {}))}
    tok_file = Path(str(policy.get("tokenizer_path", "")), "tokenizer.json")
    return json.dumps({"family": SFT_FAMILY[name], "data": dataclasses.asdict(cfg.data), "seed": cfg.seed,
                       "max_context_chars": cfg.max_context_chars, "benchmark": cfg.benchmark, "policy": policy,
                       "backtest": dataclasses.asdict(cfg.backtest), "eval": dataclasses.asdict(cfg.eval),
                       "tokenizer": hashlib.sha256(tok_file.read_bytes()).hexdigest() if tok_file.is_file() else None,
                       "sft": dataclasses.asdict(cfg.sft_config(m)),
                       "section": {k: v for k, v in m.items() if k not in GRPO_ONLY}}, sort_keys=True, default=str)


def method_sft(name: str, env: DecisionEnv, work: Path):
    """The method's SFT stage: ``sft.examples`` train-split days, each with the method's teacher text,
    trained by ``rl.methods.text_sft`` on the budget of ``sft`` (resumable from ``state.pt``), then the
    share of unparsed greedy decisions on the validation split's decision days. Trained once per teacher
    (Trade-R1's FSR and DSR share it) into ``<work>/sft/<family>/`` -> (policy, report)."""
    from llm.policy import Policy
    from rl.methods.env import decision_rows, train_days
    from rl.methods.text_sft import text_sft
    from stockr1.progress import progress

    spec, cfg, m = TEXT_METHODS[name], env.cfg, env.cfg.method(name)
    sc = cfg.sft_config(m)
    d = work / "sft" / SFT_FAMILY[name]
    fp = sft_fingerprint(cfg, name)
    report_path = d / "report.json"
    if report_path.is_file() and json.loads(report_path.read_text()).get("fingerprint") == fp:
        print(f"[compare] {name}: SFT cached in {d}", flush=True)
        return Policy.load(d / "policy"), json.loads(report_path.read_text())["report"]
    if (d / "fingerprint.json").is_file() and json.loads((d / "fingerprint.json").read_text()) != fp:
        for stale in ("state.pt", "report.json"):  # another config's run: start over
            (d / stale).unlink(missing_ok=True)
    d.mkdir(parents=True, exist_ok=True)
    (d / "fingerprint.json").write_text(json.dumps(fp))
    policy = _policy(cfg, m, soft_tokens=False)
    rows = train_days(env.windows, sc.examples, cfg.seed + 1)  # its own draw: GRPO's queries are n_train days
    prompts = [spec.build(env, int(i), m)[0] for i in rows]
    targets = [spec.teacher(env, int(i), m) for i in rows]
    state = d / "state.pt"
    t0, every, first = time.perf_counter(), max(1, sc.total_steps(len(rows)) // 40), []

    def log(step: int, total: int, loss: float) -> None:
        first[:] = first or [step - 1]  # a resumed run's earlier steps do not count toward the rate
        if step % every == 0 or step == total:
            print(f"[compare] {name} sft {progress(step, total, time.perf_counter() - t0, step - first[0], 'step')}"
                  f", loss {loss:.3f}", flush=True)

    losses = text_sft(policy, prompts, targets, sc, seed=cfg.seed, ckpt=state, progress=log)
    sft_s = time.perf_counter() - t0
    policy.save(d / "policy")
    val = decision_rows(env.windows, sc.val_decisions_per_ticker, env.bt.holding, split="val")
    t1 = time.perf_counter()
    records, example = evaluate_text_method(policy, name, env, rows=val)
    unparsed = sum(r.position is None for r in records)
    report = {"examples": len(rows), "steps": len(losses), "batch_size": sc.batch_size, "lr": sc.lr,
              "loss_first": losses[0], "loss_last": float(np.mean(losses[-50:])), "sft_s": sft_s,
              "val_decisions": len(records), "val_unparsed": unparsed,
              "val_parse_failure_rate": unparsed / max(1, len(records)), "val_eval_s": time.perf_counter() - t1,
              "val_example_output": example,
              "loss_curve": [float(np.mean(losses[k:k + 50])) for k in range(0, len(losses), 50)]}
    atomic_write(report_path, lambda p: p.write_text(json.dumps({"fingerprint": fp, "report": report}, indent=1)))
    print(f"[compare] {name}: SFT {len(losses)} steps in {sft_s:.0f} s, validation parse failures "
          f"{unparsed}/{len(records)}", flush=True)
    return policy, report


def method_funcs(name: str, weights: Mapping[str, float]) -> tuple[dict[str, Callable], dict[str, float]]:
    """The GRPO reward functions and weights of method ``name``. Trade-R1 also logs, at weight 0 (no
    effect on the advantages), both gates and their inputs r and s on the same rollouts, so the
    README can show per step where FSR and DSR differ."""
    from rl.methods import reward_functions

    funcs = reward_functions(TEXT_METHODS[name].reward)
    out, w = {k: funcs[k] for k in weights}, dict(weights)
    if name.startswith("trade_r1_"):
        for gate, key in (("fsr", "gate_fsr"), ("dsr", "gate_dsr"), ("market_only", "r"), ("consistency", "s")):
            out[key], w[key] = reward_functions(f"trade_r1_{gate}")[f"trade_r1_{gate}"], 0.0
    return out, w


def run_text_method(name: str, env: DecisionEnv, out: Path,
                    anon: DecisionEnv | None = None) -> tuple[Records, dict[str, Any], Records | None]:
    """SFT (``method_sft``) and GRPO (unless a checkpoint is given), then greedy evaluation on the
    decision days (and, with ``anon``, the same policy on the anonymised ones)."""
    from rl.methods import run_grpo
    from rl.methods.alphaquanter.tools import AlphaQuanterTool

    spec, cfg, m = TEXT_METHODS[name], env.cfg, env.cfg.method(name)
    tools = [AlphaQuanterTool(env.store)] if spec.data_tools else []
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    if m.get("checkpoint"):
        policy = _policy(cfg, m, soft_tokens=False)
    else:
        if cfg.sft_config(m) is not None:
            policy, info["sft"] = method_sft(name, env, out.parent)
        else:
            policy = _policy(cfg, m, soft_tokens=False)
        t0 = time.perf_counter()
        built = [spec.build(env, int(i), m) for i in env.train_rows]
        funcs, weights = method_funcs(name, dict(m.get("weights") or spec.weights))
        rft, acc = cfg.rft(m)
        hist = run_grpo(policy, [b[0] for b in built], [b[2] for b in built], funcs, weights,
                        rft, out / "grpo", tools=tools,
                        sample_refs=[env.ref(int(i)) for i in env.train_rows] if tools else None, accelerator=acc)
        info["reward_per_step"] = [h.get("reward/total") for h in hist]
        info["rewards_per_step"] = [{k.removeprefix("reward/"): v for k, v in h.items() if k.startswith("reward/")}
                                    for h in hist]
        policy.save(out / "policy")  # the evaluated weights (Trade-R1's FSR vs DSR distance reads them)
    info["train_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    records, example = evaluate_text_method(policy.to(eval_device(cfg)), name, env)
    info["eval_s"], info["example_output"] = time.perf_counter() - t0, example
    return records, info, evaluate_text_method(policy, name, anon)[0] if anon is not None else None


def evaluate_text_method(policy, name: str, env: DecisionEnv, tokenizer=None,
                         rows: np.ndarray | None = None) -> tuple[list[DecisionRecord], str]:
    """Greedy rollouts of ``policy`` (the Policy forward contract and a ``.tokenizer``; a
    ``ScriptedPolicy`` with ``tokenizer=`` in tests) on ``rows`` (default: the decision days)
    -> records, first completion."""
    from llm.tokenizer import chat_prompt
    from rl.methods.alphaquanter.tools import AlphaQuanterTool

    spec, cfg, m = TEXT_METHODS[name], env.cfg, env.cfg.method(name)
    tok = tokenizer or policy.tokenizer
    tools = [AlphaQuanterTool(env.store)] if spec.data_tools else []
    rows = env.rows if rows is None else rows
    built = [spec.build(env, int(i), m) for i in rows]
    engine = eval_engine(policy, tok, tools, cfg, m, int(m.get("max_tool_calls", 1)))
    rollouts = engine.generate([chat_prompt(tok, b[0]) for b in built], sample_refs=[env.ref(int(i)) for i in rows])
    records = []
    for i, b, ro in zip(rows, built, rollouts, strict=True):
        tk, t = env.ref(int(i))
        obs = "\n".join(s.text for s in ro.segments if s.kind == "tool")
        s = trade_r1.consistency(f"{b[1]}\n{obs}".strip(), ro.completion, tk, env.aliases)
        records.append(DecisionRecord(tk, str(t.date()), spec.position(ro.completion), ro.n_generated, s,
                                      len(ro.tool_calls)))
    return records, rollouts[0].completion[:600] if rollouts else ""


# ------------------------------------------------------------------------------ Stock-R1
def run_stock_r1(env: DecisionEnv, out: Path,
                 anon: DecisionEnv | None = None) -> tuple[Records, dict[str, Any], Records | None]:
    """u-GRPO through ``rl.setup.run_grpo`` (its own QA prompts, decoder, ForecastTool and scorer),
    then greedy rollouts on the decision days (and the anonymised ones) and the z-rule on each
    decoded forecast."""
    from forecast_action.build import load_decoder
    from llm.policy import Policy
    from rl.setup import run_grpo

    cfg, m = env.cfg, env.cfg.method("stock_r1")
    info: dict[str, Any] = {}
    t0 = time.perf_counter()
    run_dir = Path(m["checkpoint"]) if m.get("checkpoint") else out / "grpo" / "stock_r1"
    if not m.get("checkpoint"):
        sft_dir = Path(m["sft_run_dir"]) if m.get("sft_run_dir") else None  # a finished joint SFT run
        if sft_dir is not None and not (sft_dir / "policy" / "policy_config.json").exists():
            raise FileNotFoundError(f"methods.stock_r1.sft_run_dir {sft_dir} has no policy/: train it with "
                                    f"`stockr1 sft --config configs/sft/tiny.yaml` or remove the key")
        if m.get("warm_start"):  # Stock-R1's own joint SFT (llm.sft.run_sft), then u-GRPO from it
            sft_dir = stock_r1.warm_start_sft(m["warm_start"], cfg.seed, cfg.max_context_chars, out)
            info["warm_start_s"] = time.perf_counter() - t0
        # the method's records are the cache (keyed on the config); a GRPO run left by a kill starts over
        summary = run_grpo(m.get("config", "configs/grpo/tiny.yaml"), run="stock_r1", out_root=out / "grpo",
                           sft_dir=sft_dir, overrides=cfg.stock_r1_overrides(m), use_wandb=False, overwrite=True)
        info["reward_final"] = summary.get("final", {}).get("reward/total")
    info["train_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    policy, decoder = Policy.load(run_dir / "policy").to(eval_device(cfg)), load_decoder(run_dir / "decoder")
    records, example = evaluate_stock_r1(policy, decoder, env)
    info["eval_s"], info["example_output"] = time.perf_counter() - t0, example
    return records, info, evaluate_stock_r1(policy, decoder, anon)[0] if anon is not None else None


def evaluate_stock_r1(policy, decoder, env: DecisionEnv, tokenizer=None) -> tuple[list[DecisionRecord], str]:
    """Greedy rollouts with the ForecastTool on the decision days; side = z-rule on the decoded forecast."""

    from llm.tools import ForecastTool

    cfg, m, w = env.cfg, env.cfg.method("stock_r1"), env.windows
    tok = tokenizer or policy.tokenizer
    samples = stock_r1.decision_samples(env, decoder, tok)
    engine = eval_engine(policy, tok, [ForecastTool(decoder, w)], cfg, m, 1)
    ts = soft_tokens(samples)
    rollouts = engine.generate([s.prompt for s in samples], ts, [s.sample_ref for s in samples])
    records = []
    for i, ro in zip(env.rows, rollouts, strict=True):
        tk, t = env.ref(int(i))
        pos = stock_r1.position(ro.forecast, ro.action, w.select(np.array([int(i)])), env.bt)
        model = "".join(s.text for s in ro.segments if s.kind == "model")
        obs = "\n".join(s.text for s in ro.segments if s.kind == "tool")
        s = trade_r1.consistency(f"{env.context(int(i))}\n{obs}".strip(), stock_r1.verification_text(model, pos), tk,
                                 env.aliases)
        records.append(DecisionRecord(tk, str(t.date()), pos, ro.n_generated, s, len(ro.tool_calls)))
    return records, rollouts[0].completion[:600] if rollouts else ""


# ------------------------------------------------------------------------------ benchmark
def method_fingerprint(cfg: CompareConfig, name: str) -> str:
    """The cache key of one method's records: the config it runs with, and the bytes it starts from,
    not just their paths: the shared tokenizer (``policy.tokenizer_path``) and, for Stock-R1, the SFT
    run's weights, or those of a ``checkpoint`` that is a run (policy/ + decoder/). A rebuilt tokenizer, a
    retrained SFT or a re-shipped release never reuses stale records. Not in the key: ``threads`` (how
    many cores computed the rows, not what they are) and ``work_dir``."""
    from llm.sft import run_fingerprint

    m = cfg.method(name)
    runs = [r for r in (m.get("sft_run_dir"), m.get("checkpoint"))
            if r and Path(r, "policy").is_dir() and Path(r, "decoder").is_dir()]
    weights = [run_fingerprint(r) for r in runs]
    policy = {**cfg.policy, **dict(cfg.method(name).get("policy", {}))}  # as `_policy` builds it
    tok_file = Path(str(policy.get("tokenizer_path", "")), "tokenizer.json")
    vocab = [hashlib.sha256(tok_file.read_bytes()).hexdigest()] if tok_file.is_file() else []
    return json.dumps([dataclasses.asdict(cfg) | {"methods": {name: m}, "work_dir": None, "threads": None}] + weights + vocab,
                      sort_keys=True, default=str)


def run_method(name: str, env: DecisionEnv, work: Path, fingerprint: str, anon: DecisionEnv | None = None,
               anon_key: Mapping[str, Any] | None = None) -> tuple[Records, dict[str, Any], Records | None]:
    """One method's records (and its anonymised records with ``anon``), cached in
    ``<work>/<name>/records.json`` for this config; a cache without anonymised records, or with records of
    another anonymisation (``anon_key``, ``anonymiser_key``), is rerun when they are asked for."""
    out = work / name
    cache = out / "records.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        if d.get("fingerprint") == fingerprint and (anon is None or (d.get("anonymised_records") is not None
                                                                     and d.get("anonymiser") == anon_key)):
            print(f"[compare] {name}: cached", flush=True)
            a = d.get("anonymised_records") if anon is not None else None
            return ([DecisionRecord(**r) for r in d["records"]], d["info"],
                    None if a is None else [DecisionRecord(**r) for r in a])
    print(f"[compare] {name}: training + evaluating", flush=True)
    run = run_stock_r1 if name == "stock_r1" else partial(run_text_method, name)
    records, info, anon_records = run(env, out, anon)
    out.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"fingerprint": fingerprint, "records": [dataclasses.asdict(r) for r in records],
                                 "anonymised_records": None if anon_records is None else
                                 [dataclasses.asdict(r) for r in anon_records],
                                 "anonymiser": None if anon_records is None else anon_key,
                                 "info": json_clean(info)}, indent=1, default=str))
    return records, info, anon_records


def anonymiser_key(an: Anonymiser) -> dict[str, Any]:
    """What decides the anonymised prompts: the date shift, the price scale and the tickers kept in the
    rebased frame (the neutral ids follow from the config's tickers)."""
    return {"weeks": an.weeks, "scale": an.scale, "rebased": sorted(an.rebased)}


def deanonymised(records: Records, an: Anonymiser) -> Records:
    """Anonymised records back on the real tickers and days, so they trade on the plain prices (the
    same returns by construction) and pair day by day with the plain run."""
    back = {v: k for k, v in an.ids.items()}
    return [dataclasses.replace(r, ticker=back[r.ticker], date=str(an.undate(r.date).date())) for r in records]


def method_policy_config(cfg: CompareConfig, name: str):
    """The ``PolicyConfig`` method ``name`` is evaluated with: its checkpoint's saved one, Stock-R1's SFT
    run's (or the SFT / GRPO config it trains from), else the shared ``policy`` + the method's own."""
    from llm.policy import PolicyConfig
    from llm.sft_config import SFTRunConfig
    from rl.run_config import GRPORunConfig

    m = cfg.method(name)
    saved = [Path(m["checkpoint"], "policy" if name == "stock_r1" else "")] if m.get("checkpoint") else []
    saved += [Path(m["sft_run_dir"], "policy")] if name == "stock_r1" and m.get("sft_run_dir") else []
    if saved:
        return PolicyConfig.from_dict(json.loads((saved[0] / "policy_config.json").read_text()))
    if name != "stock_r1":
        return PolicyConfig.from_dict({**cfg.policy, **dict(m.get("policy", {}))})
    if m.get("warm_start"):
        return SFTRunConfig.from_yaml(m["warm_start"]["config"], m["warm_start"]["overrides"]).policy
    return GRPORunConfig.from_yaml(m["config"], cfg.stock_r1_overrides(m)).policy


def cutoff_lines(cfg: CompareConfig, env: DecisionEnv, methods: Sequence[str], allow: bool) -> list[str]:
    """``stockr1.cutoff.cutoff_line`` of every method's policy on the decision days (ValueError = refused)."""
    dates = [env.ref(int(i))[1] for i in env.rows]
    lines = []
    for name in methods:
        p = method_policy_config(cfg, name)
        lines.append(cutoff_line(p.pretrained, p.name_or_path, p.knowledge_cutoff, dates, allow))
    return list(dict.fromkeys(lines))


def compare(cfg: CompareConfig, out: Path, env: DecisionEnv | None = None, methods: Sequence[str] | None = None,
            run_meta: Mapping[str, Any] | None = None, allow_before_cutoff: bool = False,
            anonymise: bool = False) -> dict:
    """Run every method, write ``metrics.json``, ``table.md``, ``intervals.json``, ``equity.png``,
    ``decisions.json``, ``run_info.json`` (with ``run_meta``: command, commit, date); return the metrics.
    A pretrained policy's knowledge cutoff is checked on the decision days first (``cutoff_lines``).
    ``anonymise``: each trained policy is also evaluated on the anonymised decision days (the
    memorisation probe); its rows are ``<method> (anonymised)`` with the paired gap in the intervals."""
    import torch

    torch.set_num_threads(int(cfg.threads))
    t_all = time.perf_counter()
    env = env or DecisionEnv.build(cfg)
    work = Path(cfg.work_dir)
    methods = list(methods or [m for m in METHODS if m in cfg.methods])
    cutoff = cutoff_lines(cfg, env, methods, allow_before_cutoff)  # before any training
    bench = env.bench_prices()
    metrics, curves = {}, {}
    metrics[BUY_AND_HOLD], curves[BUY_AND_HOLD] = buy_and_hold_metrics(env.prices, env.bt, bench)
    results = {BUY_AND_HOLD: buy_and_hold_results(env.prices, env.bt, bench)}
    timings, infos, decisions = {}, {}, {}
    an = env.anonymiser() if anonymise else None
    aenv = env.anonymised(an) if an is not None else None
    pairs = []
    bar = Progress(len(methods), "[compare]", unit="method")
    for name in methods:
        records, info, anon_records = run_method(name, env, work, method_fingerprint(cfg, name), aenv,
                                                 None if an is None else anonymiser_key(an))
        bar.advance()
        metrics[name], curves[name] = method_metrics(records, env.prices, env.bt, bench)
        results[name] = method_results(records, env.prices, env.bt, bench)
        if anon_records is not None:
            a, back = f"{name} (anonymised)", deanonymised(anon_records, an)
            metrics[a], curves[a] = method_metrics(back, env.prices, env.bt, bench)
            results[a], decisions[a] = method_results(back, env.prices, env.bt, bench), [dataclasses.asdict(r) for r in back]
            pairs.append((name, a))
        timings[name] = {"train_s": info.get("train_s", float("nan")), "eval_s": info.get("eval_s", float("nan"))}
        infos[name], decisions[name] = info, [dataclasses.asdict(r) for r in records]
        print(f"[compare] {name}: {timings[name]}", flush=True)
    first = {tk: str(p.index[0].date()) for tk, p in env.prices.items()}
    last = {tk: str(p.index[-1].date()) for tk, p in env.prices.items()}
    days = {"n": int(len(env.rows)), "per_ticker": {tk: int(np.sum(env.windows.ticker[env.rows] == tk)) for tk in env.prices},
            "period_start": first, "period_end": last, "backtest": dataclasses.asdict(env.bt)}
    pairs = [(m, ref) for m in methods for ref in (BUY_AND_HOLD, "stock_r1") if ref in results and m != ref] + pairs
    extra = {"stock_r1_sft": stock_r1_sft_budget(cfg) if "stock_r1" in methods else None,
             "policies": {name: policy_record(cfg, name) for name in methods},
             "trade_r1_gates": gate_distance(work, decisions) if {"trade_r1_fsr", "trade_r1_dsr"} <= set(methods) else None}
    intervals = bootstrap_intervals(results, pairs, env.bt.holding, seed=cfg.seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "intervals.json").write_text(json.dumps(json_clean(intervals), indent=1))
    table = write_report(out, metrics, curves, timings, decisions,
                         f"held-out period {min(first.values())} .. {max(last.values())}, {len(env.rows)} decisions per method",
                         {"config": dataclasses.asdict(cfg), "methods": methods, "timings_s": timings,
                          "total_s": time.perf_counter() - t_all, "decision_days": days, "info": infos,
                          "cutoff": cutoff, "anonymise": None if an is None else
                          {**anonymiser_key(an), "ids": dict(an.ids)}, **extra, **(run_meta or {})})
    print(table, flush=True)
    return metrics


def policy_record(cfg: CompareConfig, name: str) -> dict[str, Any]:
    """What method ``name``'s row was computed with: its backbone (name, and the tiny dims), and whether it
    is a trained checkpoint evaluated as given (no training here) or trained here on the GRPO budget."""
    pc, m = method_policy_config(cfg, name), cfg.method(name)
    tiny = pc.name_or_path == "tiny"
    return {"name_or_path": pc.name_or_path, "hidden": pc.tiny_hidden if tiny else None,
            "layers": pc.tiny_layers if tiny else None, "lora_r": pc.lora_r, "checkpoint": m.get("checkpoint"),
            "grpo_steps": 0 if m.get("checkpoint") else int(cfg.rft(m)[0].get("steps", 0))}


def stock_r1_sft_budget(cfg: CompareConfig) -> dict[str, Any] | None:
    """The budget of the joint SFT run Stock-R1's row starts from (its summary.json and config.yaml): the
    ``sft_run_dir`` u-GRPO starts from, or a ``checkpoint`` that is itself a joint SFT run (evaluated as is)."""
    import yaml

    m = cfg.method("stock_r1")
    run = m.get("sft_run_dir") or m.get("checkpoint")
    if not run or not Path(run, "summary.json").is_file():
        return None
    summary, train = json.loads(Path(run, "summary.json").read_text()), {}
    if Path(run, "config.yaml").is_file():
        train = (yaml.safe_load(Path(run, "config.yaml").read_text()) or {}).get("train", {})
    return {"run_dir": str(run), "steps": summary.get("steps"), "n_traces": summary.get("n_traces"),
            "batch_size": train.get("batch_size"), "lr": train.get("lr"), "sec": summary.get("final", {}).get("sec")}


def gate_distance(work: Path, decisions: Mapping[str, list]) -> dict[str, float] | None:
    """How far Trade-R1's FSR and DSR runs ended apart: L2 distance of their evaluated weights (and of
    each from the shared SFT policy), and the share of test decisions on the same side."""
    from safetensors.torch import load_file

    def weights(d: Path) -> dict | None:
        f = d / "model" / "model.safetensors"
        return load_file(str(f)) if f.is_file() else None

    fsr, dsr, sft = (weights(work / "trade_r1_fsr" / "policy"), weights(work / "trade_r1_dsr" / "policy"),
                     weights(work / "sft" / "trade_r1" / "policy"))
    if fsr is None or dsr is None or sft is None:
        return None

    def dist(a: dict, b: dict) -> float:
        return float(sum(((a[k].double() - b[k].double()) ** 2).sum() for k in a) ** 0.5)

    same = [a["position"] == b["position"] for a, b in zip(decisions["trade_r1_fsr"], decisions["trade_r1_dsr"], strict=True)]
    return {"param_l2_fsr_dsr": dist(fsr, dsr), "param_l2_fsr_vs_sft": dist(fsr, sft), "param_l2_dsr_vs_sft": dist(dsr, sft),
            "same_decisions": float(np.mean(same)) if same else float("nan")}


def stock_r1_levels(env: DecisionEnv, run_dir: Path) -> dict[str, Any]:
    """Why Stock-R1's decisions are what they are: for each decision day, the emitted action's
    end_value against the day's close and the decoded 10-day return (greedy, as evaluated). A
    policy that writes training-era price levels on test-era days asks the decoder for a fall."""

    from forecast_action.build import load_decoder
    from llm.policy import Policy
    from llm.tools import ForecastTool

    cfg, w = env.cfg, env.windows
    policy, decoder = Policy.load(run_dir / "policy").eval(), load_decoder(run_dir / "decoder")
    samples = stock_r1.decision_samples(env, decoder, policy.tokenizer)
    engine = eval_engine(policy, policy.tokenizer, [ForecastTool(decoder, w)], cfg, cfg.method("stock_r1"), 1)
    ts = soft_tokens(samples)
    rolls = engine.generate([s.prompt for s in samples], ts, [s.sample_ref for s in samples])
    close = np.array([float(w.last_close[int(i)]) for i in env.rows])
    end = np.array([getattr(r.action, "end_value", None) or np.nan for r in rolls], dtype=float)
    dec = np.array([r.forecast.close[0, -1] if r.forecast is not None else np.nan for r in rolls], dtype=float)
    dirs = [getattr(r.action, "direction", None) for r in rolls]
    implied, decoded = end / close - 1, dec / close - 1
    return {"n": len(rolls), "close_range": [float(close.min()), float(close.max())],
            "end_value_range": [float(np.nanmin(end)), float(np.nanmax(end))],
            "implied_end_change_median": float(np.nanmedian(implied)),
            "share_end_value_below_close": float(np.nanmean(implied < 0)),
            "decoded_return_median": float(np.nanmedian(decoded)), "share_decoded_down": float(np.nanmean(decoded < 0)),
            "directions": {str(d): dirs.count(d) for d in sorted(set(dirs), key=str)}}


def write_readme(out: Path, header: str) -> Path:
    """``out/README.md`` from the ``metrics.json`` and ``run_info.json`` (and ``stock_r1_levels.json``)
    a run saved there; nothing is rerun."""
    saved = {}
    for name in ("metrics.json", "run_info.json"):
        if not (out / name).is_file():
            raise FileNotFoundError(f"{out / name} does not exist: --report-only needs a finished compare run in --out")
        saved[name] = json.loads((out / name).read_text())
    lv = out / "stock_r1_levels.json"
    levels = json.loads(lv.read_text()) if lv.is_file() else None
    iv = out / "intervals.json"
    text = readme(saved["metrics.json"], saved["run_info.json"], header, levels,
                  json.loads(iv.read_text()) if iv.is_file() else None)
    table = table_md(nan_for_none(saved["metrics.json"]), nan_for_none(saved["run_info.json"]["timings_s"]))
    atomic_write(out / "table.md", lambda p: p.write_text(table))
    atomic_write(out / "README.md", lambda p: p.write_text(text))
    return out / "README.md"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="stockr1 bench compare", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/compare/tiny.yaml")
    ap.add_argument("--out", default="results/compare", help="refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out (the method caches in work_dir are reused)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite README.md and table.md from the metrics.json / run_info.json in --out; run nothing")
    ap.add_argument("--methods", nargs="*", default=None, help=f"subset of {list(METHODS)}")
    ap.add_argument("--allow-before-cutoff", action="store_true",
                    help="evaluate a pretrained policy on decision days on or before its knowledge cutoff (said in the README)")
    ap.add_argument("--anonymise", action="store_true",
                    help="memorisation probe: also evaluate every trained policy on the anonymised decision days")
    ap.add_argument("--diagnose-stock-r1", action="store_true",
                    help="also write <out>/stock_r1_levels.json (emitted action levels vs the day's close)")
    a, over = parse_config_args(ap, argv)
    header = generated_line(command_line("stockr1 bench compare", argv))
    if a.report_only:
        print(f"wrote {write_readme(Path(a.out), header)}")
        return 0
    cfg = CompareConfig.from_yaml(a.config, over)
    if a.print_config:
        print_config(cfg)
        return 0
    refuse_existing(a.out, a.overwrite, f" (each method's records are cached in {cfg.work_dir}: a rerun with "
                                        "--overwrite reuses them; --report-only rewrites only the README)")
    meta = {"command": command_line("stockr1 bench compare", argv), "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d")}
    with output_dir(a.out, a.overwrite) as out:
        compare(cfg, out, methods=a.methods, run_meta=meta, allow_before_cutoff=a.allow_before_cutoff,
                anonymise=a.anonymise)
        if a.diagnose_stock_r1:
            m = cfg.method("stock_r1")
            run_dir = Path(m["checkpoint"]) if m.get("checkpoint") else Path(cfg.work_dir) / "stock_r1" / "grpo" / "stock_r1"
            levels = stock_r1_levels(DecisionEnv.build(cfg), run_dir)
            (out / "stock_r1_levels.json").write_text(json.dumps(levels, indent=1))
            print(json.dumps(levels, indent=1))
        write_readme(out, header)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
