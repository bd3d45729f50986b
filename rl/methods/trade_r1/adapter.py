"""Trade-R1 in side-by-side runs (``stockr1 bench compare``): the decision prompt over the
window's rendered context, a format teacher, how its text becomes a side, and its triangular
consistency score, which the benchmark reports for every method. ``env`` is a
`rl.methods.env.DecisionEnv`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl.methods.env import DecisionEnv

TASK = ("Decide a position in {ticker} for the next {h} trading days. Reason inside <think>...</think> "
        "using only facts from the context above, then answer <answer>BUY {ticker}</answer>, "
        "<answer>SELL {ticker}</answer> or <answer>HOLD {ticker}</answer>.")


def build_query(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> tuple[str, str, dict]:
    """(context + ``TASK``, evidence shown = the context, reward columns of the gates: context,
    ticker, excess_return r of App. A.3 net of ``cost`` per side, aliases)."""
    from rl.methods.trade_r1.gates import excess_return_column

    tk, t = env.ref(i)
    ctx = env.context(i)
    r = excess_return_column(env.frames, [(tk, t)], env.cfg.benchmark, env.bt.holding, float(m.get("cost", 0.001)))[0]
    cols = {"context": ctx, "ticker": tk, "excess_return": r, "aliases": env.aliases}
    return f"{ctx}\n\n" + TASK.format(ticker=tk, h=env.bt.holding), ctx, cols


def format_teacher(env: DecisionEnv, i: int, m: Mapping[str, Any]) -> str:
    """Format teacher (the paper ships none): two context lines quoted verbatim as the reasoning
    (grounded by construction) and the side of the day's realised excess return."""
    from rl.methods.trade_r1.judge import claims

    tk, _ = env.ref(i)
    _, _, cols = build_query(env, i, m)
    lines = [c for c in claims(cols["context"]) if "%" in c][:2] or claims(cols["context"])[:2]
    side = "BUY" if cols["excess_return"] > 0 else "SELL"
    return "<think>" + " ".join(ln.rstrip(".") + "." for ln in lines) + f"</think><answer>{side} {tk}</answer>"


def position(text: str) -> int | None:
    """``gates.split_output`` decision; empty -> None, else ``judge.decision_side`` (a decision that
    only names assets *selects* them: long, Trade-R1's portfolio reading)."""
    from rl.methods.trade_r1.gates import split_output
    from rl.methods.trade_r1.judge import decision_side

    _, decision = split_output(text)
    return int(decision_side(decision)) if decision else None


def consistency(evidence: str, text: str, ticker: str, aliases: Mapping[str, Sequence[str]] | None = None,
                judge=None, k: int = 5) -> float:
    """Trade-R1's triangular score s in [0, 1] (``gates.verify``; offline judge by default) of one
    output against the evidence the method was shown; 0 for an output with no decision."""
    from rl.methods.trade_r1.gates import verify
    from rl.methods.trade_r1.judge import OfflineJudge

    return float(verify(evidence, text, [ticker], ticker, judge or OfflineJudge(), k, None, aliases).s)
