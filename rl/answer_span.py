"""Which tokens of a rollout state its answer.

A yes/no rollout decides its answer at one word: the last " Yes" / " No" it writes before its first
``<answer>`` tag (its conclusion, "So the answer (Yes or No) is No.", which the tag then copies). The
answer span is that word plus the ``<answer>`` ... ``</answer>`` it writes (its words only, without the
two tags, under ``CreditConfig.answer_tags: false``). ``rl.probe`` cuts fixed
contexts there (``decision_contexts``) and reads their log-odds (``context_logodds``), ``rl.credit`` splits a
step's gradient there, the trainer's ``answer_span`` credit (``rl.grpo.segment_credit``) gives these tokens
the answer reward's advantage, and ``answer_prior: "hold"`` (``rl.prior_hold``) reads the step's shared
answer direction there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from llm.logprobs import next_token_logprobs, token_logprobs
from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN


def decision_point(ids: Sequence[int], gen_mask: Sequence[int], tag: int, spaced: Sequence[int]) -> int | None:
    """Where a rollout decides its yes/no answer: the last model-written ``spaced`` token (" Yes" / " No")
    before its first model-written ``<answer>`` tag, the word its conclusion states, which the tag then
    copies (the token right after the tag when it stated none); None when it wrote no tag."""
    cut = first_written(ids, gen_mask, tag)
    if cut is None:
        return None
    return next((t for t in range(cut - 1, -1, -1) if gen_mask[t] and ids[t] in spaced), cut + 1)


def first_written(ids: Sequence[int], gen_mask: Sequence[int], token: int, start: int = 0) -> int | None:
    """Index of the first model-written ``token`` at or after ``start`` (a prompt or a tool observation
    may hold the same token: those are not the model's), None when there is none."""
    return next((t for t in range(start, len(ids)) if gen_mask[t] and ids[t] == token), None)


def decision_tokens(rollouts: Sequence[Any], gen: Tensor, tokenizer, yes: str = "Yes", no: str = "No",
                    tags: bool = True) -> Tensor:
    """[N, T] bool, for the right-padded rows ``gen`` [N, T] of ``rollouts`` (``StepBatch.batch["gen"]``):
    the model-written tokens that state the answer, the decision word before the first written ``<answer>``
    (``decision_point``) and the written ``<answer>`` ... ``</answer>`` span (to the end of the rollout when
    it never closes the tag). ``tags``: whether the two tag tokens belong to it (True, as built); False
    keeps the words only, so an advantage given to this mask moves what the answer says and not the tags
    that frame it (``CreditConfig.answer_tags``). All False for a rollout that wrote no ``<answer>``."""
    mask = torch.zeros(gen.shape, dtype=torch.bool)
    tag, close = tokenizer.convert_tokens_to_ids(ANSWER_OPEN), tokenizer.convert_tokens_to_ids(ANSWER_CLOSE)
    spaced = [tokenizer.encode(" " + w, add_special_tokens=False) for w in (yes, no)]
    spaced_ids = [w[0] for w in spaced if len(w) == 1]
    for row, r in enumerate(rollouts):
        ids, g = list(r.token_ids), list(r.gen_mask)
        j = decision_point(ids, g, tag, spaced_ids)
        if j is None:
            continue
        start = first_written(ids, g, tag)
        end = first_written(ids, g, close, start)
        end = len(ids) - 1 if end is None else end
        for t in [j, *range(start, end + 1)]:
            if not tags and t in (start, end) and ids[t] in (tag, close):
                continue
            if t < len(ids) and g[t]:
                mask[row, t] = True
    return mask.to(gen.device)


def decision_contexts(rollouts: Sequence[Any], tokenizer, yes: str = "Yes", no: str = "No") -> list[dict[str, Any]]:
    """Each rollout that wrote ``<answer>``, cut at its decision point (``decision_point``), as ``{row, ids,
    words}``: its index in ``rollouts``, the token ids before the decision (prompt, reasoning, tool
    observation, then "... is") and the two answer words as they would be written there (" Yes" / " No" in a
    conclusion; "Yes" / "No" right after ``<answer>`` when the rollout stated none)."""
    tag = tokenizer.convert_tokens_to_ids(ANSWER_OPEN)
    spaced = [tokenizer.encode(" " + w, add_special_tokens=False) for w in (yes, no)]
    spaced_ids = [w[0] for w in spaced if len(w) == 1]  # a word of several tokens has no single decision token
    out = []
    for row, r in enumerate(rollouts):
        j = decision_point(r.token_ids, r.gen_mask, tag, spaced_ids)
        if j is None:
            continue
        after_tag = r.token_ids[j - 1] == tag
        out.append({"row": row, "ids": list(r.token_ids[:j]), "words": [yes, no] if after_tag else [" " + yes, " " + no]})
    return out


def context_logodds(policy, tokenizer, context: Mapping[str, Any], ts: Tensor | None) -> Tensor:
    """log p(Yes) − log p(No) of one decision context (``decision_contexts``, with its ``query``) under
    ``policy`` (a 0-dim tensor, with a graph when grad is on: ``rl.credit`` and ``rl.prior_hold``
    differentiate it). ``ts``: the queries' soft tokens [Q, K, d]."""
    ts_q = None if ts is None else ts[context["query"]][None]
    words = [tokenizer.encode(word, add_special_tokens=False) for word in context["words"]]
    if all(len(w) == 1 for w in words):  # both one token: one forward, the next token's distribution
        lp = next_token_logprobs(policy, torch.tensor([list(context["ids"])], dtype=torch.long), ts_q)[0]
        return lp[words[0][0]] - lp[words[1][0]]
    lp = []
    for w in words:  # one forward per answer word, logits only over the word's positions
        x = torch.tensor([list(context["ids"]) + w], dtype=torch.long)
        t = token_logprobs(policy, x, torch.ones_like(x), ts_q, logits_to_keep=len(w))
        lp.append(t[0, -len(w):].sum())
    return lp[0] - lp[1]
