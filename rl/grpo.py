"""u-GRPO as pure tensor functions (Stock-R1 §3.5, App. B.3-B.4).

Shapes: ``N = Q * G`` rollouts (Q queries, G rollouts per query, rows grouped query-major:
rows ``q*G .. q*G+G-1`` belong to query ``q``), ``T`` padded completion length.

The objective, written as a loss to minimise, is

    L = 1/N sum_i 1/|o_i| sum_t m_it * ( -w~_q(i) min(r_it A_i, clip(r_it, 1-eps_lo, 1+eps_hi) A_i)
                                         + beta * KL_it )

    w~_q = w(U_q) / mean_{q' in the step's global batch} w(U_q')

with ``m`` the gen mask (1 only on model-generated tokens: the prompt, tool observations and padding
get no gradient), ``|o_i| = sum_t m_it`` and ``KL_it`` the k3 estimator to the reference policy (times ``r_it`` by default, as TRL).
With ``w = 1`` this is exactly TRL's ``loss_type="grpo"`` (per-sequence token mean, then batch mean;
``tests/test_rl_trl_equivalence.py`` checks loss and gradients against ``GRPOTrainer.compute_loss``).

``GRPOLossConfig.loss_type`` picks how the per-token terms ``l_it = m_it * (...)`` above are reduced,
each exactly as TRL 1.16 (``GRPOTrainer._compute_loss``), with N the rollouts and the sums over the whole
generation batch:
- ``"grpo"`` (default): ``L = 1/N sum_i (sum_t l_it) / |o_i|``, the formula above; long completions get
  a smaller per-token weight.
- ``"dapo"``: ``L = (sum_i sum_t l_it) / sum_i |o_i|``, a token mean over the batch's generated tokens
  (DAPO, arXiv:2503.14476), so every generated token counts the same.
- ``"dr_grpo"``: ``L = (sum_i sum_t l_it) / (N * L_max)`` with the constant ``L_max =
  GRPOLossConfig.max_completion_length`` (Dr. GRPO, arXiv:2503.20783): no length bias and a
  normaliser that does not depend on the batch.
A batch may be split into chunks (micro-batches): ``grpo_loss`` given the whole batch's ``N``
(``batch_sequences``) and generated-token count (``batch_tokens``) returns the chunk's share, and the
chunk losses sum to the whole-batch loss for every type (``tests/test_rl_grpo_loss_types.py``).

Credit: which advantage each token gets (``CreditConfig``, ``GRPOTrainConfig.credit``)
- ``"sequence"`` (default; Stock-R1 Eq. 1, TRL): every generated token of rollout i carries A_i, the
  advantage of its total reward R.
- ``"answer_span"`` (our departure from Eq. 1, off by default): the tokens that state the answer
  (``rl.answer_span.decision_tokens``: the conclusion's word and the ``<answer>`` span, ~4 of a
  rollout's ~450 tokens) carry the advantage of R_ans alone; every other generated token (the reasoning,
  the forecast action) carries the advantage of the other components, R − R_ans. Within the rollout's
  token mean the answer span gets the weight ``answer_share`` and the rest ``1 − answer_share``
  (``segment_credit``): l_i = share · mean_{answer} l_it + (1 − share) · mean_{rest} l_it. Why:
  ``bench grpo_credit`` (results/grpo_credit) measured that under sequence credit the answer-bearing
  tokens carry a small share of a step's gradient norm, and the rest's gradient, which moves the answers toward
  their golds by nothing, sets the AdamW step; and R_ans's advantage is spread by the other components'
  noise. A rollout that wrote no answer span keeps sequence credit (A_i on every token), so not answering
  is still scored on every token. The KL term is not reweighted.
- ``"answer_span"`` assumes the total has an ``r_ans`` component (``CreditConfig.answer_component``).
- ``answer_tags: false`` (with ``"answer_span"``; default true): the span is the answer's words only, the
  conclusion's word and what the ``<answer>`` tag holds; the two tags carry the rest's advantage like any
  other format token. Why: with the tags in the span, a wrong answer's negative R_ans advantage pushes down
  the ``</answer>`` that closes it at the span's weight (~1/4 of ``answer_share`` each), and a tag the policy
  is sure of has a near-0 gradient when pushed up but a growing one when pushed down, so the format wears.
  A reading of results/grpo_check/smollm2-135m-hold-lr8e-4-6steps (the parse rate fell as the lr rose).
  The check declared for it (results/grpo_check/smollm2-135m-hold-words-lr8e-4-6steps) did not bear it out:
  with the tags out the format broke sooner and further at the same lr. That change also doubled each
  answer word's weight (``answer_share`` spread over ~2 tokens instead of ~4); ``answer_share: 0.25`` with
  the tags out keeps the words' earlier weight (configs/grpo_check/smollm2-135m-hold-words-share025-lr8e-4-6steps.yaml,
  declared, not run). An unclosed answer keeps its written tail in the span, so a run-on answer is still
  pushed down by its R_ans penalty.
- ``answer_prior: "cancel"`` (with ``"answer_span"``; default ``"keep"``): before the span's advantages are
  used, each is reduced by the mean span advantage of the step's rollouts that state the same (canonical)
  answer, over the rollouts that can teach (a span written, in a group whose R_ans varies;
  ``cancel_answer_prior``). Then, per answer, the span advantages of the step sum to 0: in a model whose
  answers share nothing but a prior, the gradient that raises one answer on every query is cancelled to first
  order. The small policy's is not (results/grpo_credit: an update linear in the cancelled gradient still
  shifts every answer ±2 nats by seed), since the advantages are centred, not their gradients. Why: the
  grpo_check answer-span check (results/grpo_check/smollm2-135m-answer-span) moved each query toward its
  gold but moved the shared Yes/No prior far more, differently by seed, because the groups that can teach
  are unbalanced between golds. Being an action-dependent offset, not a baseline, it changes the expected gradient: it removes, on purpose, the component along each answer's shared
  direction. A step whose teaching groups all share one gold therefore teaches its answers nothing. Under
  DDP the means run over each rank's own queries (a simplification: string answers are not gathered).
- ``answer_prior: "project"`` (with ``"answer_span"``): "cancel" centres the advantages, but a span's
  gradient is its advantage times its slope s_i = 1 − π_i (π_i the probability of the span as written,
  from the sampler's log-probs), so the gradient along a direction every context shares is Σ_i A_i s_i, not
  Σ_i A_i. "project" zeroes Σ_i A_i s_i per answer over the teaching rollouts by the least-squares change of
  their advantages (``project_answer_prior``). A first-order argument for a two-way answer whose log-odds
  gradients share one direction; whether it holds the shared prior still on the small policy is measured,
  one batch at a time, by ``bench grpo_credit`` (its "the same batch's step under each credit" table).
- ``answer_prior: "hold"`` (with either mode): not a credit but a constraint on the update, which loses its
  first-order move of the step's mean answer log-odds (``rl.prior_hold``), so AdamW's per-weight
  normalisation cannot bring back what the advantages left out. ``hold_per_query`` decision contexts per
  query define that direction.

Choices where the paper is silent
- Advantages follow TRL: ``(R - mean_g) / (std_g + eps)`` with the unbiased std and ``eps = 1e-4``.
  A group whose rewards do not vary carries no signal: its advantages are set to exactly 0 (TRL gets
  ~1e-13 there from float round-off). Unscorable rollouts (reward NaN) are left out of the group
  statistics and get advantage 0, as in TRL.
- Where the weight acts (``UncertaintyWeightConfig.normalize``, default True). Adam divides every update
  by a running RMS of the gradient, so a factor shared by the whole batch (all queries volatile) is
  undone after a few steps: what the optimiser can see of ``w`` is only the *ratio* of the weights of
  the queries in one step. We therefore normalise w within the step's global batch of queries (mean 1,
  over every rank: ``normalised_weights``). A step whose queries share one U then is exactly plain
  GRPO (same loss, same gradient, same update), and a step with differing U moves gradient share from
  the volatile queries to the calm ones without changing the step's overall scale, so the recipe's lr,
  gradient clip and KL balance mean the same in GRPO and u-GRPO rows. The paper's "conservative updates
  during highly stochastic periods" therefore means: within a step, a volatile query counts less than
  a calm one. With the unnormalised form a volatile batch would not take a smaller step either (Adam).
  The weight can only act where U varies within a step: use >= 8 queries per step (the trainer warns).
- Which term ``w`` scales (``UncertaintyWeightConfig.weight_kl``, default False): the boxed J of §3.5
  puts w in front of both the clipped surrogate and the KL. We weight the surrogate only. w says how
  far to trust a query's reward (its labels are noisy in volatile regimes); the KL anchors the policy
  to SFT and is not made less reliable by noisy labels. Unweighted, it keeps its full pull on volatile
  queries, so those stay relatively closer to SFT: the conservative update of §3.5. Weighting it too
  (``weight_kl: true``, the paper's literal form) is available for the ablation of this choice.
  (The authors' code multiplies the *reward* by w instead, then clips it to [0, 1]; with one U per query
  the group normalisation of the advantage cancels that factor up to the clip and the std epsilon, so
  there the weight does next to nothing; where their U comes per rollout from the tool call, it
  rewards actions whose forecast is less uncertain, a different objective.)
- App. C.2 lists ``u0 = 0.25, u_hi = 0.50, w_hi = 0.50, u_cap = 1.0`` for Eq. 2 but no decay rate
  alpha. We read ``w_hi`` as the weight reached at ``u_hi`` (the name pairs with ``u_hi``), which
  fixes ``alpha = ln(1 / w_hi) = ln 2``, and ``u_cap`` as a cap on U: uncertainties above it are
  treated as ``u_cap``, so the weight has the floor ``w(u_cap) = w_hi ** ((u_cap-u0)/(u_hi-u0))
  = 0.125`` and never vanishes. NaN uncertainty (a model without one) gets weight 1.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

ADV_EPS = 1e-4  # TRL's std epsilon in the advantage denominator
LOSS_TYPES = ("grpo", "dapo", "dr_grpo")


@dataclass(frozen=True)
class UncertaintyWeightConfig:
    """Eq. 2 of App. B.4 with the App. C.2 values. ``alpha=None`` derives it from ``w_hi``."""

    u0: float = 0.25
    u_hi: float = 0.50
    w_hi: float = 0.50
    u_cap: float = 1.0
    alpha: float | None = None
    enabled: bool = True  # False gives w = 1 everywhere (plain GRPO)
    normalize: bool = True  # w / mean(w) over the step's global batch of queries (module docstring)
    weight_kl: bool = False  # also scale the KL term by w (the paper's literal boxed J; module docstring)

    def __post_init__(self) -> None:
        if not self.u0 < self.u_hi <= self.u_cap:
            raise ValueError(f"need u0 < u_hi <= u_cap, got u0={self.u0}, u_hi={self.u_hi}, u_cap={self.u_cap}")
        if not 0.0 < self.w_hi <= 1.0:
            raise ValueError(f"w_hi must be in (0, 1], got {self.w_hi}")

    @property
    def decay(self) -> float:
        """The alpha of Eq. 2."""
        return -math.log(self.w_hi) if self.alpha is None else float(self.alpha)

    @property
    def floor(self) -> float:
        """The smallest weight, reached at and above ``u_cap``."""
        return math.exp(-self.decay * (self.u_cap - self.u0) / (self.u_hi - self.u0))


@dataclass(frozen=True)
class GRPOLossConfig:
    """Clipping and KL settings (TRL's names: epsilon, epsilon_high, beta)."""

    epsilon_low: float = 0.2
    epsilon_high: float = 0.2
    beta: float = 0.0  # KL coefficient to the reference (SFT) policy; 0 = no reference model needed
    # Multiply the per-token k3 KL by the importance ratio (DeepSeek-V3.2): its gradient is then the
    # unbiased reverse-KL gradient under samples from pi_old. TRL >= 1.x does this by default
    # (``use_bias_correction_kl=True``); the value is unchanged on-policy (ratio = 1), the gradient is not.
    kl_ratio_correction: bool = True
    loss_type: str = "grpo"  # one of LOSS_TYPES; see the module docstring
    # L_max of dr_grpo's constant normaliser N * L_max (TRL's max_completion_length); dr_grpo only
    max_completion_length: int | None = None

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"GRPOLossConfig.loss_type must be one of {', '.join(LOSS_TYPES)}; got {self.loss_type!r}")
        if self.max_completion_length is not None and self.max_completion_length < 1:
            raise ValueError(f"GRPOLossConfig.max_completion_length must be >= 1, got {self.max_completion_length}")


CREDIT_MODES = ("sequence", "answer_span")
ANSWER_PRIORS = ("keep", "cancel", "project", "hold")


@dataclass(frozen=True)
class CreditConfig:
    """Which advantage each generated token carries (module docstring, "Credit")."""

    mode: str = "sequence"  # "sequence": A of the total on every token (Eq. 1); "answer_span": see the docstring
    answer_share: float = 0.5  # answer_span: the answer span's share of its rollout's token-mean weight
    answer_component: str = "r_ans"  # answer_span: the reward whose advantage the answer span carries
    answer_prior: str = "keep"  # answer_span: "cancel" centres the span's advantages per answer over the step;
    # "project" removes, per answer, their component along the span's probability slope (docstring, "Credit");
    # "hold" (any mode) removes from each update its move of the step's mean answer log-odds (rl/prior_hold.py)
    hold_per_query: int = 2  # "hold": decision contexts per query the shared direction is read on
    answer_tags: bool = True  # answer_span: whether the <answer> / </answer> tags belong to the span (as built);
    # False: the span is the answer's words only and the tags carry the rest's advantage (docstring, "Credit")

    def __post_init__(self) -> None:
        if self.mode not in CREDIT_MODES:
            raise ValueError(f"train.credit.mode must be one of {', '.join(CREDIT_MODES)}; got {self.mode!r}")
        if not 0.0 < self.answer_share < 1.0:
            raise ValueError(f"train.credit.answer_share must be in (0, 1), got {self.answer_share}")
        if self.answer_prior not in ANSWER_PRIORS:
            raise ValueError(f"train.credit.answer_prior must be one of {', '.join(ANSWER_PRIORS)}; "
                             f"got {self.answer_prior!r}")
        if self.hold_per_query < 1:
            raise ValueError(f"train.credit.hold_per_query must be >= 1, got {self.hold_per_query}")
        if not self.answer_tags and self.mode != "answer_span":
            raise ValueError(f"train.credit.answer_tags false narrows the answer span: it needs credit.mode "
                             f"'answer_span', got {self.mode!r}")
        if self.answer_prior in ("cancel", "project") and self.mode != "answer_span":
            raise ValueError(f"train.credit.answer_prior {self.answer_prior!r} acts on the answer span's advantages: "
                             f"it needs credit.mode 'answer_span', got {self.mode!r}")

    @property
    def label(self) -> str:
        """A short name for reports: "sequence", "answer_span", "answer_span, prior cancelled",
        "answer_span, prior projected out", or either mode with ", prior held"; "answer_span" reads
        "answer_span (words)" when the tags are left out of the span."""
        held = ", prior held" if self.answer_prior == "hold" else ""
        if self.mode == "sequence":
            return "sequence" + held
        mode = self.mode if self.answer_tags else f"{self.mode} (words)"
        return mode + {"cancel": ", prior cancelled", "project": ", prior projected out"}.get(self.answer_prior, held)


def cancel_answer_prior(adv_answer: Tensor, keys: Sequence[Hashable], can_teach: Tensor) -> Tensor:
    """The answer span's advantages with each answer's step mean removed (``answer_prior: "cancel"``).

    adv_answer: [N] group advantages of R_ans; keys: N canonical answers (None = unreadable, its own class);
    can_teach: [N] bool, the rollouts whose span carries a signal (a span written, R_ans varies in its group)
    returns [N]: on ``can_teach`` rows ``A_i − mean{A_j : can_teach_j, key_j = key_i}``, so the returned
    values of one answer sum to 0; other rows unchanged."""
    if len(keys) != adv_answer.numel() or can_teach.shape != adv_answer.shape:
        raise ValueError(f"cancel_answer_prior: {adv_answer.numel()} advantages, {len(keys)} keys and a mask of "
                         f"shape {tuple(can_teach.shape)} must align")
    out = adv_answer.clone()
    teach = can_teach.bool().tolist()
    for key in {k for k, t in zip(keys, teach, strict=True) if t}:
        rows = torch.tensor([t and k == key for k, t in zip(keys, teach, strict=True)])
        out[rows] = adv_answer[rows] - adv_answer[rows].mean()
    return out


def project_answer_prior(adv_answer: Tensor, keys: Sequence[Hashable], can_teach: Tensor, slope: Tensor) -> Tensor:
    """The answer span's advantages with, per answer, their component along the span's slope removed
    (``answer_prior: "project"``).

    Why: the span's log-prob gradient of rollout i is, for a two-way answer, about s_i (±∇z_i), z_i the
    log-odds of Yes at its decision point and s_i = 1 − π_i, π_i the probability of the span as written.
    With ∇z_i = g + h_i, g shared by every context, the step's span gradient along g is g Σ_i A_i s_i per
    answer: "cancel" zeroes Σ_i A_i, which leaves Σ_i A_i s_i whenever the slopes differ (an answer the
    policy is sure of moves less than a surprising one). This zeroes Σ_i A_i s_i instead, by the smallest
    change of the advantages (least squares): A_i − s_i Σ_j A_j s_j / Σ_j s_j².

    adv_answer: [N] group advantages of R_ans; keys: N canonical answers (None = unreadable, its own class);
    can_teach: [N] bool (as ``cancel_answer_prior``); slope: [N] s_i in [0, 1]
    returns [N]: on ``can_teach`` rows of each answer the projected advantages (a class whose slopes are all
    0 has no span gradient and is left as it is); other rows unchanged."""
    if not (len(keys) == adv_answer.numel() and can_teach.shape == adv_answer.shape == slope.shape):
        raise ValueError(f"project_answer_prior: {adv_answer.numel()} advantages, {len(keys)} keys, a mask of shape "
                         f"{tuple(can_teach.shape)} and slopes of shape {tuple(slope.shape)} must align")
    if ((slope < 0) | (slope > 1)).any():
        raise ValueError(f"project_answer_prior: slopes are 1 − a probability, in [0, 1]; got {slope.tolist()}")
    out = adv_answer.clone()
    teach = can_teach.bool().tolist()
    s = slope.to(adv_answer.dtype)
    for key in {k for k, t in zip(keys, teach, strict=True) if t}:
        rows = torch.tensor([t and k == key for k, t in zip(keys, teach, strict=True)])
        norm = (s[rows] ** 2).sum()
        if norm > 0:
            out[rows] = adv_answer[rows] - s[rows] * (adv_answer[rows] * s[rows]).sum() / norm
    return out


def segment_credit(adv_answer: Tensor, adv_rest: Tensor, adv_total: Tensor, answer: Tensor, gen: Tensor,
                   share: float) -> tuple[Tensor, Tensor]:
    """Per-token advantages and weights of ``"answer_span"`` credit.

    adv_answer, adv_rest, adv_total: [N] group advantages of R_ans, of R − R_ans and of R
    answer: [N, T] bool, the answer span's tokens; gen: [N, T] the generated-token mask
    returns (advantages [N, T], weights [N, T]): on a rollout with an answer span and other generated
    tokens, the span's tokens carry ``adv_answer`` with weight ``share * |o| / |span|`` and the others
    ``adv_rest`` with ``(1 - share) * |o| / |rest|`` (so the weights sum to |o| over the rollout and its
    token mean is ``share * mean_span + (1 - share) * mean_rest``); any other rollout carries ``adv_total``
    with weight 1 (sequence credit). Weights are 0 off ``gen``."""
    g = gen.to(torch.float64) > 0
    span = answer.bool() & g
    n_all, n_span = g.sum(1, keepdim=True).double(), span.sum(1, keepdim=True).double()
    n_rest = n_all - n_span
    split = (n_span > 0) & (n_rest > 0)
    w = torch.where(span, share * n_all / n_span.clamp(min=1), (1 - share) * n_all / n_rest.clamp(min=1))
    w = torch.where(split, w, torch.ones_like(w))
    adv = torch.where(span, adv_answer.double().unsqueeze(1), adv_rest.double().unsqueeze(1))
    adv = torch.where(split, adv, adv_total.double().unsqueeze(1))
    zero = torch.zeros_like(w)
    return torch.where(g, adv, zero).to(adv_total.dtype), torch.where(g, w, zero).to(adv_total.dtype)


@dataclass(frozen=True)
class GRPOLossOutput:
    """loss: scalar to backpropagate; the rest are detached diagnostics."""

    loss: Tensor
    per_sequence: Tensor  # [N] weighted per-sequence token mean (the grpo reduction, for every loss_type)
    kl: Tensor  # scalar token-mean k3 KL (0 when beta = 0 and no reference given)
    clip_low: Tensor  # fraction of generated tokens clipped below (A < 0)
    clip_high: Tensor  # fraction clipped above (A > 0)
    n_tokens: Tensor  # number of generated tokens in the loss


def group_advantages(rewards: Tensor, group_size: int, eps: float = ADV_EPS) -> Tensor:
    """Group-relative advantages.

    rewards: [N] with N = Q * G, query-major; NaN = unscorable rollout.
    returns: [N] ``(R - mean_g) / (std_g + eps)``, 0 for zero-spread groups and NaN rewards.
    """
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be [Q*G] with G={group_size}, got shape {tuple(rewards.shape)}")
    grouped = rewards.view(-1, group_size).double()
    valid = ~torch.isnan(grouped)
    count = valid.sum(1, keepdim=True)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    sq = torch.where(valid, (grouped - mean) ** 2, torch.zeros_like(grouped))
    std = (sq.sum(1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
    adv = (grouped - mean) / (std + eps)
    spread = (count > 1) & (std > 1e-12)
    adv = torch.where(valid & spread, adv, torch.zeros_like(adv))
    return adv.view(-1).to(rewards.dtype)


def group_spread(rewards: Tensor, group_size: int) -> Tensor:
    """[Q] within-group std (unbiased, NaN-aware) of the total reward."""
    grouped = rewards.view(-1, group_size).double()
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    valid = ~torch.isnan(grouped)
    sq = torch.where(valid, (grouped - mean) ** 2, torch.zeros_like(grouped))
    return (sq.sum(1) / (valid.sum(1) - 1).clamp(min=1)).sqrt().to(rewards.dtype)


def advantage_noise(rewards: Tensor, group_size: int, n_boot: int = 64, seed: int = 0) -> dict[str, float]:
    """How much each advantage depends on which other rollouts its group happened to draw.

    rewards: [N] with N = Q * G (NaN = unscorable). For every scored rollout i of a group with spread, the
    other members are redrawn ``n_boot`` times with replacement (i kept) and i's advantage recomputed.
    Returns ``std``: the mean over rollouts of the advantage's std across the redraws (in units of the
    group std: ~0 = the baseline is pinned down, ~1 = as large as the advantage itself) and ``sign_flip``:
    the share of redraws whose advantage has the other sign than the one trained on (0.5 = a coin flip).
    Both NaN when no group has spread. Small G gives noisy advantages (App. C.3, Fig. 6 right)."""
    grouped = rewards.detach().double().cpu().view(-1, group_size)
    gen = torch.Generator().manual_seed(seed)
    stds, flips = [], []
    for g in grouped:
        r = g[~torch.isnan(g)]
        if r.numel() < 3 or float(r.std()) < 1e-12:
            continue
        full = (r - r.mean()) / (r.std() + ADV_EPS)
        for i in range(r.numel()):
            others = torch.cat([r[:i], r[i + 1:]])
            draw = others[torch.randint(0, others.numel(), (n_boot, others.numel()), generator=gen)]
            grp = torch.cat([r[i].expand(n_boot, 1), draw], dim=1)
            a = (r[i] - grp.mean(1)) / (grp.std(1) + ADV_EPS)
            stds.append(float(a.std()))
            if abs(float(full[i])) > 1e-9:
                flips.append(float((torch.sign(a) != torch.sign(full[i])).double().mean()))
    return {"std": float(np.mean(stds)) if stds else math.nan, "sign_flip": float(np.mean(flips)) if flips else math.nan}


def uncertainty_weight(u: Tensor, cfg: UncertaintyWeightConfig = UncertaintyWeightConfig()) -> Tensor:
    """Eq. 2: w = 1 for U <= u0, exp(-alpha (min(U, u_cap) - u0) / (u_hi - u0)) above. u: [Q] -> [Q]."""
    u = torch.as_tensor(u, dtype=torch.float64)
    if not cfg.enabled:
        return torch.ones_like(u)
    capped = u.clamp(max=cfg.u_cap)
    w = torch.exp(-cfg.decay * (capped - cfg.u0) / (cfg.u_hi - cfg.u0))
    w = torch.where(capped <= cfg.u0, torch.ones_like(w), w)
    return torch.where(torch.isnan(u), torch.ones_like(w), w)


def normalised_weights(w: Tensor, total: float | Tensor | None = None, count: int | Tensor | None = None) -> Tensor:
    """[Q] -> [Q] ``w / mean(w)``; the mean is ``total / count`` when given (the sum and the number of
    queries over every rank of a distributed step), else this batch's. Mean 1 over the global batch:
    a weight shared by every query becomes exactly 1."""
    w = torch.as_tensor(w, dtype=torch.float64)
    total = w.sum() if total is None else torch.as_tensor(total, dtype=torch.float64)
    count = w.numel() if count is None else count
    mean = total / float(count)
    if not bool(mean > 0):
        raise ValueError(f"uncertainty weights must have a positive mean to be normalised, got {float(mean)}")
    return w / mean


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref) (Schulman), as TRL: exp(d) - d - 1, d = ref - logp."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def masked_sequence_mean(x: Tensor, mask: Tensor) -> Tensor:
    """[N, T] -> [N] mean over positions where mask = 1 (0 for an all-masked row)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def grpo_loss(
    logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    old_logp: Tensor | None = None,
    ref_logp: Tensor | None = None,
    weights: Tensor | None = None,
    cfg: GRPOLossConfig = GRPOLossConfig(),
    kl_weights: Tensor | None = None,
    batch_sequences: int | None = None,
    batch_tokens: float | None = None,
    token_weights: Tensor | None = None,
) -> GRPOLossOutput:
    """The clipped, uncertainty-weighted GRPO loss of one chunk of a generation batch.

    logp:       [N, T] log pi_theta of each completion token (requires grad)
    advantages: [N] group-relative advantages, or [N, T] one per token (``segment_credit``)
    mask:       [N, T] 1 on model-generated tokens, 0 on tool observations, prompt and padding
    old_logp:   [N, T] log pi_old at sampling time; None = on-policy (logp.detach(), ratio 1)
    ref_logp:   [N, T] log pi_ref, needed when cfg.beta != 0
    weights:    [N] per-rollout weight of the clipped surrogate, w~(U_q) (the query's weight repeated G
                times); None = 1
    kl_weights: [N] per-rollout weight of the KL term; None = 1 (the default: module docstring)
    batch_sequences: rollouts in the whole generation batch (None = this chunk's N)
    batch_tokens:    generated tokens (sum of mask) in the whole batch (None = this chunk's; dapo only)
    token_weights:   [N, T] per-token weight of the clipped surrogate (``segment_credit``); None = 1

    ``loss`` is this chunk's share of the whole-batch loss of ``cfg.loss_type`` (module docstring):
    summed over the chunks of a batch it is the whole-batch loss; with the defaults (the chunk is the
    whole batch) it is that loss. The diagnostics (kl, clip fractions) are this chunk's token means.
    """
    if cfg.loss_type == "dr_grpo" and cfg.max_completion_length is None:
        raise ValueError('GRPOLossConfig(loss_type="dr_grpo") needs max_completion_length (its normaliser N * L_max)')
    mask = mask.to(logp.dtype)
    old_logp = logp.detach() if old_logp is None else old_logp
    adv = advantages.to(logp.dtype)
    adv = adv.unsqueeze(1) if adv.ndim == 1 else adv
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1 - cfg.epsilon_low, 1 + cfg.epsilon_high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    if weights is not None:
        per_token = per_token * weights.to(per_token.dtype).unsqueeze(1)
    if token_weights is not None:
        per_token = per_token * token_weights.to(per_token.dtype)
    kl = torch.zeros((), dtype=logp.dtype, device=logp.device)
    if cfg.beta != 0.0:
        if ref_logp is None:
            raise ValueError("GRPOLossConfig.beta != 0 needs ref_logp (log-probs of the reference policy)")
        per_token_kl = kl_k3(logp, ref_logp)
        if cfg.kl_ratio_correction:
            per_token_kl = per_token_kl * ratio
        kl_term = cfg.beta * per_token_kl
        if kl_weights is not None:
            kl_term = kl_term * kl_weights.to(kl_term.dtype).unsqueeze(1)
        per_token = per_token + kl_term
        kl = (per_token_kl * mask).sum().detach() / mask.sum().clamp(min=1.0)
    n_seq = logp.shape[0] if batch_sequences is None else int(batch_sequences)
    per_seq_sum = (per_token * mask).sum(-1)
    per_seq = per_seq_sum / mask.sum(-1).clamp(min=1.0)  # = masked_sequence_mean(per_token, mask)
    if cfg.loss_type == "grpo":  # TRL: ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        loss = per_seq.mean() if batch_sequences is None else per_seq.sum() / max(n_seq, 1)
    elif cfg.loss_type == "dapo":  # TRL: (per_token_loss * mask).sum() / num_items_in_batch.clamp(min=1.0)
        n_tok_batch = mask.sum().detach() if batch_tokens is None else torch.as_tensor(batch_tokens).detach()
        loss = per_seq_sum.sum() / n_tok_batch.to(per_seq_sum).clamp(min=1.0)
    else:  # dr_grpo; TRL: (per_token_loss * mask).sum() / (per_token_loss.size(0) * self.max_completion_length)
        loss = per_seq_sum.sum() / (max(n_seq, 1) * cfg.max_completion_length)
    n_tok = mask.sum().clamp(min=1.0)
    with torch.no_grad():
        low = ((ratio < 1 - cfg.epsilon_low) & (adv < 0)).to(logp.dtype)
        high = ((ratio > 1 + cfg.epsilon_high) & (adv > 0)).to(logp.dtype)
    return GRPOLossOutput(
        loss=loss,
        per_sequence=per_seq.detach(),
        kl=kl,
        clip_low=(low * mask).sum() / n_tok,
        clip_high=(high * mask).sum() / n_tok,
        n_tokens=mask.sum().detach(),
    )


def token_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Mean per-token entropy of softmax(logits) over mask. logits [N, T, V], mask [N, T] -> scalar."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    mask = mask.to(ent.dtype)
    return (ent * mask).sum() / mask.sum().clamp(min=1.0)
