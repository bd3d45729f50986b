"""Run the policy on QA items through the one rollout engine and grade the rollouts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from llm.qa.answers import is_correct, normalize_answer
from llm.qa.baselines import accuracy_by_family
from llm.qa.core import QAItem, decision_at
from llm.qa.prompt import SYSTEM_PROMPT, user_message
from llm.traces import price_evidence


def rollout_items(policy, decoder, windows, items: Sequence[QAItem], max_new_tokens: int = 512,
                  batch_size: int = 16, temperature: float = 0.0,
                  max_context_chars: int | None = None,
                  on_batch: Callable[[int], object] | None = None) -> list[tuple[QAItem, object]]:
    """Greedy (default) rollouts for ``items``; the prompt carries K ``<ts>`` placeholders filled
    with the decoder encoder's ``h_ts`` (ignored by a policy with soft tokens off). ``on_batch(n)``
    is called after each batch of ``n`` rollouts (a progress line)."""
    from llm.rollout import RolloutEngine
    from llm.special_tokens import ts_placeholders
    from llm.tokenizer import chat_prompt
    from llm.tools import ForecastTool

    tok = policy.tokenizer
    engine = RolloutEngine(policy, tok, [ForecastTool(decoder, windows)], max_new_tokens=max_new_tokens,
                           temperature=temperature, seed=0)
    ph = ts_placeholders(decoder.ts_cfg.n_tokens)
    ctx = windows.context
    out = []
    for s in range(0, len(items), batch_size):
        batch = list(items[s : s + batch_size])
        idx = np.array([it.window for it in batch])
        prompts = [chat_prompt(tok, user_message(it, str(ctx[it.window]) if len(ctx) else "", ph, max_context_chars),
                               SYSTEM_PROMPT) for it in batch]
        with torch.no_grad():
            h_ts = decoder.encoder(torch.as_tensor(windows.x[idx]), channels=torch.as_tensor(windows.channels[idx])).h_ts
        rolls = engine.generate(prompts, h_ts, sample_refs=[int(i) for i in idx])
        out += list(zip(batch, rolls, strict=True))
        if on_batch is not None:
            on_batch(len(batch))
    return out


def grade_rollouts(pairs: Sequence[tuple[QAItem, object]]) -> dict[str, float]:
    """Accuracy per family + overall (Table 1), action success (complete parseable action), answer
    parse rate, both-parseable rate, and model tokens per rollout."""
    from forecast_action.score import completeness

    answers = {it.id: normalize_answer(it, r.answer) for it, r in pairs}
    acc = accuracy_by_family([it for it, _ in pairs], lambda it: answers[it.id])
    act_ok = [r.action is not None and completeness(r.action) >= 1.0 for _, r in pairs]
    ans_ok = [answers[it.id] is not None for it, _ in pairs]
    return {
        **acc,
        "action_success_rate": 100.0 * float(np.mean(act_ok)),
        "answer_parse_rate": 100.0 * float(np.mean(ans_ok)),
        "action_and_answer_rate": 100.0 * float(np.mean([a and b for a, b in zip(act_ok, ans_ok, strict=True)])),
        "tokens_per_answer": float(np.mean([r.n_generated for _, r in pairs])),
        "n": float(len(pairs)),
        "correct_of_parsed": 100.0 * float(np.mean([is_correct(it, answers[it.id]) for it, _ in pairs
                                                    if answers[it.id] is not None] or [0.0])),
    }


def start_value_read_rate(pairs: Sequence[tuple[QAItem, object]], windows, tol: float = 0.01) -> float:
    """% of rollouts whose action's ``start_value`` is within ``tol`` (relative) of the prompt's last close
    (``windows.hist[i, -1, CLOSE]``, the close its context states, in the window's price frame): the
    model read its prompt. A rollout with no action, or no start_value, counts as a miss."""
    from stockr1.types import CLOSE

    ok = []
    for it, r in pairs:
        c = float(windows.hist[it.window, -1, CLOSE])
        sv = getattr(r.action, "start_value", None) if r.action is not None else None
        ok.append(sv is not None and abs(float(sv) - c) <= tol * abs(c))
    return 100.0 * float(np.mean(ok)) if ok else float("nan")


def evidence_read_rate(pairs: Sequence[tuple[QAItem, object]], windows) -> float:
    """% of rollouts whose completion states the window's price evidence exactly as the prompt's data
    give it (``llm.traces.price_evidence``: ticker, date, close, 5- and 20-session returns, 10-session
    volatility, to two decimals). Unlike ``start_value_read_rate`` it cannot be met by copying a constant
    on a rebased source, where every last close is 100."""
    ok = [price_evidence(decision_at(windows, it.window)) in r.completion for it, r in pairs]
    return 100.0 * float(np.mean(ok)) if ok else float("nan")


def item_hits(pairs: Sequence[tuple[QAItem, object]]) -> np.ndarray:
    """[N] 1.0 where the rollout's parsed answer is correct (an unparseable answer scores 0)."""
    return np.array([float(is_correct(it, normalize_answer(it, r.answer))) for it, r in pairs])


FAILURE_KINDS = ("ok", "no_action", "incomplete_action", "no_answer", "answer_outside_space")


def failure_kind(item: QAItem, r) -> str:
    """Why one rollout fails the protocol, its first cause (one of ``FAILURE_KINDS``): no parseable
    action, an action with missing fields, no ``<answer>`` block, or an answer outside the question's
    answer space; "ok" when it has both a complete action and a parseable answer."""
    from forecast_action.score import completeness

    if r.action is None:
        return "no_action"
    if completeness(r.action) < 1.0:
        return "incomplete_action"
    if r.answer is None:
        return "no_answer"
    if normalize_answer(item, r.answer) is None:
        return "answer_outside_space"
    return "ok"


def failure_kinds(pairs: Sequence[tuple[QAItem, object]]) -> dict[str, int]:
    """Count of ``failure_kind`` over the rollouts (every kind present, 0 when none)."""
    out = dict.fromkeys(FAILURE_KINDS, 0)
    for it, r in pairs:
        out[failure_kind(it, r)] += 1
    return out
