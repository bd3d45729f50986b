"""Trade-R1 reward gates (§3.3, §4.3) and the market reward r (App. A.3).

- FSR ``G = r + 2 s``; DSR ``G = r (0.5 + s)`` if r > 0 else ``r (2 - s)``; market-only ``G = r``;
  naive ``G = r s`` (the symmetric ablation of §4.3).
- ``r = sum_i w_i (rho_i - rho_bm) - 2 C_trans``: 10-day excess return of the selected portfolio
  over the benchmark, net of a round trip of costs.

Completion format: reasoning in ``<think>...</think>`` (else everything before the answer) and the
decision in ``<answer>...</answer>`` (else a ``DECISION: [[[...]]]`` line). Selected assets are the
universe tickers named in the decision; a decision naming none selects the sample's own ticker.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rl.methods.trade_r1.judge import Judge, OfflineJudge, TriangularScores
from rl.methods.trade_r1.retrieval import Embedder, retrieve


def fsr(r: float, s: float) -> float:
    return r + 2.0 * s


def dsr(r: float, s: float) -> float:
    return r * (0.5 + s) if r > 0 else r * (2.0 - s)


def market_only(r: float, s: float) -> float:
    return r


def naive(r: float, s: float) -> float:
    return r * s


def consistency(r: float, s: float) -> float:
    """s alone: not a training gate, the diagnostic that logs the judge's score next to the gated rewards."""
    return s


GATES: dict[str, Callable[[float, float], float]] = {"fsr": fsr, "dsr": dsr, "market_only": market_only, "naive": naive,
                                                     "consistency": consistency}


def market_reward(weights: Sequence[float], asset_returns: Sequence[float], bench_return: float,
                  cost: float = 0.001) -> float:
    """App. A.3: ``sum_i w_i (rho_i - rho_bm) - 2 C``; weights are normalised to sum to 1."""
    w = np.asarray(weights, float)
    if len(w) == 0:
        return -2.0 * cost
    w = w / w.sum()
    return float(np.sum(w * (np.asarray(asset_returns, float) - bench_return)) - 2.0 * cost)


_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_DECISION = re.compile(r"DECISION:\s*\[\[\[(.*?)\]\]\]", re.I)


def split_output(text: str) -> tuple[str, str]:
    """(reasoning, decision) of a completion."""
    ans = _ANSWER.findall(text) or _DECISION.findall(text)
    decision = ans[-1].strip() if ans else ""
    think = _THINK.findall(text)
    if think:
        reasoning = think[-1]
    else:
        m = _ANSWER.search(text) or _DECISION.search(text)
        reasoning = text[: m.start()] if m else text
    return reasoning.strip(), decision


def selected_assets(decision: str, universe: Sequence[str], default: str) -> list[str]:
    named = [u for u in universe if re.search(rf"(?<![\w$]){re.escape(u)}(?!\w)", decision, re.I)]
    return named or [default]


def verify(context: str, completion: str, universe: Sequence[str], ticker: str, judge: Judge,
           k: int = 5, embedder: Embedder | None = None,
           aliases: Mapping[str, Sequence[str]] | None = None) -> TriangularScores:
    """Two-stage verification of one completion -> triangular scores. ``aliases`` maps a ticker
    to the names the context uses for it (e.g. "SP500" -> ["S&P 500"]) for the hard match."""
    reasoning, decision = split_output(completion)
    if not decision:
        return TriangularScores(0.0, 0.0, 0.0, error="no decision")
    names = [n for a in selected_assets(decision, universe, ticker) for n in [a, *(aliases or {}).get(a, ())]]
    evidence = retrieve(context, names, reasoning + "\n" + decision, k, embedder)
    return judge.score(evidence, reasoning, decision)


def gated_reward(gate: str, judge: Judge | None = None, k: int = 5, embedder: Embedder | None = None):
    """TRL-style reward ``(prompts, completions, context, ticker, excess_return, universe=None, aliases=None)``.

    ``excess_return`` is r of App. A.3 for the decision the sample stands for (precomputed from the
    data, e.g. ``market_reward``); None/NaN -> None (skipped)."""
    if gate not in GATES:
        raise ValueError(f"unknown gate {gate!r}; choose from {sorted(GATES)}")
    g, judge = GATES[gate], judge or OfflineJudge()

    def reward(prompts, completions, context, ticker, excess_return, universe=None, aliases=None,
               **_) -> list[float | None]:
        out: list[float | None] = []
        for i, c in enumerate(completions):
            r = excess_return[i]
            if r is None or math.isnan(r):
                out.append(None)
                continue
            uni = universe[i] if universe is not None else [ticker[i]]
            sc = verify(context[i], c if isinstance(c, str) else c[-1]["content"], uni, ticker[i], judge, k, embedder,
                        aliases[i] if aliases is not None else None)
            out.append(g(float(r), sc.s))
        return out

    reward.__name__ = f"trade_r1_{gate}"
    return reward


def reasoning_metrics(scores: Sequence[TriangularScores]) -> dict[str, float]:
    """Mean similarity score s and hallucination rate (unsupported / total claims, pooled)."""
    if not scores:
        return {"similarity": float("nan"), "hallucination_rate": float("nan")}
    total = sum(s.n_claims for s in scores)
    return {"similarity": float(np.mean([s.s for s in scores])),
            "hallucination_rate": sum(s.n_unsupported for s in scores) / total if total else float("nan")}


def excess_return_column(frames: Mapping, refs: Sequence[tuple[str, object]], benchmark: str | None,
                         horizon: int = 10, cost: float = 0.001) -> list[float]:
    """App. A.3 r for single-asset decisions (weight 1 on the sample's ticker): the ``horizon``-day
    simple return minus the benchmark's, minus ``2 * cost``; NaN where the window runs past the data.
    The sign of a SELL decision is the caller's to apply (Trade-R1 selects long portfolios)."""
    import pandas as pd

    def fwd(tk: str, t) -> float:
        c = frames[tk]["close"]
        pos = int(c.index.searchsorted(pd.Timestamp(t)))
        if pos + horizon >= len(c) or c.index[pos] != pd.Timestamp(t):
            return float("nan")
        return float(c.iloc[pos + horizon] / c.iloc[pos] - 1.0)

    out = []
    for tk, t in refs:
        bm = 0.0 if benchmark is None or benchmark == tk else fwd(benchmark, t)
        out.append(market_reward([1.0], [fwd(tk, t)], bm, cost))
    return out
