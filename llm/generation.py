"""The interface between `llm.rollout.RolloutEngine` and whatever writes the tokens.

The engine owns the protocol (rows, segments, gen masks, tool calls, finish reasons); a backend
owns one *phase*: continue each row from its tokens so far until it writes one of its stop tokens
or spends its budget. Two backends implement it:

- `llm.hf_backend.HFBackend`: the policy's own forward with a KV cache (CPU, tests, the reference).
- `llm.vllm_backend.VLLMBackend`: vLLM, soft tokens passed as prompt embeddings (GPU runs).

Both return the same `PhaseOutput`: the written ids (the stop token included, as the last id), the
log-prob of each under the sampling distribution (logits / T, banned ids excluded, before top-p),
and the stop token (None when the budget ran out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import Tensor


@dataclass(frozen=True)
class PhaseRequest:
    """One row's continuation.

    token_ids:  [T] everything so far (prompt, model text, tool observations), unpadded.
    ts_tokens:  [K, d_ts] the row's soft tokens (its prompt holds K ``<ts>``), or None.
    max_new_tokens: model tokens this phase may write (>= 1).
    stop_token_ids: ids that end the phase (written, then stop): open tool close tags, ``</answer>``, EOS.
    """

    token_ids: tuple[int, ...]
    ts_tokens: Tensor | None
    max_new_tokens: int
    stop_token_ids: frozenset[int]


@dataclass(frozen=True)
class PhaseOutput:
    """token_ids [n] written (stop token last when stopped), logprobs [n], stop_token_id or None (budget)."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    stop_token_id: int | None


@runtime_checkable
class GenerationBackend(Protocol):
    """What the rollout engine needs from a token writer.

    generator: the `llm.sampling.SeededGenerator` (None = unseeded); ``generator.manual_seed(s)``
               makes the next rollouts a function of ``s``.
    """

    generator: object | None

    def generate_phase(self, requests: Sequence[PhaseRequest]) -> list[PhaseOutput]:
        """One phase for every request, outputs in request order."""
        ...

    def wake(self) -> None:
        """Before a `RolloutEngine.generate` (a colocated engine takes its GPU memory back)."""
        ...

    def sleep(self) -> None:
        """After a `RolloutEngine.generate` (a colocated engine frees its GPU memory for training)."""
        ...

    def sync_weights(self) -> None:
        """After an optimiser update: generate with the policy's current weights from now on."""
        ...
