"""`ScriptedPolicy`: a policy test double that writes predetermined text, for testing the rollout
engine and everything downstream of it (rewards, GRPO bookkeeping, benchmarks) without a model.

For each prompt it holds a script: a list of model segments, one per phase. Segment ``s`` is what
the "model" writes after the ``s``-th tool observation (segment 0 right after the prompt). The
phase is recovered at prefill time by matching the completion so far against the script: segment
0 must start it, each later segment is searched for after the previous one (the tool observation
sits in between), and the first segment not yet written is the current one. So it works with the
engine's re-prefill after each tool call, whatever the observation says. Past the end of a segment it writes ``filler`` forever (for truncation tests).

It implements the forward contract of `llm.policy.Policy` (``.logits``, ``.cache``); its "cache"
is just the per-row script position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass
class _Cache:
    rows: list[tuple[int, ...]]  # the current segment's token ids, per row
    step: int = 0


@dataclass
class ScriptedOutput:
    logits: Tensor
    cache: _Cache | None = None


class ScriptedPolicy(nn.Module):
    """scripts: {prompt text: [segment 0 text, segment 1 text, ...]}; filler: text of one token."""

    def __init__(self, tokenizer, scripts: Mapping[str, Sequence[str]], filler: str = " x",
                 confidence: float = 50.0):
        super().__init__()
        enc = lambda t: tuple(tokenizer(t, add_special_tokens=False).input_ids)  # noqa: E731
        self.vocab = len(tokenizer)
        self.scripts = {enc(p): [enc(s) for s in segs] for p, segs in scripts.items()}
        fill = enc(filler)
        if len(fill) != 1:
            raise ValueError(f"filler {filler!r} must be one token, got {len(fill)}")
        self.filler = fill[0]
        self.confidence = confidence
        self.prefill_ts: list[Tensor | None] = []  # ts_tokens seen at each prefill, for tests

    def _segment(self, ids: list[int]) -> tuple[int, ...]:
        for prompt, segs in self.scripts.items():
            if tuple(ids[: len(prompt)]) == prompt:
                return self._current(list(ids[len(prompt) :]), segs)
        raise KeyError("ScriptedPolicy: prompt not in scripts")

    @staticmethod
    def _current(done: list[int], segs: list[tuple[int, ...]]) -> tuple[int, ...]:
        if not done:
            return segs[0] if segs else ()
        pos = 0
        for s, seg in enumerate(segs):
            starts = [0] if s == 0 else range(pos, len(done) - len(seg) + 1)
            at = next((k for k in starts if tuple(done[k : k + len(seg)]) == seg), None)
            if at is None or not seg:
                return seg
            pos = at + len(seg)
        return ()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, ts_tokens: Tensor | None = None,
                position_ids: Tensor | None = None, cache: _Cache | None = None, use_cache: bool = False,
                logits_to_keep: int = 0) -> ScriptedOutput:
        """Only the last position's logits are meaningful (what the engine reads)."""
        if cache is None:
            self.prefill_ts.append(None if ts_tokens is None else ts_tokens.detach().clone())
            mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
            cache = _Cache([self._segment(row[m.bool()].tolist()) for row, m in zip(input_ids, mask, strict=True)])
        else:
            cache = _Cache(cache.rows, cache.step + 1)
        logits = torch.zeros(input_ids.shape[0], 1, self.vocab)
        for b, seg in enumerate(cache.rows):
            tok = seg[cache.step] if cache.step < len(seg) else self.filler
            logits[b, 0, tok] = self.confidence
        return ScriptedOutput(logits, cache if use_cache else None)
