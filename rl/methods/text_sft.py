"""Prompt-masked text SFT of a sibling method's policy on its teacher texts: one loop for the Trading-R1
curriculum's warm starts and for ``stockr1 bench compare``'s per-method SFT stage.

Next-token loss on the target tokens only (the prompt is masked), tokenized with
``llm.rollout.encode_segments`` so SFT and rollouts share token boundaries; AdamW. ``TextSFTConfig``
gives either a step budget (``steps``, with warmup and a cosine decay to ``min_lr_ratio`` — the joint
SFT's schedule, ``llm.sft.lr_lambda``) or ``epochs`` over the examples at a constant rate. Batches are
drawn from successive seeded permutations of the examples, so an epoch sees every example once.
With ``ckpt`` the loop saves its state (weights, AdamW's state, the schedule, step, losses) every
``ckpt_every`` steps through ``stockr1.resume.write_checkpoint``, and a rerun resumes from the last complete
one. Step k's batch is ``batch_order(...)[k]`` (a function of the seed) and its dropout draws come from
torch seeded with ``step_seed(seed, k)``, so the resumed run ends with the weights of the uninterrupted one,
bit for bit on CPU (``tests/test_text_sft.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from stockr1.resume import last_checkpoint, seed_step, write_checkpoint


@dataclass(frozen=True)
class TextSFTConfig:
    """steps: optimizer steps (None: ``epochs`` passes over the examples); batch_size examples per step;
    lr: peak rate; warmup_steps linear, then cosine to ``lr * min_lr_ratio`` (1.0 = constant);
    max_len: tokens kept per example (the target end); ckpt_every: steps between resumable states."""

    steps: int | None = None
    epochs: int = 1
    batch_size: int = 4
    lr: float = 5e-4
    warmup_steps: int = 0
    min_lr_ratio: float = 1.0
    max_len: int = 4096
    ckpt_every: int = 250

    def __post_init__(self) -> None:
        if min(self.epochs, self.batch_size, self.max_len, self.ckpt_every) < 1 or not self.lr > 0:
            raise ValueError(f"text sft: epochs, batch_size, max_len, ckpt_every must be >= 1 and lr > 0, got {self}")
        if self.steps is not None and self.steps < 1 or self.warmup_steps < 0 or not 0 < self.min_lr_ratio <= 1:
            raise ValueError(f"text sft: steps must be >= 1 (or null), warmup_steps >= 0, 0 < min_lr_ratio <= 1, got {self}")

    def total_steps(self, n_examples: int) -> int:
        return self.steps if self.steps is not None else self.epochs * math.ceil(n_examples / self.batch_size)

    def lr_factor(self, step: int, total: int) -> float:
        """Multiplier of ``lr`` at 0-based ``step`` of ``total``."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        frac = min(1.0, (step - self.warmup_steps) / max(1, total - self.warmup_steps))
        return self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))


def batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[np.ndarray]:
    """Example indices of each step: consecutive slices of successive seeded permutations (the last
    slice of a permutation may be short, so ``epochs`` reproduces a plain pass over the data)."""
    rng, out = np.random.default_rng(seed), []
    while len(out) < steps:
        order = rng.permutation(n)
        out += [order[k:k + batch_size] for k in range(0, n, batch_size)]
    return out[:steps]


def text_sft(policy, prompts: Sequence[str], targets: Sequence[str], cfg: TextSFTConfig | None = None, seed: int = 0,
             ckpt: str | Path | None = None, progress=None) -> list[float]:
    """Train ``policy`` on (prompt, target) pairs by ``cfg``; returns the loss of every step (those of
    a resumed run's earlier steps included). ``progress``: called with (step, total, loss)."""
    from llm.logprobs import pad_sequences, token_logprobs
    from llm.rollout import encode_segments
    from llm.special_tokens import EOS_TOKEN
    from llm.tokenizer import chat_prompt

    cfg = cfg or TextSFTConfig()
    if len(prompts) != len(targets) or not prompts:
        raise ValueError(f"text sft needs as many targets as prompts, at least one: got {len(prompts)}, {len(targets)}")
    tok = policy.tokenizer
    rows = [encode_segments(tok, [(chat_prompt(tok, p), False), (t + EOS_TOKEN, True)]) for p, t in zip(prompts, targets, strict=True)]
    rows = [(ids[-cfg.max_len:], mask[-cfg.max_len:]) for ids, mask in rows]  # keep the target end if too long
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    total = cfg.total_steps(len(rows))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cfg.lr_factor(s, total))
    order = batch_order(len(rows), cfg.batch_size, total, seed)
    start, losses = 0, []
    ckpt = Path(ckpt) if ckpt is not None else None
    if ckpt is not None and last_checkpoint(ckpt) is not None:
        try:
            state = torch.load(ckpt, map_location="cpu", weights_only=False)
        except Exception as e:  # noqa: BLE001 - an unreadable state is named, not half-loaded
            raise ValueError(f"cannot resume from {ckpt} (delete it to start over): {type(e).__name__}: {e}") from e
        policy.load_state_dict(state["policy"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start, losses = int(state["step"]), list(state["losses"])
    dev = next(policy.parameters()).device
    policy.train()
    for step in range(start, total):
        batch = [rows[i] for i in order[step]]
        ids, att, gen = pad_sequences([b[0] for b in batch], tok.pad_token_id, [b[1] for b in batch], side="right")
        seed_step(seed, step)  # dropout of step k: a function of (seed, k), so a resumed run draws the same
        lp = token_logprobs(policy, ids.to(dev), att.to(dev))
        g = gen.to(dev).float()
        loss = -(lp * g).sum() / g.sum().clamp(min=1.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, total, losses[-1])
        if ckpt is not None and ((step + 1) % cfg.ckpt_every == 0 or step + 1 == total):
            state = {"policy": policy.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                     "step": step + 1, "losses": losses}
            write_checkpoint(ckpt, lambda p, st=state: torch.save(st, p))
    return losses
