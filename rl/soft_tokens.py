"""Soft tokens of GRPO queries, computed when a batch needs them.

Why: a paper-scale run has ~40k training queries; holding every query's ``h_ts`` [K, d_llm] in host
memory on every rank costs tens of GB at 4B width (docs/scale.md). A query keeps only its window row
(``sample_ref``) and a shared ``SoftTokenSource``; ``soft_tokens(samples)`` runs the decoder's encoder on
just those rows, on the decoder's device, without a graph. Precomputed ``ts_tokens`` (tests, small
benchmarks) are stacked as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from stockr1.distributed import full_precision


class SoftTokenSource:
    """``source(refs)`` -> h_ts [n, K, d] of the rows ``refs`` of ``windows``, from ``decoder``'s encoder
    (action-free, as SFT and the QA benchmark feed it). The decoder is read, never modified: under
    ``lambda_ts > 0`` the current (training) weights give the tokens, in eval mode."""

    def __init__(self, decoder: Any, windows: Any) -> None:
        self.decoder, self.windows = decoder, windows

    def __call__(self, refs: Sequence[int]) -> Tensor:
        w = self.windows.select(np.asarray(refs, dtype=int))
        dev = next(self.decoder.parameters()).device
        was_training = self.decoder.training
        self.decoder.eval()
        try:
            with torch.no_grad(), full_precision():  # the tokens SFT fed, whatever the policy's precision
                return self.decoder.encoder(torch.as_tensor(w.x, dtype=torch.float32, device=dev),
                                            channels=torch.as_tensor(w.channels, device=dev)).h_ts
        finally:
            self.decoder.train(was_training)


def soft_tokens(samples: Sequence[Any]) -> Tensor | None:
    """[Q, K, d] soft tokens of ``samples`` (GRPOSample), or None when the queries have none."""
    if not samples:
        return None
    if samples[0].ts_tokens is not None:
        return torch.stack([s.ts_tokens for s in samples])
    source = samples[0].ts_source
    if source is None:
        return None
    if any(s.ts_source is not source for s in samples):
        raise ValueError("a batch of GRPO queries mixes soft-token sources")
    return source([s.sample_ref for s in samples])
