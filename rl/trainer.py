"""The u-GRPO engine (Stock-R1 §3.5): one compact loop on Lightning Fabric.

One step::

    Q queries (this rank's share)  ->  RolloutEngine: G tool-using rollouts each      (rollout)
    -> R = R_ans + a R_act + b R_prec + g R_cons per rollout                            (score)
    -> group-relative advantages, per-query weight w(U_q)                               (advantages)
    -> clipped, weighted token loss on model-written tokens (+ beta KL, + lambda_ts L_TS) (loss)
    -> clip gradients, AdamW step; every ``ckpt_every`` steps ``out_dir/last.ckpt``     (step)

What is simplified relative to TRL / verl (on purpose, for a readable engine):
- Generation is synchronous (no async rollouts, no reward/model servers): the engine samples through its
  backend (`llm.generation`: the HF loop with the policy's own KV cache, or vLLM, which gets the merged
  weights after every update; docs/scale.md, "Rollout backends").
- One optimisation pass per generation batch by default (``num_iterations=1``), so the ratio is 1
  at the sampled point and ``old_logp`` is the detached current log-prob, as in TRL's default.
  ``num_iterations > 1`` reuses the batch, with ``old_logp`` taken before the first pass.
- Groups never cross ranks: each rank rolls out all G samples of its own queries, so advantages
  need no all-gather; DDP averages the gradients. ``queries_per_step`` is the *global* batch: each of
  the W ranks gets ``queries_per_step / W`` of them (it must divide), so a run's batch, and therefore its
  recipe, does not depend on the number of GPUs. The u-GRPO weights are normalised over the global
  batch (an all-reduce of their sum), so the ranks agree on what mean 1 is.
- Learning rate: linear warmup over ``warmup_steps`` from ``lr / warmup_steps``, then constant (a fresh
  AdamW's first steps are ~±lr sign moves on every weight; the warmup keeps them small).
- The reference policy for the KL (only when ``beta > 0``) is the starting (SFT) policy: with LoRA the
  policy merges the SFT adapter into its base and trains a fresh adapter, so the adapter-disabled
  model is the reference and no second copy is held (``Policy.restart_adapter``); a full fine-tune
  keeps a frozen copy. The soft-token projector is part of the reference: a frozen copy of its
  starting state (it is small).
- Dropout: the loss pass runs in the mode the rollouts were sampled in (eval, no dropout) unless
  ``dropout_in_loss``; otherwise the ratio and the KL are not 1 / 0 at the sampled point (LoRA
  dropout 0.05 made the KL non-zero at step 0).

Decoder during RL (``lambda_ts``): default 0, the decoder is frozen, as in the official code. Reasons:
R_cons compares the action with g(decoded path); if the decoder moved with the policy, the policy
could earn consistency by dragging the decoder instead of fixing its action, and R_prec would score a
moving target, so the rewards of different steps would not be comparable. With ``lambda_ts > 0`` the
decoder keeps training with the loss SFT trained it with (``forecast_action.decoder_loss.DecoderLoss``
of ``decoder_recipe``, g = the decoder's thresholds): L_TS on the realised action a* of each window the
step's queries visit, under field dropout, plus the control loss on counterfactual actions. Not L_TS
on the emitted actions: a policy's action that disagrees with the realised future would teach the
decoder to ignore its action, undoing the control the tool's rewards rely on (issue 21;
results/action showed a decoder trained only on its conditioning's realised outcome ignoring "up").

Determinism and resume: step k seeds torch (and the engine's generator) with ``step_seed(seed, k, rank)``
(``stockr1.resume``) and draws its queries from a permutation of epoch ``k // steps_per_epoch``, and
``last.ckpt`` (written by ``stockr1.resume.write_checkpoint``) holds the policy, the decoder when it
trains, AdamW's state, the LR schedule, the step and the history; so a run resumed from the checkpoint
of step k does exactly what the uninterrupted run did from step k+1, bit for bit on CPU
(``tests/test_rl_trainer.py``).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from llm.logprobs import keep_for_mask, pad_sequences, token_logprobs, token_logprobs_and_entropy
from rl.answer_span import decision_tokens
from rl.grad_scale import PARAM_GROUPS, grad_scales
from rl.grpo import (
    CreditConfig,
    GRPOLossConfig,
    UncertaintyWeightConfig,
    cancel_answer_prior,
    group_advantages,
    grpo_loss,
    normalised_weights,
    project_answer_prior,
    segment_credit,
    uncertainty_weight,
)
from rl.logging import RunLogger, step_line, step_metrics
from rl.prior_hold import remove_along, shared_direction, step_contexts
from rl.rewards import (
    REWARD_NAMES,
    RewardBreakdown,
    RewardWeights,
    canonical_answer,
    combine_rewards,
    compute_rewards,
)
from rl.soft_tokens import soft_tokens
from stockr1.config import config_from_dict
from stockr1.distributed import check_distributed, launch_fabric, shard
from stockr1.progress import progress
from stockr1.resume import last_checkpoint, seed_step, write_checkpoint

log = logging.getLogger("rl")
MIN_WEIGHTED_QUERIES = 8  # below this many queries per step the u-GRPO weight has little U spread to act on


@dataclass(frozen=True)
class GRPOSample:
    """One query.

    prompt:      chat-formatted prompt text (with K ``<ts>`` placeholders when soft tokens are on)
    sample_ref:  what the tools get (an int row of the tool's ``Windows``)
    columns:     reward columns of this query (``rl.rewards`` docstring): answer, answer_type,
                 tolerance, choices, target_action, true_close, true_volume, start_close
    ts_tokens:   [K, d_ts] encoder tokens for the soft-token slots, precomputed; or None
    uncertainty: U_q, the encoder's normalised uncertainty in [0, 1]; NaN = unknown
    ts_source:   computes the soft tokens from ``sample_ref`` when a batch needs them (``rl.soft_tokens``;
                 used when ``ts_tokens`` is None). Read them with ``rl.soft_tokens.soft_tokens(samples)``.
    """

    prompt: str
    sample_ref: Any
    columns: Mapping[str, Any] = field(default_factory=dict)
    ts_tokens: Tensor | None = None
    uncertainty: float = math.nan
    ts_source: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class GRPOTrainConfig:
    group_size: int = 8  # G (App. C.2)
    queries_per_step: int = 2  # global: split over the ranks (must divide by devices x num_nodes)
    max_steps: int = 100
    lr: float = 1e-6
    warmup_steps: int = 0  # linear warmup of the learning rate, then constant
    dropout_in_loss: bool = False  # False: loss pass in eval mode, as the rollouts were sampled
    decoder_lr: float = 1e-5
    weight_decay: float = 0.0
    # AdamW's moments. A fresh AdamW's first update is -lr g / (|g| + eps) per weight: about -lr sign(g) while
    # |g| >> eps, so a direction that nearly cancels in g still moves each weight by ~lr (results/grpo_credit);
    # an eps at the gradient's scale makes the first steps closer to linear in g (TRL: adam_epsilon)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    # The protocol rows and the projector (``ROW_PARAMS``) on their own lr / eps (None: lr / adam_eps). Why: on
    # the small policy the rows' gradient is ~40x the adapter's per entry (RMS 1.22e-3 against 3.07e-5: every
    # rollout writes the protocol tokens, and tied embeddings add the output side), 62% of the squared gradient
    # norm in 11 x 576 of its 5.2 M trainable entries. An eps above the adapter's |g| makes the rows' step linear
    # too, up to ~150x lr: at configs/grpo_check/smollm2-135m-linear.yaml's eps the first step broke the answer
    # format (docs/rl.md); Adam's per-weight normalisation is what bounds their step.
    rows_lr: float | None = None
    rows_adam_eps: float | None = None
    # LoRA policies: rank / alpha of the fresh adapter GRPO trains on the merged SFT policy (None: the SFT
    # adapter's; the authors' GRPO: r 8, alpha 16 on an r 32 SFT; configs/grpo/qwen3-4b.yaml)
    lora_r: int | None = None
    lora_alpha: int | None = None
    max_grad_norm: float = 1.0
    num_iterations: int = 1
    micro_batch: int = 8  # rollouts per forward/backward in the loss
    lambda_ts: float = 0.0  # weight of the decoder's loss during RL; 0 = frozen decoder
    decoder_recipe: DecoderRecipe = DecoderRecipe()  # that loss (the SFT's `decoder.recipe`); only with lambda_ts > 0
    loss: GRPOLossConfig = GRPOLossConfig()
    credit: CreditConfig = CreditConfig()  # which advantage each token carries (rl/grpo.py, "Credit")
    uncertainty: UncertaintyWeightConfig = UncertaintyWeightConfig()
    rewards: RewardWeights = RewardWeights()
    reward_components: tuple[str, ...] = REWARD_NAMES
    seed: int = 0
    ckpt_every: int = 10
    log_every: int = 1
    n_table_rows: int = 4
    accelerator: str = "auto"
    devices: int | str = 1  # per node; stockr1/distributed.py, docs/scale.md
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"

    def __post_init__(self) -> None:
        check_distributed(self.devices, self.num_nodes, self.strategy)
        if self.group_size < 2:
            raise ValueError(f"train.group_size must be >= 2 (advantages are relative to the group), got {self.group_size}")
        for name in ("queries_per_step", "max_steps", "num_iterations", "micro_batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if (self.lora_r is not None and self.lora_r < 1) or (self.lora_alpha is not None and self.lora_alpha <= 0):
            raise ValueError(f"train.lora_r must be >= 1 and train.lora_alpha > 0 (or null: the SFT adapter's), got "
                             f"{self.lora_r}, {self.lora_alpha}")
        betas = tuple(self.adam_betas)
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas) or not self.adam_eps > 0:
            raise ValueError(f"train.adam_betas must be two numbers in [0, 1) and train.adam_eps > 0, got "
                             f"{list(self.adam_betas)}, {self.adam_eps}")
        for name in ("rows_lr", "rows_adam_eps"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ValueError(f"train.{name} must be > 0 (or null: the adapter's), got {getattr(self, name)}")
        if not self.lr > 0 or self.warmup_steps < 0:
            raise ValueError(f"train.lr must be > 0 and train.warmup_steps >= 0, got {self.lr}, {self.warmup_steps}")

    def lr_factor(self, step: int) -> float:
        """Multiplier of ``lr`` at optimiser step ``step`` (0-based): linear warmup, then 1."""
        return min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps > 0 else 1.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GRPOTrainConfig:
        # nested sections (loss, uncertainty, rewards) are built from their mappings by their annotations
        return config_from_dict(cls, d, "GRPOTrainConfig")


# trainable weights of the "rows" group: the protocol rows (peft's trainable-token deltas) and the projector.
# A full fine-tune has its rows inside the embedding matrix, so there only the projector is in it.
ROW_PARAMS = tuple(k for group, keys in PARAM_GROUPS if group in ("rows", "projector") for k in keys)


def optimiser_groups(policy: torch.nn.Module, cfg: GRPOTrainConfig) -> list[dict[str, Any]]:
    """AdamW's parameter groups over the policy's trainable weights: one at ``lr`` / ``adam_eps``, or, when
    ``rows_lr`` or ``rows_adam_eps`` is set, the ``ROW_PARAMS`` weights apart at theirs (each group's lr is
    then scaled by the same warmup)."""
    named = [(n, p) for n, p in policy.named_parameters() if p.requires_grad]
    if cfg.rows_lr is None and cfg.rows_adam_eps is None:
        return [{"params": [p for _, p in named], "lr": cfg.lr}]
    rows = [p for n, p in named if any(k in n for k in ROW_PARAMS)]
    rest = [p for n, p in named if not any(k in n for k in ROW_PARAMS)]
    row_group = {"params": rows, "lr": cfg.rows_lr if cfg.rows_lr is not None else cfg.lr,
                 "eps": cfg.rows_adam_eps if cfg.rows_adam_eps is not None else cfg.adam_eps}
    return [g for g in ({"params": rest, "lr": cfg.lr}, row_group) if g["params"]]


def query_indices(n: int, step: int, per_step: int, seed: int, rank: int = 0, world: int = 1) -> list[int]:
    """This rank's queries for ``step`` (0-based): the step's global batch of ``per_step`` queries is a
    slice of a per-epoch permutation (the same on every rank), and each rank keeps its
    ``stockr1.distributed.shard``. The global batch does not depend on ``world``."""
    if per_step > n:
        raise ValueError(f"{per_step} queries per step needs >= {per_step} training queries, got {n}")
    if per_step % world:
        raise ValueError(f"train.queries_per_step = {per_step} (the global batch) does not split over {world} ranks; "
                         f"make it a multiple of devices x num_nodes")
    per_epoch = n // per_step
    perm = np.random.default_rng([seed, step // per_epoch]).permutation(n)
    start = (step % per_epoch) * per_step
    return shard(perm[start : start + per_step].tolist(), rank, world)


def rollout_columns(rollouts: Sequence[Any], samples: Sequence[GRPOSample], thresholds: Any) -> dict[str, list]:
    """Reward columns per rollout: the query's columns plus the decoded path and g(decoded path)."""
    from forecast_action.derive import actions_from_forecast

    keys = sorted({k for s in samples for k in s.columns})
    cols: dict[str, list] = {k: [] for k in [*keys, "pred_close", "pred_volume", "decoded_action"]}
    for r in rollouts:
        s = samples[r.prompt_index]
        for k in keys:
            cols[k].append(s.columns.get(k))
        fc = r.forecast
        ok = fc is not None and bool(np.all(np.isfinite(fc.close)) and np.all(fc.close > 0))
        cols["pred_close"].append(fc.close[0] if ok else None)
        cols["pred_volume"].append(fc.volume[0] if ok else None)
        start = s.columns.get("start_close")
        decoded = actions_from_forecast(fc, np.array([start]), thresholds)[0] if ok and start and thresholds else None
        cols["decoded_action"].append(decoded)
    return cols


Scorer = Callable[[Sequence[Any], Sequence[GRPOSample]], RewardBreakdown]


@dataclass(frozen=True)
class StockR1Scorer:
    """The Stock-R1 reward: R = R_ans + alpha R_act + beta R_prec + gamma R_cons over rollouts."""

    thresholds: Any
    weights: RewardWeights = RewardWeights()
    enabled: tuple[str, ...] = REWARD_NAMES

    def __call__(self, rollouts: Sequence[Any], samples: Sequence[GRPOSample]) -> RewardBreakdown:
        cols = rollout_columns(rollouts, samples, self.thresholds)
        return compute_rewards([r.prompt for r in rollouts], [r.completion for r in rollouts], self.weights,
                               self.enabled, **cols)


@dataclass(frozen=True)
class FuncScorer:
    """Any TRL-style reward functions (sibling methods): columns are the query's ``columns``."""

    funcs: Mapping[str, Callable[..., list]]
    weights: Mapping[str, float] = field(default_factory=dict)

    def __call__(self, rollouts: Sequence[Any], samples: Sequence[GRPOSample]) -> RewardBreakdown:
        keys = sorted({k for s in samples for k in s.columns})
        cols = {k: [samples[r.prompt_index].columns.get(k) for r in rollouts] for k in keys}
        return combine_rewards([r.prompt for r in rollouts], [r.completion for r in rollouts], self.funcs,
                               self.weights, **cols)


def query_weights(samples: Sequence[GRPOSample], rollouts: Sequence[Any], cfg: UncertaintyWeightConfig,
                  group_size: int) -> tuple[Tensor, Tensor]:
    """(U [Q], w(U) [Q]). U_q is the sample's encoder uncertainty; if unknown, the mean over its
    rollouts of the decoder's normalised uncertainty; if that is unknown too, w = 1."""
    u = []
    for q, s in enumerate(samples):
        val = s.uncertainty
        if not math.isfinite(val):
            rs = [r.uncertainty for r in rollouts[q * group_size : (q + 1) * group_size]]
            rs = [x for x in rs if x is not None and math.isfinite(x)]
            val = float(np.mean(rs)) if rs else math.nan
        u.append(val)
    u_t = torch.tensor(u, dtype=torch.float64)
    return u_t, uncertainty_weight(u_t, cfg)


def answer_span_credit(rollouts: Sequence[Any], samples: Sequence[Any], rewards: RewardBreakdown, adv: Tensor,
                       gen: Tensor, tokenizer, credit: CreditConfig, group_size: int) -> tuple[Tensor, Tensor]:
    """[N, T] token advantages and weights of ``answer_span`` credit (``rl.grpo.segment_credit``) for the
    rollouts' padded generated-token mask ``gen`` [N, T]: the answer span (``rl.answer_span``) carries the
    group advantage of ``credit.answer_component`` (centred per answer over the step under
    ``answer_prior: "cancel"``, or with its component along the spans' slopes removed under ``"project"``), the other tokens that of the rest of the total; ``adv`` [N], the total's
    advantage, stays on rollouts without a span. ``samples``: the step's queries (their answer type)."""
    name = credit.answer_component
    if name not in rewards.components:
        raise ValueError(f"train.credit.mode 'answer_span' gives the answer span the advantage of {name!r}, but the "
                         f"scorer returns no such component (it has {sorted(rewards.components)}): enable {name!r} "
                         f"or use credit.mode 'sequence'")
    span = decision_tokens(rollouts, gen, tokenizer, tags=credit.answer_tags)
    a_ans = group_advantages(torch.tensor(rewards.components[name], dtype=torch.float64), group_size)
    a_rest = group_advantages(torch.tensor(rewards.total_without(name), dtype=torch.float64), group_size)
    if credit.answer_prior in ("cancel", "project"):  # "hold" acts on the update, not here
        spread = (a_ans.view(-1, group_size) != 0).any(1).repeat_interleave(group_size)
        keys, teach = answer_keys(rollouts, samples, group_size), spread & span.any(1).cpu()
        if credit.answer_prior == "cancel":
            a_ans = cancel_answer_prior(a_ans, keys, teach)
        else:
            a_ans = project_answer_prior(a_ans, keys, teach, span_slopes(rollouts, span))
    return segment_credit(a_ans.float(), a_rest.float(), adv, span, gen, credit.answer_share)


def span_slopes(rollouts: Sequence[Any], span: Tensor) -> Tensor:
    """[N] float64: 1 − the sampler's probability of each rollout's answer span as written (the product of
    its tokens' probabilities; ``span`` [N, T] indexes the right-padded rows, as ``rollout.logprobs``);
    0 for a rollout without a span."""
    out = torch.zeros(len(rollouts), dtype=torch.float64)
    for i, r in enumerate(rollouts):
        cols = span[i].nonzero().flatten().tolist()
        if cols:
            out[i] = 1.0 - math.exp(sum(r.logprobs[t] for t in cols))
    return out


def answer_keys(rollouts: Sequence[Any], samples: Sequence[Any], group_size: int) -> list[str | None]:
    """Each rollout's canonical answer (``rl.rewards.canonical_answer``) under its query's answer type;
    rollout i answers query i // group_size."""
    out = []
    for i, r in enumerate(rollouts):
        cols = samples[i // group_size].columns
        out.append(canonical_answer(r.answer, cols.get("answer_type") or "choice", cols.get("choices") or ()))
    return out


def make_fabric(cfg: GRPOTrainConfig):
    """A launched Fabric for ``cfg`` ("ddp" on several devices re-runs the script once per device)."""
    return launch_fabric(cfg)


def rollout_batch(rollouts: Sequence[Any], samples: Sequence[GRPOSample], pad_id: int,
                  device: torch.device | str = "cpu", prompt_ts: Tensor | None = None) -> dict[str, Tensor | None]:
    """Right-padded ``ids``/``att``/``gen`` [N, T] and ``ts`` [N, K, d_ts] (None without soft tokens).
    ``prompt_ts`` [Q, K, d_ts]: the soft tokens the rollouts were generated with (default: computed from
    ``samples``), so the loss sees exactly the rollouts' inputs.

    ``gen`` is the rollouts' gen_mask: prompt, tool observations and padding are 0, so they get no
    gradient in `grpo_loss`.
    """
    ids, att, gen = pad_sequences([r.token_ids for r in rollouts], pad_id, [r.gen_mask for r in rollouts],
                                  side="right")
    ts = None
    prompt_ts = soft_tokens(samples) if prompt_ts is None else prompt_ts
    if prompt_ts is not None:
        ts = prompt_ts[torch.tensor([r.prompt_index for r in rollouts], device=prompt_ts.device)].to(device)
    return {"ids": ids.to(device), "att": att.to(device), "gen": gen.to(device), "ts": ts}


@dataclass(frozen=True)
class StepBatch:
    """What one step samples (``GRPOTrainer.sample``): Q queries x G rollouts = N rows.

    rewards: ``RewardBreakdown`` of the N rollouts; adv [N] group-relative advantages; u [Q] and w_raw [Q]
    the queries' U and raw u-GRPO weights, w_q [Q] the weights normalised over the global batch, w [N] w_q
    per rollout; batch: ``rollout_batch``'s ids / att / gen [N, T] and ts; chunks: the micro-batches;
    t_sample, t_roll: how long ``sample`` took and, of that, the rollouts (wall s); token_adv, token_w [N, T]: the
    per-token advantages and surrogate weights of ``answer_span`` credit (None under sequence credit, where
    every token carries ``adv``)."""

    samples: list[GRPOSample]
    rollouts: list[Any]
    rewards: RewardBreakdown
    adv: Tensor
    u: Any
    w_raw: Tensor
    w_q: Tensor
    w: Tensor
    batch: dict[str, Any]
    chunks: list[slice]
    t_sample: float
    t_roll: float
    token_adv: Tensor | None = None
    token_w: Tensor | None = None


class GRPOTrainer:
    """policy: `llm.policy.Policy`; engine: `llm.rollout.RolloutEngine` over the same policy object;
    samples: the training queries; scorer: rollouts -> rewards (`StockR1Scorer` for Stock-R1, or
    `FuncScorer` over any TRL-style reward functions); decoder + windows: only for ``lambda_ts > 0``."""

    def __init__(self, policy, engine, samples: Sequence[GRPOSample], scorer: Scorer, cfg: GRPOTrainConfig,
                 out_dir: str | Path, fabric=None, decoder=None, windows=None, logger: RunLogger | None = None,
                 on_step: Callable[[int, dict], None] | None = None):
        if not samples:
            raise ValueError("GRPOTrainer needs at least one training sample")
        if cfg.lambda_ts > 0 and (decoder is None or windows is None):
            raise ValueError("lambda_ts > 0 trains the decoder on L_TS: pass decoder= and windows=")
        self.cfg, self.samples, self.scorer, self.engine = cfg, list(samples), scorer, engine
        self.out_dir, self.on_step = Path(out_dir), on_step
        if cfg.uncertainty.enabled and cfg.queries_per_step < MIN_WEIGHTED_QUERIES:
            log.warning("u-GRPO weights queries against each other within a step: with %d queries per step U hardly "
                        "varies inside one; use >= %d (rl/grpo.py)", cfg.queries_per_step, MIN_WEIGHTED_QUERIES)
        if fabric is None:  # spawn strategies ("ddp_spawn") need a launched Fabric passed in instead
            fabric = make_fabric(cfg)
        self.fabric = fabric
        self.ref = self.ref_projector = None
        fresh_adapter = cfg.lora_r is not None or cfg.lora_alpha is not None
        if getattr(policy, "is_lora", False) and (cfg.loss.beta != 0 or fresh_adapter) \
                and not getattr(policy, "_merged_base", False):
            policy.restart_adapter(cfg.lora_r, cfg.lora_alpha)  # RL's own adapter on the merged SFT policy
        if cfg.loss.beta != 0:
            if getattr(policy, "is_lora", False):  # the adapter-disabled model is the reference: no copy
                self.ref_projector = copy.deepcopy(policy.projector).eval().requires_grad_(False)
            else:
                self.ref = copy.deepcopy(policy).eval().requires_grad_(False)
        groups = optimiser_groups(policy, cfg)
        self.decoder, self.windows = (decoder, windows) if cfg.lambda_ts > 0 else (None, None)
        if self.decoder is not None:
            th = getattr(decoder, "thresholds", None)
            if th is None:
                raise ValueError("lambda_ts > 0 trains the decoder with its control loss, which bins with the g "
                                 "it carries: set decoder.thresholds (the run's train-fitted ActionThresholds)")
            self.decoder_loss = DecoderLoss(cfg.decoder_recipe, th)
            groups.append({"params": [p for p in decoder.parameters() if p.requires_grad], "lr": cfg.decoder_lr})
            self.decoder = self.fabric.setup_module(decoder)
        opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay, betas=cfg.adam_betas, eps=cfg.adam_eps)
        self.policy, self.opt = self.fabric.setup(policy, opt)
        self.sched = torch.optim.lr_scheduler.LambdaLR(opt, cfg.lr_factor)
        if self.ref is not None:
            self.ref = self.ref.to(self.fabric.device)
        if self.ref_projector is not None:
            self.ref_projector = self.ref_projector.to(self.fabric.device)
        self.step, self.history = 0, []
        self.logger = logger

    # ------------------------------------------------------------------ state
    @property
    def ckpt_path(self) -> Path:
        return self.out_dir / "last.ckpt"

    def _state(self) -> dict[str, Any]:
        st = {"policy": self.policy, "optimizer": self.opt, "scheduler": self.sched.state_dict(), "step": self.step,
              "history": self.history}
        if self.decoder is not None:
            st["decoder"] = self.decoder
        return st

    def save(self) -> None:
        """``last.ckpt`` through ``stockr1.resume.write_checkpoint``: a kill mid-save keeps the previous one."""
        fab = self.fabric
        write_checkpoint(self.ckpt_path, lambda p: fab.save(p, self._state()), is_writer=fab.is_global_zero,
                         barrier=fab.barrier)

    def resume(self) -> bool:
        """Load the last complete ``last.ckpt`` (``stockr1.resume.last_checkpoint``); True when a run was resumed."""
        path = last_checkpoint(self.ckpt_path)
        if path is None:
            return False
        st = self._state()
        try:
            rest = self.fabric.load(path, st)
        except Exception as e:  # noqa: BLE001 - an unreadable checkpoint is named, not half-loaded
            raise ValueError(f"cannot resume from {path} (rerun with --overwrite to start over): "
                             f"{type(e).__name__}: {e}") from e
        sched = rest.get("scheduler", st.get("scheduler"))
        if isinstance(sched, dict):
            self.sched.load_state_dict(sched)
        self.step, self.history = int(st["step"]), list(st["history"])
        return True

    # ------------------------------------------------------------------ one step
    def _seed(self, step: int) -> None:
        s = seed_step(self.cfg.seed, step, self.fabric.global_rank)
        if getattr(self.engine, "generator", None) is not None:
            self.engine.generator.manual_seed(s)

    def _logp(self, model, b: dict[str, Any], sl: slice, entropy: bool = False):
        # logits only over the span holding generated tokens (old, ref and current share each slice)
        kw = {"temperature": max(self.engine.temperature, 1e-6), "banned_token_ids": self.engine.banned_token_ids,
              "logits_to_keep": keep_for_mask(b["gen"][sl])}
        ts = None if b["ts"] is None else b["ts"][sl]
        if entropy:
            return token_logprobs_and_entropy(model, b["ids"][sl], b["att"][sl], ts, **kw)
        return token_logprobs(model, b["ids"][sl], b["att"][sl], ts, **kw)

    @torch.no_grad()
    def _ref_logp(self, b: dict[str, Any], chunks: Sequence[slice]) -> Tensor:
        """[N, T] log-probs of the reference (SFT) policy: a frozen copy, or the adapter-disabled LoRA
        policy with the starting projector."""
        if self.ref is not None:
            return torch.cat([self._logp(self.ref, b, sl) for sl in chunks])
        self.policy.eval()
        with self.policy.as_reference(self.ref_projector):
            return torch.cat([self._logp(self.policy, b, sl) for sl in chunks])

    def _decoder_loss(self, rollouts: Sequence[Any]) -> Tensor:
        """The decoder's training loss (``DecoderLoss`` of ``cfg.decoder_recipe``) on the distinct windows
        of this step's rollouts, the realised a* = g(future) as teacher (see the module docstring)."""
        from forecast_action.derive import actions_from_windows
        from forecast_action.encoder import featurize

        w = self.windows.select(np.unique(np.array([r.sample_ref for r in rollouts], dtype=int)))
        dev = self.fabric.device
        teacher = featurize(actions_from_windows(w, self.decoder_loss.thresholds), w.last_close).to(dev)
        x = torch.as_tensor(w.x, dtype=torch.float32, device=dev)
        return self.decoder_loss(self.decoder, x, torch.as_tensor(w.y, dtype=torch.float32, device=dev), teacher,
                                 channels=torch.as_tensor(w.channels, device=dev)).total

    def sample(self) -> StepBatch:
        """This step's queries, their G rollouts each, rewards, advantages, weights and the padded batch."""
        cfg, fab = self.cfg, self.fabric
        self._seed(self.step)
        idx = query_indices(len(self.samples), self.step, cfg.queries_per_step, cfg.seed, fab.global_rank,
                            fab.world_size)
        t0 = time.perf_counter()
        samples = [self.samples[i] for i in idx]
        ts = soft_tokens(samples)
        with fab.autocast():  # the loss passes run under it through the Fabric wrapper; sample as they score
            rollouts = self.engine.generate([s.prompt for s in samples], ts, [s.sample_ref for s in samples],
                                            num_return_sequences=cfg.group_size)
        t_roll = time.perf_counter() - t0
        rewards = self.scorer(rollouts, samples)
        total = torch.tensor(rewards.total, dtype=torch.float64)
        adv = group_advantages(total, cfg.group_size).float()
        u, w_raw = query_weights(samples, rollouts, cfg.uncertainty, cfg.group_size)
        w_q = self._step_weights(w_raw)
        w = w_q.float().repeat_interleave(cfg.group_size)
        b = rollout_batch(rollouts, samples, self.engine.pad_id, fab.device, ts)
        n = len(rollouts)
        chunks = [slice(i, min(i + cfg.micro_batch, n)) for i in range(0, n, cfg.micro_batch)]
        token_adv = token_w = None
        if cfg.credit.mode == "answer_span":
            token_adv, token_w = answer_span_credit(rollouts, samples, rewards, adv, b["gen"],
                                                    self.engine.tokenizer, cfg.credit, cfg.group_size)
        return StepBatch(samples, rollouts, rewards, adv, u, w_raw, w_q, w, b, chunks, time.perf_counter() - t0, t_roll,
                         token_adv, token_w)

    def old_and_ref(self, sb: StepBatch) -> tuple[Tensor | None, Tensor | None]:
        """[N, T] log pi_old (only for ``num_iterations > 1``) and log pi_ref (only with a KL reference), in
        the mode the rollouts were sampled in."""
        old = ref = None
        self.policy.eval()
        if self.cfg.num_iterations > 1:
            with torch.no_grad():
                old = torch.cat([self._logp(self.policy, sb.batch, sl) for sl in sb.chunks])
        if self.ref is not None or self.ref_projector is not None:
            ref = self._ref_logp(sb.batch, sb.chunks)
        return old, ref

    def accumulate(self, sb: StepBatch, old: Tensor | None, ref: Tensor | None,
                   grad_tokens: Tensor | None = None) -> dict[str, float]:
        """One pass of the loss over the batch's chunks, gradients accumulated into ``.grad`` (not zeroed
        here). ``grad_tokens`` [N, T] bool: only these tokens pass gradient (the others enter the loss with
        their values detached, so every normaliser and the loss value are unchanged): the gradient of the
        whole batch's loss splits exactly into the parts of disjoint token sets (``rl.credit``). Returns the
        pass's sums: loss, kl / clip / entropy token sums and the token count."""
        cfg, fab, b, w = self.cfg, self.fabric, sb.batch, sb.w
        w_kl = w if cfg.uncertainty.weight_kl else None
        n, n_tok_batch = len(sb.rollouts), b["gen"].sum()  # batch totals: each chunk's loss is its share
        self.policy.train(cfg.dropout_in_loss)  # default eval: the mode the rollouts were sampled in
        acc = {"loss": 0.0, "kl": 0.0, "clip_low": 0.0, "clip_high": 0.0, "entropy": 0.0, "tok": 0.0}
        for k, sl in enumerate(sb.chunks):
            with fab.no_backward_sync(self.policy, enabled=fab.world_size > 1 and k < len(sb.chunks) - 1):
                logp, ent = self._logp(self.policy, b, sl, entropy=True)
                if grad_tokens is not None:
                    logp = torch.where(grad_tokens[sl].to(logp.device), logp, logp.detach())
                adv = sb.adv if sb.token_adv is None else sb.token_adv
                tw = None if sb.token_w is None else sb.token_w[sl].to(logp.device)
                out = grpo_loss(logp, adv[sl].to(logp.device), b["gen"][sl],
                                None if old is None else old[sl], None if ref is None else ref[sl],
                                w[sl].to(logp.device), cfg.loss, batch_sequences=n, batch_tokens=n_tok_batch,
                                kl_weights=None if w_kl is None else w_kl[sl].to(logp.device), token_weights=tw)
                fab.backward(out.loss)
            m, ntok = b["gen"][sl].float(), float(out.n_tokens)
            acc["loss"] += float(out.loss.detach())
            acc["entropy"] += float((ent.detach() * m).sum())
            for key in ("kl", "clip_low", "clip_high"):
                acc[key] += float(getattr(out, key)) * ntok
            acc["tok"] += ntok
        return acc

    def train_step(self, sb: StepBatch | None = None) -> dict[str, Any]:
        """One GRPO step: sample (unless ``sb``, this step's batch from ``sample()``, is given), the pi_old / KL
        reference pass, ``num_iterations`` loss passes each followed by a clipped optimiser step. Logs each
        phase's wall seconds (``time/*``); ``time/step_s`` is their sum with the sampling, so work done between
        a given batch's ``sample()`` and this call is not counted."""
        cfg, fab = self.cfg, self.fabric
        sb = self.sample() if sb is None else sb
        t_ref = time.perf_counter()
        old, ref = self.old_and_ref(sb)
        t_hold = time.perf_counter()
        hold = self._prior_direction(sb) if cfg.credit.answer_prior == "hold" else None
        t_loss = time.perf_counter()
        stats: dict[str, float] = {}
        loss_s = update_s = 0.0
        for _ in range(cfg.num_iterations):
            self.opt.zero_grad(set_to_none=True)
            t_pass = time.perf_counter()
            acc = self.accumulate(sb, old, ref)
            if self.decoder is not None:
                l_ts = self._decoder_loss(sb.rollouts)
                fab.backward(cfg.lambda_ts * l_ts)
                stats["decoder/loss"] = float(l_ts.detach())
            t_update = time.perf_counter()
            if not any(k in str(cfg.strategy).lower() for k in ("fsdp", "deepspeed")):  # sharded: a rank's shard
                stats.update(grad_scales(self.policy.named_parameters()))  # before clipping (rl/grad_scale.py)
            if cfg.max_grad_norm:
                norm = fab.clip_gradients(self.policy, self.opt, max_norm=cfg.max_grad_norm, error_if_nonfinite=False)
                stats["policy/grad_norm"] = float(norm) if norm is not None else math.nan
            self.opt.step()
            loss_s, update_s = loss_s + t_update - t_pass, update_s + time.perf_counter() - t_update
        if hold is not None:  # the step's update loses its move of the mean answer log-odds (rl/prior_hold.py)
            t_remove = time.perf_counter()
            stats["answer_prior/held_move"] = remove_along(hold[0], hold[1], hold[2])
            update_s += time.perf_counter() - t_remove
        stats["lr"] = self.sched.get_last_lr()[0]
        self.sched.step()
        self._push_weights()
        tok = max(acc["tok"], 1.0)
        stats.update({"loss": acc["loss"], "policy/entropy": acc["entropy"] / tok, "policy/kl": acc["kl"] / tok,
                      "policy/clip_low": acc["clip_low"] / tok, "policy/clip_high": acc["clip_high"] / tok,
                      "policy/clip_region": (acc["clip_low"] + acc["clip_high"]) / tok,
                      "time/rollout_s": sb.t_roll, "time/scoring_s": sb.t_sample - sb.t_roll,
                      "time/reference_s": t_hold - t_ref, "time/hold_s": t_loss - t_hold, "time/loss_s": loss_s,
                      "time/update_s": update_s,
                      "time/step_s": sb.t_sample + time.perf_counter() - t_ref,
                      "uncertainty/weight_spread": float(sb.w_q.max() / sb.w_q.min()),
                      "uncertainty/weight_norm_mean": float(sb.w_q.mean())})
        self.step += 1
        return step_metrics(self.step, sb.rollouts, sb.samples, sb.rewards, sb.adv, cfg.group_size, sb.u, sb.w_raw,
                            stats, cfg.rewards)

    def _prior_direction(self, sb: StepBatch) -> tuple[dict[str, torch.nn.Parameter], dict[str, Tensor],
                                                       dict[str, Tensor]]:
        """``answer_prior: "hold"``: the trainable parameters, their values before the step and the shared
        answer direction read on the step's rollouts (``rl.prior_hold``), in the rollouts' mode."""
        self.policy.eval()
        params = {n: p for n, p in self.policy.named_parameters() if p.requires_grad}
        contexts = step_contexts(sb.rollouts, self.engine.tokenizer, self.cfg.credit.hold_per_query)
        ts = soft_tokens(sb.samples)
        ts = None if ts is None else ts.to(self.fabric.device)
        d = shared_direction(self.policy, self.engine.tokenizer, self.fabric, params, contexts, ts)
        return params, {n: p.detach().clone() for n, p in params.items()}, d

    def _step_weights(self, w_raw: Tensor) -> Tensor:
        """[Q] the surrogate weights of this rank's queries: w(U) normalised to mean 1 over the step's
        global batch (every rank's queries; ``rl.grpo`` docstring), or w(U) as is without ``normalize``."""
        if not self.cfg.uncertainty.normalize:
            return w_raw
        if self.fabric.world_size == 1:
            return normalised_weights(w_raw)
        tot = self.fabric.all_reduce(torch.tensor([float(w_raw.sum()), float(w_raw.numel())],
                                                  device=self.fabric.device), reduce_op="sum")
        return normalised_weights(w_raw, float(tot[0]), int(tot[1]))

    def _push_weights(self) -> None:
        """After the optimiser updates: a serving-engine rollout backend (vLLM) loads the new merged
        weights; the HF backend generates with the trained module itself (a no-op there)."""
        push = getattr(self.engine, "sync_weights", None)
        if push is not None:
            push()

    # ------------------------------------------------------------------ loop
    def fit(self, resume: bool = False) -> list[dict[str, float]]:
        """Train to ``cfg.max_steps``; with ``resume`` continue from ``last.ckpt`` when present."""
        if resume:
            self.resume()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        t_run, first = time.time(), self.step  # this process's rate, for the progress line
        while self.step < self.cfg.max_steps:
            metrics = self.train_step()
            self.history.append(metrics["scalars"])
            if self.step % self.cfg.log_every == 0:
                self.fabric.print(f"{progress(self.step, self.cfg.max_steps, time.time() - t_run, self.step - first)} | "
                                  f"{step_line(metrics['scalars'])}", flush=True)
            if self.logger is not None and self.fabric.is_global_zero and self.step % self.cfg.log_every == 0:
                self.logger.log(self.step, metrics, n_rows=self.cfg.n_table_rows)
            if self.step % self.cfg.ckpt_every == 0 or self.step == self.cfg.max_steps:
                self.save()
            if self.on_step is not None:
                self.on_step(self.step, metrics["scalars"])
        return self.history

    def trainable_state(self) -> dict[str, Tensor]:
        """Detached copies of the trainable parameters (for tests and checks)."""
        return {n: p.detach().cpu().clone() for n, p in self.policy.named_parameters() if p.requires_grad}
