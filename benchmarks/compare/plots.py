"""Reporting for `stockr1 bench compare`: per-decision records -> the shared simulator -> one table,
``metrics.json``, the equity-curve PNG and the run's JSON records (`write_report`).

Every method row and the buy-and-hold row go through ``stockr1.backtest.simulate`` /
``buy_and_hold`` and ``stockr1.metrics.trading`` with one ``BacktestConfig``, ticker by ticker,
then metrics are averaged over tickers (as ``stockr1 bench backtest``). A decision with no
parseable position (``position`` None) is traded as flat and counted as a parse failure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.backtest import json_clean
from benchmarks.compare.sections import (
    budget_section,
    gate_section,
    probe_section,
    scale_section,
    sft_section,
)
from stockr1.backtest import BacktestConfig, BacktestResult, buy_and_hold, simulate
from stockr1.metrics.trading import TRADING_METRICS
from stockr1.metrics.verdict import verdict

BUY_AND_HOLD = "buy_and_hold"
TEXT_METRICS = ("tokens_per_decision", "tool_calls_per_decision", "consistency", "parse_failure_rate", "n_decisions", "n_long", "n_short", "n_flat")


@dataclass(frozen=True)
class DecisionRecord:
    """One evaluated decision. position: +1 / -1 / 0, or None = no parseable decision (flat);
    tokens: model-written tokens; tool_calls: tool calls the rollout ran (records cached before this
    field read as 0)."""

    ticker: str
    date: str
    position: int | None
    tokens: int
    consistency: float
    tool_calls: int = 0


def _mean_finite(values: Sequence[float]) -> float:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.mean(v)) if v else float("nan")


def method_results(records: Sequence[DecisionRecord], prices: Mapping[str, pd.Series], cfg: BacktestConfig,
                   benchmark: pd.Series | None = None) -> dict[str, BacktestResult]:
    """The simulator's result per ticker with decisions (unparsed = flat)."""
    if not records:
        raise ValueError("no decisions to evaluate")
    out = {}
    for tk in sorted(prices):
        rs = [r for r in records if r.ticker == tk]
        if not rs:
            continue
        d = pd.Series([0 if r.position is None else int(r.position) for r in rs],
                      pd.DatetimeIndex([pd.Timestamp(r.date) for r in rs])).sort_index()
        unknown = d.index.difference(prices[tk].index)
        if len(unknown):
            raise ValueError(f"decision days of {tk!r} not in its price calendar: {[str(x.date()) for x in unknown[:3]]}")
        out[tk] = simulate(d, prices[tk], cfg, benchmark)
    return out


def method_metrics(records: Sequence[DecisionRecord], prices: Mapping[str, pd.Series], cfg: BacktestConfig,
                   benchmark: pd.Series | None = None) -> tuple[dict[str, float], pd.Series]:
    """Trading metrics (mean over tickers) + tokens / tool calls / consistency / parse failures, and
    the mean equity curve [T] over tickers."""
    res = method_results(records, prices, cfg, benchmark).values()
    out = {k: _mean_finite([r.metrics[k] for r in res]) for k in TRADING_METRICS}
    out.update({
        "tokens_per_decision": float(np.mean([r.tokens for r in records])),
        "tool_calls_per_decision": float(np.mean([r.tool_calls for r in records])),
        "consistency": _mean_finite([r.consistency for r in records]),
        "parse_failure_rate": float(np.mean([r.position is None for r in records])),
        "n_decisions": float(len(records)),
        # a constant position is no forecast signal: the table shows how the decisions split
        "n_long": float(sum(r.position == 1 for r in records)),
        "n_short": float(sum(r.position == -1 for r in records)),
        "n_flat": float(sum(r.position in (0, None) for r in records)),
    })
    return out, pd.concat([r.equity.reset_index(drop=True) for r in res], axis=1).mean(axis=1)


def buy_and_hold_results(prices: Mapping[str, pd.Series], cfg: BacktestConfig,
                         benchmark: pd.Series | None = None) -> dict[str, BacktestResult]:
    return {tk: buy_and_hold(prices[tk], cfg, benchmark) for tk in sorted(prices)}


def buy_and_hold_metrics(prices: Mapping[str, pd.Series], cfg: BacktestConfig,
                         benchmark: pd.Series | None = None) -> tuple[dict[str, float], pd.Series]:
    """The shared simulator's buy-and-hold per ticker, averaged; text metrics are NaN (no model)."""
    res = list(buy_and_hold_results(prices, cfg, benchmark).values())
    out = {k: _mean_finite([r.metrics[k] for r in res]) for k in TRADING_METRICS}
    out.update({k: float("nan") for k in TEXT_METRICS})
    return out, pd.concat([r.equity.reset_index(drop=True) for r in res], axis=1).mean(axis=1)


def _lsf(m: Mapping[str, float]) -> str:
    keys = ("n_long", "n_short", "n_flat")
    return "-" if not all(k in m and math.isfinite(m[k]) for k in keys) else " / ".join(str(int(m[k])) for k in keys)


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.2f}"


def _num(x: float, fmt: str = ".3f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, fmt)


def table_md(metrics: Mapping[str, Mapping[str, float]], timings: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """One row per method: returns, Sharpe, drawdown, hit rate, tokens and tool calls per decision,
    consistency s, parse failures (and train / eval seconds when ``timings`` is given)."""
    timings = timings or {}
    head = ("| Method | CR (%) | AR (%) | Sharpe | MDD (%) | HR (%) | Trades | Tokens/decision | Tool calls/decision "
            "| Consistency s | Parse failures (%) | Long / short / flat | Train (s) | Eval (s) |\n|---|" + "---|" * 13
            + "\n")
    rows = []
    for name, m in metrics.items():
        t = timings.get(name, {})
        rows.append(
            f"| {name} | {_pct(m['cumulative_return'])} | {_pct(m['annual_return'])} | {_num(m['sharpe'])} | "
            f"{_pct(m['max_drawdown'])} | {_pct(m['hit_rate'])} | {_num(m['n_trades'], '.1f')} | "
            f"{_num(m['tokens_per_decision'], '.1f')} | {_num(m.get('tool_calls_per_decision', float('nan')), '.2f')} | "
            f"{_num(m['consistency'])} | {_pct(m['parse_failure_rate'])} | "
            f"{_lsf(m)} | "
            f"{_num(t.get('train_s', float('nan')), '.0f')} | {_num(t.get('eval_s', float('nan')), '.0f')} |")
    return head + "\n".join(rows) + "\n"


def interval_table(iv: Mapping[str, object]) -> str:
    """``stockr1.backtest.bootstrap_intervals`` as markdown: each strategy, then each paired difference."""
    def cell(c: Mapping[str, float], pct: bool, diff: bool) -> str:
        f = _pct if pct else _num
        text = f"{f(c['value'])} [{f(c['lo'])}, {f(c['hi'])}]"
        known = all(c.get(k) is not None and math.isfinite(c[k]) for k in ("value", "lo", "hi"))
        return text + (f" {verdict(c['value'], c['lo'], c['hi'])}" if diff and known else "")

    head = "| | CR (%) | Sharpe | HR (%) |\n|---|---|---|---|\n"
    rows = [f"| {name} | {cell(r['cumulative_return'], True, part == 'differences')} | "
            f"{cell(r['sharpe'], False, part == 'differences')} | {cell(r['hit_rate'], True, part == 'differences')} |"
            for part in ("metrics", "differences") for name, r in iv[part].items()]
    return head + "\n".join(rows) + "\n"


def plot_equity(curves: Mapping[str, pd.Series], path: str | Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, c in curves.items():
        ax.plot(c.to_numpy(), label=name, lw=2.0 if name == BUY_AND_HOLD else 1.2,
                ls="--" if name == BUY_AND_HOLD else "-")
    ax.set_xlabel("trading day of the held-out period")
    ax.set_ylabel("equity (mean over tickers)")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(out: Path, metrics: Mapping[str, Mapping[str, float]], curves: Mapping[str, pd.Series],
                 timings: Mapping[str, Mapping[str, float]], decisions: Mapping[str, list], title: str,
                 run_info: Mapping[str, object]) -> str:
    """Write ``metrics.json``, ``table.md``, ``decisions.json``, ``equity.png`` (titled ``title``) and
    ``run_info.json`` under ``out`` (NaN -> null); return the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(json_clean(metrics), indent=2))
    table = table_md(metrics, timings)
    (out / "table.md").write_text(table)
    (out / "decisions.json").write_text(json.dumps(decisions, indent=0))
    plot_equity(curves, out / "equity.png", title)
    (out / "run_info.json").write_text(json.dumps(json_clean(run_info), indent=1, default=str))
    return table


def nan_for_none(rows: Mapping[str, Mapping[str, float | None]]) -> dict[str, dict[str, float]]:
    """Saved rows (``json_clean`` wrote NaN as null) back to floats."""
    return {k: {f: float("nan") if x is None else x for f, x in v.items()} for k, v in rows.items()}


def _method_line(name: str, m: Mapping[str, float]) -> str:
    """What one row's decisions were: parse failures, sides, trades; a one-sided row is flagged."""
    def num(k: str) -> float:
        return float(m.get(k, float("nan")))

    n = num("n_decisions")
    sides = {k: num(f"n_{k}") for k in ("long", "short", "flat")}
    one_side = next((k for k, v in sides.items() if math.isfinite(n) and n > 0 and v == n), None)
    line = (f"- {name}: {_pct(num('parse_failure_rate'))}% of {n:.0f} decisions unparsed; long / short / flat "
            f"{_lsf(m)}; {_num(num('n_trades'), '.1f')} trades per ticker, cumulative return "
            f"{_pct(num('cumulative_return'))}%.")
    if one_side:
        line += f" Every decision is {one_side}: a constant position, not a forecast signal."
    return line


def _backbone(p: Mapping[str, Any]) -> str:
    dims = f", hidden {p['hidden']}, {p['layers']} layers" if p.get("hidden") else ""
    lora = f", LoRA r{p['lora_r']}" if p.get("lora_r") else ""
    return f"`{p['name_or_path']}`{dims}{lora}"


def read_first(run_info: Mapping[str, Any]) -> str:
    """The README's opening caveat, from the policies the rows were computed with (``run_info["policies"]``;
    runs before it was recorded: the shared ``policy`` section): which backbone each method ran on, which
    were trained here, and what the table can and cannot say."""
    cfg = run_info["config"]
    pols = run_info.get("policies") or {
        m: {"name_or_path": cfg["policy"].get("name_or_path"), "hidden": cfg["policy"].get("tiny_hidden"),
            "layers": cfg["policy"].get("tiny_layers"), "lora_r": 0, "checkpoint": None,
            "grpo_steps": cfg["grpo"].get("steps")} for m in run_info["methods"]}
    groups: dict[str, list[str]] = {}
    for m, p in pols.items():
        how = (f"the trained checkpoint `{p['checkpoint']}`, evaluated as is (no training here)" if p.get("checkpoint")
               else f"its own SFT (section Budgets), then {p['grpo_steps']} GRPO steps")
        groups.setdefault(f"{_backbone(p)}: {how}", []).append(m)
    parts = "; ".join(f"{', '.join(ms)} on {k}" for k, ms in groups.items())
    mixed = len({p["name_or_path"] for p in pols.values()}) > 1
    tiny = any(p["name_or_path"] == "tiny" for p in pols.values())
    return (f"**Read this first.** Policies: {parts}. "
            + ("The rows differ by backbone as well as by method, so the table does not rank the methods. " if mixed else "")
            + ("With tiny random-init models a row shows that its method runs end to end on the same data, decision "
               "days, rollout engine and backtest simulator, not how good the method is. " if tiny else "")
            + "A method whose model emits no parseable decision is flat. docs/compare.md describes the protocol "
              "and the real-scale config.")


def _kept_levels(an: Mapping[str, object]) -> str:
    """The probe's exception for the rebased frame, as the README states it (runs before the rule: none)."""
    if "rebased" not in an:
        return " (a run before the rebased-frame rule: any window in the rebased frame was scaled too)"
    n = len(an["rebased"])
    return f" except the {n} tickers quoted in the rebased frame, whose close of t stays 100" if n else ""


def readme(metrics: Mapping[str, Mapping[str, float | None]], run_info: Mapping[str, object], header: str,
           levels: Mapping[str, object] | None = None, intervals: Mapping[str, object] | None = None) -> str:
    """results/compare/README.md from ``metrics.json`` and ``run_info.json`` (and ``stock_r1_levels.json``,
    ``intervals.json`` when present): nothing in it is typed by hand. ``header`` is the generated line;
    the first line under the title says what the knowledge-cutoff check found (runs before the check: "not recorded")."""
    cfg, days = run_info["config"], run_info["decision_days"]
    bt, methods = days["backtest"], run_info["methods"]
    metrics, timings = nan_for_none(metrics), nan_for_none(run_info["timings_s"])
    period = ", ".join(f"{k} {v} .. {days['period_end'][k]}" for k, v in days["period_start"].items())
    recorded = (f"commit `{str(run_info['commit'])[:10]}` on {run_info['date']}" if run_info.get("commit")
                else "a run that did not record its commit")
    found = run_info.get("cutoff") or ["Knowledge cutoff: not recorded (a run before the check)."]
    cutoff = found[0] if len(found) == 1 else "\n".join(f"- {c}" for c in found)  # one per backbone
    lines = [
        "# `stockr1 bench compare`: Stock-R1 vs Trading-R1 vs Trade-R1 vs AlphaQuanter", "",
        cutoff, "",  # the first line under the title, as bench qa's
        header, f"The numbers are those of {recorded} (`run_info.json`).", "",
        read_first(run_info), "",
        f"Setup: {days['n']} decisions per method over {period} "
        f"(per ticker: {', '.join(f'{k} {v}' for k, v in days['per_ticker'].items())}); each position held "
        f"{bt['holding']} days, {bt['cost_bps']} bps per side, threshold {bt['threshold']}; {cfg['n_train']} "
        f"train-split days as GRPO queries; seed {cfg['seed']}; {run_info['total_s']:.0f} s in all.", "",
        *([f"Memorisation probe (`--anonymise`): the rows `<method> (anonymised)` are the same trained policies on "
           f"the same decision days with neutral ticker ids, no company names, every date {an['weeks']} weeks later "
           f"and prices x {an['scale']}{_kept_levels(an)} (`stockr1.anonymise`: answers, labels and rewards "
           "unchanged); the "
           "`<method> - <method> (anonymised)` rows of the intervals are the paired gap: above 0 beyond noise means "
           "the policy used what it knew of the named stocks and dates.", ""]
          if (an := run_info.get("anonymise")) else []),
        "## Table", "",
        "CR/AR/MDD/HR in %, means over the tickers; Trades = closed trades per ticker; tokens = model-written "
        "tokens per decision; tool calls = tool calls run per decision (AlphaQuanter's data tools, Stock-R1's "
        "forecast tool); consistency s = Trade-R1's triangular score with the offline judge; Train / Eval = "
        "wall seconds of the invocation that computed the row (cached rows keep theirs).", "",
        table_md(metrics, timings), *budget_section(run_info), *sft_section(run_info)]
    if intervals:
        lines += [
            "## Intervals", "",
            f"{100 * intervals['level']:.0f}% circular block-bootstrap intervals ({intervals['n_boot']} resamples of the "
            f"trading days, blocks of {intervals['block']} days, all tickers of a day together; "
            "`stockr1.backtest.bootstrap_intervals`), each row's value first; the differences are paired on the "
            "same resampled days ([intervals.json](intervals.json)). A difference whose interval holds 0 is a tie.", "",
            interval_table(intervals), *probe_section(run_info, intervals, levels, metrics)]
    lines += [
        "## What each row's decisions were", "",
        *(_method_line(k, metrics[k]) for k in methods if k in metrics), "",
        *gate_section(run_info), *(scale_section(run_info, intervals) if cfg.get("sft") else [])]
    if levels:
        lines += [
            "## Stock-R1's emitted levels (`stock_r1_levels.json`, `--diagnose-stock-r1`)", "",
            f"Over {levels['n']} decisions the day's close ranged {levels['close_range'][0]:.4g} .. "
            f"{levels['close_range'][1]:.4g} and the emitted action's end_value {levels['end_value_range'][0]:.4g} .. "
            f"{levels['end_value_range'][1]:.4g}; {100 * levels['share_end_value_below_close']:.0f}% of the end "
            f"values are below the close and {100 * levels['share_decoded_down']:.0f}% of the decoded 10-day paths "
            f"end down (directions written: {levels['directions']}).", ""]
    lines += [f"Cached per method in `{cfg['work_dir']}/<method>/records.json` (keyed on the config, the tokenizer "
              "and Stock-R1's SFT weights), so a rerun only assembles the outputs. Files: [table.md](table.md), "
              "[metrics.json](metrics.json), [run_info.json](run_info.json), [decisions.json](decisions.json), "
              "[equity.png](equity.png).", ""]
    return "\n".join(lines)
