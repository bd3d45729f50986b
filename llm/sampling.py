"""Token sampling of the HF rollout backend, on the logits' device.

`SeededGenerator` is the engine's seed (``engine.generator.manual_seed(s)``, as the GRPO trainer and
the reward probe call it): it hands out one ``torch.Generator`` per device, each seeded with the same
seed, so a CUDA rollout samples on the GPU (no probabilities copied to the host each decode step)
while a CPU rollout draws exactly the stream ``torch.Generator().manual_seed(seed)`` always drew
(CPU outputs are bit-identical to the earlier host-side sampler). A CUDA generator's stream differs
from the CPU one: a seed fixes the rollouts per device type, not across them.

`TokenSampler` is the distribution the policy samples from and GRPO scores: logits / T with the
banned (tool-only) ids at -inf; top-p only narrows the draw, the recorded log-prob is before top-p.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class SeededGenerator:
    """A seed with a lazily built ``torch.Generator`` per device, all reseeded by `manual_seed`."""

    def __init__(self, seed: int):
        self._seed = int(seed)
        self._by_device: dict[torch.device, torch.Generator] = {}

    def manual_seed(self, seed: int) -> SeededGenerator:
        """Reseed every device's generator (and those built later) with ``seed``."""
        self._seed = int(seed)
        for gen in self._by_device.values():
            gen.manual_seed(self._seed)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def for_device(self, device: torch.device | str) -> torch.Generator:
        """The generator on ``device`` (built on first use, seeded with the current seed)."""
        device = torch.device(device)
        if device.type != "cpu" and device.index is None:
            device = torch.device(device.type, torch.accelerator.current_device_index()
                                  if hasattr(torch, "accelerator") else 0)
        if device not in self._by_device:
            self._by_device[device] = torch.Generator(device=device).manual_seed(self._seed)
        return self._by_device[device]


class TokenSampler:
    """logits [n, V] -> (token [n], log-prob [n]) under the tempered distribution with ``banned`` at -inf.

    temperature 0 = greedy (log-prob at T = 1); ``generator`` None = the device's global RNG.
    """

    def __init__(self, temperature: float, top_p: float, banned_token_ids: Sequence[int],
                 generator: SeededGenerator | None = None):
        self.temperature, self.top_p = temperature, top_p
        self.banned_token_ids = list(banned_token_ids)
        self.generator = generator

    def __call__(self, logits: Tensor) -> tuple[Tensor, Tensor]:
        logits = logits.float().clone()
        logits[:, self.banned_token_ids] = float("-inf")
        if self.temperature == 0:
            tok = logits.argmax(-1)
            return tok, torch.log_softmax(logits, -1).gather(-1, tok[:, None]).squeeze(-1)
        logp = torch.log_softmax(logits / self.temperature, -1)
        probs = logp.exp()
        if self.top_p < 1:
            sp, si = probs.sort(-1, descending=True)
            drop = sp.cumsum(-1) - sp > self.top_p  # keep the smallest prefix with mass >= top_p
            probs = probs.scatter(-1, si, sp.masked_fill(drop, 0.0))
        gen = self.generator.for_device(probs.device) if self.generator is not None else None
        tok = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
