"""What a policy answers per question template: does its answer depend on the prompt at all?

A policy can follow the protocol and read its prompt (``evidence_read_rate``) and still answer every
question of a template the same way: then its accuracy there is that answer's share of the gold labels,
and below majority whenever the constant is not the majority class. ``bench qa`` writes this table under
its accuracy, so a policy row below majority comes with the reason read off its own rollouts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from llm.qa.answers import is_correct
from llm.qa.core import QAItem, observed_path
from llm.qa.tool_reader import read_answer
from llm.special_tokens import FORECAST_TS_CLOSE, FORECAST_TS_OPEN
from stockr1.types import Windows


def answer_spread(pairs: Sequence[tuple[QAItem, Any]], reference: Callable[[QAItem], Any] | None = None
                  ) -> list[dict[str, Any]]:
    """One row per categorical template (yes / no and choice; numeric ones are left out): gold and policy
    answer counts, whether the policy gave one answer to every question (``constant``), and
    ``reference``'s answer per question (the majority baseline's: the train split's mode per template
    and question parameter) counted the same way."""
    by: dict[str, list[tuple[QAItem, Any]]] = {}
    for item, rollout in pairs:
        if item.answer_type != "numeric":
            by.setdefault(item.template, []).append((item, rollout))
    rows = []
    for template, group in sorted(by.items()):
        policy = Counter(str(r.answer) for _, r in group)
        rows.append({
            "template": template, "family": group[0][0].family, "n": len(group),
            "gold": dict(Counter(it.answer for it, _ in group).most_common()),
            "policy": dict(policy.most_common()), "constant": len(policy) == 1,
            "reference": None if reference is None else dict(Counter(str(reference(it)) for it, _ in group).most_common()),
        })
    return rows


def _counts(c: dict[str, int] | None) -> str:
    return "–" if c is None else ", ".join(f"{k} {v}" for k, v in c.items())


def spread_md(name: str, rows: list[dict[str, Any]]) -> list[str]:
    """README lines: how many categorical templates got one answer throughout, then the per-template table."""
    if not rows:
        return []
    const = [r for r in rows if r["constant"]]
    off = [r for r in const if r["reference"] is not None and next(iter(r["policy"])) not in r["reference"]]
    n_q = sum(r["n"] for r in const)
    lines = ["", f"## Answers per template: `{name}` on the yes / no and choice questions", "",
             f"In {len(const)} of {len(rows)} such templates ({n_q} of {sum(r['n'] for r in rows)} questions) "
             f"`{name}` gave one answer to every question: there its answer does not depend on the prompt, and "
             f"its accuracy is that answer's share of the gold labels. In {len(off)} of them that answer is never "
             "the majority baseline's (the train split's most common answer for the template and the question's "
             "parameter, so it may vary within a template).", "",
             "| template | family | n | gold answers | policy answers | majority baseline's answers |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['template']}{' (one answer)' if r['constant'] else ''} | {r['family']} | {r['n']} | "
              f"{_counts(r['gold'])} | {_counts(r['policy'])} | {_counts(r['reference'])} |" for r in rows]
    return lines


def observation_block(completion: str) -> str | None:
    """The first ``<forecast_ts>…</forecast_ts>`` block of a completion (what the tool returned), or None."""
    i = completion.find(FORECAST_TS_OPEN)
    j = completion.find(FORECAST_TS_CLOSE, i + 1) if i >= 0 else -1
    return completion[i : j + len(FORECAST_TS_CLOSE)] if j >= 0 else None


def own_trajectory_answers(pairs: Sequence[tuple[QAItem, Any]], windows: Windows) -> list[str | None]:
    """Per rollout, the answer its own observed trajectory implies: the template's answer function on the
    ``<forecast_ts>`` path the policy read (``observed_path``, rounded as rendered), as a tool-reader of that
    one path. None where the rollout has no readable observation (no tool call, a tool error)."""
    out: list[str | None] = []
    for item, rollout in pairs:
        block = observation_block(rollout.completion or "")
        try:
            out.append(None if block is None else read_answer(item, windows, [observed_path(block)]))
        except ValueError:  # an error observation, or a layout the parser does not know
            out.append(None)
    return out


def follows_rate(pairs: Sequence[tuple[QAItem, Any]], implied: Sequence[str | None]) -> float:
    """% of rollouts with a readable observation whose answer is the one their trajectory implies (numeric:
    within the question's tolerance of it)."""
    ok = [is_correct(replace(item, answer=a), rollout.answer) for (item, rollout), a in zip(pairs, implied, strict=True)
          if a is not None]
    return 100.0 * sum(ok) / len(ok) if ok else float("nan")
