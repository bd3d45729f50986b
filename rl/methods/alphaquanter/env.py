"""AlphaQuanter environment: prompts, agent episodes on the shared rollout engine, the backtest.

Portfolio rules (§5.2; Table 3 of the paper is not in our copy, so the usual single-asset rules
of that line of work are used and documented here): long-only, all-in. BUY when flat buys with all
equity at the close of t; SELL when long sells everything at the close; every other (state,
action) pair keeps the position. ``cost_bps`` is paid on each buy and sell. Metrics: ARR
(geometric annualised return), Sharpe (rf 4%) and MDD from ``stockr1.metrics.trading``, plus the
mean number of model-generated tokens per decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rl.methods.alphaquanter.rewards import parse_episode
from rl.methods.alphaquanter.tools import AlphaQuanterTool, system_prompt
from stockr1.metrics.trading import trading_metrics


def episode_prompt(ticker: str, t, max_calls: int) -> str:
    """The initial state s_0: instructions, stock symbol and date (§3)."""
    return f"{system_prompt(max_calls)}\n\nStock: {ticker}\nDate: {pd.Timestamp(t).date()}\n"


def make_engine(policy, tokenizer, store, max_calls: int = 5, **engine_kw):
    """The shared RolloutEngine with the AlphaQuanter data tool (one call at a time, at most ``max_calls``)."""
    from llm.rollout import RolloutEngine

    return RolloutEngine(policy, tokenizer, [AlphaQuanterTool(store)], max_tool_calls=max_calls, **engine_kw)


def run_episodes(engine, refs: Sequence[tuple[str, Any]], max_calls: int, chat=None) -> list[dict[str, Any]]:
    """One greedy/sampled episode per (ticker, t): decision, tool calls, tokens generated."""
    prompts = [episode_prompt(tk, t, max_calls) for tk, t in refs]
    if chat is not None:
        prompts = [chat(p) for p in prompts]
    out = []
    for ro in engine.generate(prompts, sample_refs=list(refs)):
        ep = parse_episode(ro.completion)
        out.append({"ref": ro.sample_ref, "action": ep.action, "n_calls": len(ro.tool_calls),
                    "tokens": ro.n_generated, "completion": ro.completion})
    return out


@dataclass(frozen=True)
class PortfolioResult:
    returns: pd.Series
    equity: pd.Series
    n_trades: int
    metrics: dict[str, float]


def portfolio_backtest(actions: pd.Series, prices: pd.Series, cost_bps: float = 10.0,
                       benchmark: pd.Series | None = None) -> PortfolioResult:
    """actions: 'BUY'/'SELL'/'HOLD' (or None) on decision days; prices: [T] daily closes."""
    act = actions.reindex(prices.index).to_numpy(dtype=object)
    p = prices.to_numpy(dtype=np.float64)
    c = cost_bps * 1e-4
    equity = np.empty(len(p))
    cash, shares, entry_val, trade_rets, dirs, under = 1.0, 0.0, 0.0, [], [], []
    entry_px = 0.0
    for i in range(len(p)):
        a = act[i]
        if a == "BUY" and shares == 0.0 and i < len(p) - 1:
            entry_val, entry_px = cash, p[i]
            shares, cash = cash * (1 - c) / p[i], 0.0
        elif a == "SELL" and shares > 0.0:
            cash, shares = shares * p[i] * (1 - c), 0.0
            trade_rets.append(cash / entry_val - 1.0)
            dirs.append(1.0)
            under.append(p[i] / entry_px - 1.0)
        equity[i] = cash + shares * p[i]
    if shares > 0.0:  # mark the open position to market as a closed trade for the trade stats
        trade_rets.append(equity[-1] / entry_val - 1.0)
        dirs.append(1.0)
        under.append(p[-1] / entry_px - 1.0)
    rets = np.diff(np.concatenate([[1.0], equity])) / np.concatenate([[1.0], equity[:-1]])
    b = (prices if benchmark is None else benchmark.reindex(prices.index)).to_numpy(dtype=np.float64)
    m = trading_metrics(rets, np.concatenate([[0.0], b[1:] / b[:-1] - 1.0]), np.array(trade_rets),
                        np.array(dirs), np.array(under))
    return PortfolioResult(pd.Series(rets, prices.index), pd.Series(equity, prices.index), len(trade_rets), m)


def tokens_per_decision(episodes: Sequence[dict[str, Any]]) -> float:
    return float(np.mean([e["tokens"] for e in episodes])) if episodes else float("nan")


def smoothed_return_column(frames: dict[str, pd.DataFrame], refs: Sequence[tuple[str, Any]],
                           horizons: Sequence[int] = (3, 5, 10)) -> list[float]:
    """The ``smoothed_return`` reward column for (ticker, t) refs from daily closes (NaN past the end)."""
    from rl.methods.alphaquanter.rewards import smoothed_return

    out = []
    for tk, t in refs:
        close = frames[tk]["close"]
        pos = int(close.index.searchsorted(pd.Timestamp(t)))
        if pos >= len(close) or close.index[pos] != pd.Timestamp(t):
            raise KeyError(f"{pd.Timestamp(t).date()} is not a trading day of {tk!r}")
        out.append(smoothed_return(close.to_numpy()[pos:pos + max(horizons) + 1], horizons))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m rl.methods.alphaquanter.env --out DIR``: regime shares of the outcome reward per
    theta, and the portfolio rules on the sample's test split for reference policies: buy-and-hold
    (BUY on day 0) and the regime oracle (the action the outcome reward pays +1 for; uses the future)."""
    import argparse
    import json
    from pathlib import Path

    from rl.methods.alphaquanter.rewards import RewardConfig, regime
    from stockr1.data import load_source, sample_windows

    ap = argparse.ArgumentParser(prog="alphaquanter.env")
    ap.add_argument("--out", default="results/methods/alphaquanter")
    a = ap.parse_args(argv)
    frames, w = load_source("sample"), sample_windows()
    cfg = RewardConfig()
    lines = ["| split | theta | down (SELL) | neutral (HOLD) | up (BUY) |", "|---|---|---|---|---|"]
    for split in ("train", "test"):
        idx = np.flatnonzero(w.split == split)
        sm = np.array(smoothed_return_column(frames, [(str(w.ticker[i]), w.date[i]) for i in idx], cfg.horizons))
        sm = sm[np.isfinite(sm)]
        for theta in (0.005, 0.01, 0.015):
            reg = np.array([regime(x, theta) for x in sm])
            lines.append(f"| {split} | {theta:.3f} | " + " | ".join(f"{100 * np.mean(reg == k):.1f}%" for k in (-1, 0, 1)) + " |")
    res = {}
    for tk in sorted(set(w.ticker[w.split == "test"].tolist())):
        idx = np.flatnonzero((w.split == "test") & (w.ticker == tk))
        dates = pd.DatetimeIndex(w.date[idx])
        prices = frames[tk]["close"].loc[dates.min():dates.max()]
        sm = smoothed_return_column(frames, [(tk, d) for d in dates], cfg.horizons)
        oracle = pd.Series([("BUY", "HOLD", "SELL")[1 - regime(x, cfg.theta)] if np.isfinite(x) else "HOLD" for x in sm], dates)
        for name, acts in (("buy-and-hold", pd.Series(["BUY"], dates[:1])), ("regime oracle (uses the future)", oracle)):
            m = portfolio_backtest(acts, prices).metrics
            res.setdefault(name, {})[tk] = {"ARR": m["annual_return"], "SR": m["sharpe"], "MDD": m["max_drawdown"],
                                            "trades": m["n_trades"]}
    rows = ["| policy | ticker | ARR (%) | SR | MDD (%) | trades |", "|---|---|---|---|---|---|"]
    rows += [f"| {n} | {tk} | {100 * v['ARR']:.2f} | {v['SR']:.2f} | {100 * v['MDD']:.2f} | {v['trades']:.0f} |"
             for n, r in res.items() for tk, v in r.items()]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(json.dumps(res, indent=1))
    text = ("# AlphaQuanter on the offline sample\n\nOutcome-reward regimes (mean of 3/5/10-day future returns "
            "vs theta):\n\n" + "\n".join(lines) + "\n\nPortfolio rules (long-only, all-in, 10 bps) on the test "
            "split, reference policies:\n\n" + "\n".join(rows) + "\n")
    (out / "evaluation.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
