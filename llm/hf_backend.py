"""`HFBackend`: a phase on the policy's own forward with its KV cache (the reference backend).

A phase left-pads the rows, prefills them once (the policy replaces ``<ts>`` placeholders with the
soft tokens here) and samples token by token with the cache until every row has stopped. Rows that
stopped keep stepping on a masked pad so the batch stays rectangular, until a quarter of the batch
has stopped: then the finished rows are dropped from the batch, its attention mask and its KV cache
(``Cache.batch_select_indices``; a policy whose cache lacks it keeps stepping them). Why: rollouts of
one batch differ in length (results/tokens), and a row that has stopped still costs its share of every
later step's matmuls and KV cache. What it saves is measured by ``stockr1 bench rollout_batch``
(results/rollout_batch). Dropping rows changes the batch a sampled row shares its random draws with, so
a seed gives other (equally distributed) samples than without it; greedy rows are the same up to
floating-point reduction order.

``merge_lora=True`` decodes a LoRA policy (`llm.policy.Policy`) through a twin with the adapter merged into
its weights (``Policy.merged_copy``), written from the policy before every phase (``refresh_merged``), so it
never lags a training step: the same function up to floating-point rounding, without peft's adapter matmuls
in every layer at every step (what it saves: ``stockr1 bench rollout_batch --compare merge_lora``). It costs
one more copy of the model's weights. A policy without an adapter decodes as it is. ``twin_dtype`` (e.g.
bfloat16) holds the twin, its weights and its KV cache in another dtype: faster where the weights and the
cache are what a decode step reads, but the rows are then sampled from the rounded policy while the loss
scores them with the policy itself (the sampler's log-probs against the policy's are measured by
``stockr1 bench rollout_batch --compare twin_bf16``).

``prefill_chunk=C`` prefills prompts longer than C tokens in C-token pieces through the cache, so
the attention of a long prompt never materialises at once; the input embeddings (soft tokens
included) are built once for the whole prompt and fed piece by piece, so the logits equal the
unchunked prefill's within floating-point tolerance (``tests/test_rollout_sampling.py``). It needs a
policy with ``embed`` and an ``inputs_embeds`` forward (`llm.policy.Policy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from llm.generation import PhaseOutput, PhaseRequest
from llm.logprobs import pad_sequences
from llm.sampling import SeededGenerator, TokenSampler


class HFBackend:
    """policy: ``forward(input_ids, attention_mask, ts_tokens, cache=, use_cache=, logits_to_keep=)
    -> .logits [B, T, V], .cache`` (`llm.policy.Policy` or a scripted fake). ``max_batch_rows`` caps
    rows per forward; ``compact`` drops finished rows from a batch; ``merge_lora`` decodes through a merged
    twin of a LoRA policy (module docstring)."""

    def __init__(self, policy, pad_id: int, sampler: TokenSampler, max_batch_rows: int | None = None,
                 prefill_chunk: int | None = None, compact: bool = True, merge_lora: bool = False,
                 twin_dtype: torch.dtype | None = None):
        if prefill_chunk is not None and prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1 (None = unchunked), got {prefill_chunk}")
        self.policy, self.pad_id, self.sampler = policy, pad_id, sampler
        self.max_batch_rows, self.prefill_chunk = max_batch_rows, prefill_chunk
        self.compact = compact  # drop finished rows from the batch (False: the loop before, for comparison)
        self.compactions = 0  # times finished rows were dropped from a batch (tests, profiling)
        if twin_dtype is not None and not merge_lora:
            raise ValueError("twin_dtype is the dtype of the merged twin: it needs merge_lora=True")
        self.merge_lora, self.twin_dtype, self._twin = merge_lora, twin_dtype, None

    @property
    def generator(self) -> SeededGenerator | None:
        return self.sampler.generator

    def wake(self) -> None:
        """Nothing to do: the policy is the generator."""

    def sleep(self) -> None:
        """Nothing to do: the policy is the generator."""

    def sync_weights(self) -> None:
        """Nothing to do: generation uses the trained module itself."""

    def decoding_module(self):
        """The module this phase decodes with: the policy, or (``merge_lora`` on a LoRA policy) its merged
        twin, refreshed from the policy's current weights."""
        if not self.merge_lora or not getattr(self.policy, "is_lora", False):
            return self.policy
        if self._twin is None:
            self._twin = self.policy.merged_copy(self.twin_dtype)
        else:
            self.policy.refresh_merged(self._twin)
        return self._twin

    def generate_phase(self, requests: Sequence[PhaseRequest]) -> list[PhaseOutput]:
        step = self.max_batch_rows or len(requests) or 1
        model = self.decoding_module()
        out: list[PhaseOutput] = []
        for k in range(0, len(requests), step):
            out += self._batch(requests[k : k + step], model)
        return out

    # ------------------------------------------------------------------ one batch of rows
    def _batch(self, reqs: Sequence[PhaseRequest], model) -> list[PhaseOutput]:
        device = _device_of(model)
        ids, att, _ = pad_sequences([r.token_ids for r in reqs], self.pad_id, side="left")
        ids, att = ids.to(device), att.to(device)
        ts = torch.stack([r.ts_tokens for r in reqs]).to(device) if reqs[0].ts_tokens is not None else None
        out = self.prefill(ids, att, ts, model)
        n = len(reqs)
        new: list[list[int]] = [[] for _ in reqs]
        lps: list[list[float]] = [[] for _ in reqs]
        stop: list[int | None] = [None] * n
        done = [r.max_new_tokens <= 0 for r in reqs]
        rows = list(range(n))  # batch position -> request
        while not all(done):
            tok, lp = self.sampler(out.logits[:, -1])
            tok, lp = tok.tolist(), lp.tolist()  # one device sync per step
            for b, j in enumerate(rows):
                if done[j]:
                    continue
                new[j].append(tok[b])
                lps[j].append(lp[b])
                if tok[b] in reqs[j].stop_token_ids:
                    stop[j], done[j] = tok[b], True
                elif len(new[j]) >= reqs[j].max_new_tokens:
                    done[j] = True
            if all(done):
                break
            live = [not done[j] for j in rows]
            if self.compact and 4 * sum(live) <= 3 * len(rows) and hasattr(out.cache, "batch_select_indices"):
                keep = torch.tensor([b for b, ok in enumerate(live) if ok], device=device)
                out.cache.batch_select_indices(keep)
                att, rows, live = att[keep], [rows[b] for b in keep.tolist()], [True] * len(keep)
                self.compactions += 1
            feed = torch.tensor([new[j][-1] if ok else self.pad_id for j, ok in zip(rows, live, strict=True)])
            att = torch.cat([att, torch.tensor(live, dtype=att.dtype, device=device)[:, None]], dim=1)
            out = model(feed.to(device)[:, None], att, None, cache=out.cache, use_cache=True, logits_to_keep=1)
        return [PhaseOutput(tuple(new[j]), tuple(lps[j]), stop[j]) for j in range(n)]

    def prefill(self, ids: Tensor, att: Tensor, ts: Tensor | None, model=None) -> Any:
        """ids, att [B, T] (left-padded), ts [B, K, d_ts] -> the output of ``model`` (default: the policy) at
        the last position (``.logits [B, 1, V]``, ``.cache`` over all T positions), in ``prefill_chunk``
        pieces if set."""
        model = self.policy if model is None else model
        c = self.prefill_chunk
        if not c or ids.shape[1] <= c:
            return model(ids, att, ts, use_cache=True, logits_to_keep=1)
        if not hasattr(model, "embed"):
            raise TypeError(f"prefill_chunk needs a policy with embed() and inputs_embeds (llm.policy.Policy), "
                            f"got {type(model).__name__}")
        emb = model.embed(ids, ts)  # [B, T, H]: soft tokens placed once, over the whole prompt
        out = None
        for s in range(0, ids.shape[1], c):
            e = min(s + c, ids.shape[1])
            out = model(ids[:, s:e], att[:, :e], None, cache=None if out is None else out.cache,
                        use_cache=True, logits_to_keep=1, inputs_embeds=emb[:, s:e])
        return out


def _device_of(module) -> torch.device:
    p = next(module.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
