"""Stock-R1 rewards (§3.5) as small pure TRL-style functions.

Each component is ``f(prompts, completions, **columns) -> list[float | None]``, so the same function
works in this repo's u-GRPO engine and as a ``reward_funcs`` entry of TRL's ``GRPOTrainer`` (with
``reward_weights=[1, alpha, beta, gamma]``). ``completions`` are strings or TRL conversational
messages; ``columns`` are per-completion lists (TRL repeats each dataset column G times):

==================  ==========================================================================
column              meaning
==================  ==========================================================================
answer              gold answer text (``QAItem.answer``); None = not a QA sample
answer_type         ``yes_no`` | ``choice`` | ``numeric`` (``llm.qa.core.AnswerType``)
tolerance           absolute tolerance of a numeric answer (same unit as the answer)
choices             allowed answers of a ``choice`` question
target_action       a* = g(realised future), a ``ForecastAction`` (``derive.actions_from_windows``)
decoded_action      g(decoded trajectory) of this rollout (``derive.actions_from_forecast``); None
                    when the decoder did not run
pred_close          [S] decoded mean close path of this rollout; None when the decoder did not run
pred_volume         [S] decoded volume path (optional)
true_close          [S] realised close t+1..t+S
true_volume         [S] realised volume t+1..t+S (optional)
start_close         close at the decision day t
==================  ==========================================================================

Scores and penalties (choices, each tested in tests/test_rl_rewards.py)
- A scorable component lies in [0, 1]. A malformed model output (no readable ``<answer>``, no
  closed ``<forecast_action>`` block, an action with no usable field, no decoded trajectory) gets
  ``PENALTY = -0.5``: strictly worse than the worst well-formed output (0), so format failures are
  always pushed down within a group. A missing *label* (no gold answer, no realised future) gives
  None ("not applicable", TRL's convention), which the total counts as 0.
- An action counts only when its block is closed: a truncated action never reached the decoder.
  A partial action is scored as it is: ``score_action`` gives its missing fields no credit.
- R_ans: categorical (``yes_no``/``choice``) is exact match after ``llm.qa.answers.normalize_answer``.
  Numeric is tolerance-aware: 1 within ``tolerance``, then linear down to 0 at ``2 * tolerance``
  (partial credit for near misses; with tolerance 0 it is exact match at 2 decimals).
- R_prec = mean of three terms in [0, 1], each scale-free so assets are comparable:
  price ``exp(-MAE(ĉ, c) / MAE(c0, c))`` - the error relative to the no-change forecast (MASE-like;
  the denominator is floored at ``1e-3 * c0``), so a random walk scores e^-1 on any asset;
  volume ``exp(-MAE(v̂, v) / mean(v))`` (volume moves tens of percent a day, so its level is the
  natural scale); direction = share of horizons k in (3, 5, 10) where the sign of the predicted
  cumulative return matches the realised one (App. C.1's DA_k, ``stockr1.metrics.forecast``).
  Without volume the mean is over price and direction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast_action.parser import parse_action
from forecast_action.schema import ACTION_CLOSE, ACTION_OPEN, ForecastAction
from forecast_action.score import score_action
from llm.qa.answers import extract_answer, normalize_answer
from llm.qa.core import QAItem
from stockr1.metrics.forecast import DA_HORIZONS, simple_returns

PENALTY = -0.5
REWARD_NAMES: tuple[str, ...] = ("r_ans", "r_act", "r_prec", "r_cons")


@dataclass(frozen=True)
class RewardWeights:
    """R = R_ans + alpha R_act + beta R_prec + gamma R_cons (App. C.2 defaults)."""

    ans: float = 1.0
    alpha: float = 1.0
    beta: float = 0.5
    gamma: float = 1.0

    def as_list(self) -> list[float]:
        """In ``REWARD_NAMES`` order (TRL's ``reward_weights``)."""
        return [self.ans, self.alpha, self.beta, self.gamma]


def completion_text(completion: Any) -> str:
    """A TRL completion (string or list of chat messages) as plain text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        return "".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion)
    return str(completion)


def emitted_action(text: str) -> ForecastAction | None:
    """The action of a completion: only a closed ``<forecast_action>`` block counts."""
    start = text.find(ACTION_OPEN)
    if start < 0 or text.find(ACTION_CLOSE, start) < 0:
        return None
    return parse_action(text[start:]).action


def _column(values: Any, name: str, n: int) -> list[Any]:
    """A per-completion column as a list of n values (all None when the column is absent)."""
    if values is None:
        return [None] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"reward column {name!r} has {len(values)} values for {n} completions")
    return values


def _item(answer: str, answer_type: str, tolerance: float, choices: Sequence[str]) -> QAItem:
    return QAItem(id="", family="", template="", question="", answer=str(answer), answer_type=answer_type,
                  window=-1, ticker="", date="", split="", choices=tuple(choices or ()),
                  tolerance=float(tolerance or 0.0))


def canonical_answer(raw: str | None, answer_type: str, choices: Sequence[str] = ()) -> str | None:
    """The canonical form R_ans grades (``llm.qa.answers.normalize_answer``: "Yes, because…" → "Yes"), or
    None where it cannot be read. Two rollouts with the same canonical answer state the same answer."""
    return normalize_answer(_item("", answer_type, 0.0, choices), raw)


def graded_answer(raw: str | None, answer_type: str | None, choices: Sequence[str] = ()) -> str:
    """An answer as R_ans grades it (``canonical_answer``: "Yes, because" and "Yes<answer>Yes" are "Yes"),
    "None" where no answer was written, "unreadable" where R_ans cannot read the one written: a bounded set of
    labels for counting answers (probe tables, logged shares)."""
    if raw is None:
        return "None"
    return canonical_answer(str(raw), answer_type or "choice", choices) or "unreadable"


def answer_score(raw: str | None, answer: str, answer_type: str, tolerance: float = 0.0,
                 choices: Sequence[str] = ()) -> float:
    """R_ans of one extracted answer string (see module docstring)."""
    item = _item(answer, answer_type, tolerance, choices)
    pred = normalize_answer(item, raw)
    if pred is None:
        return PENALTY
    if answer_type != "numeric":
        return float(pred == item.answer)
    err = abs(float(pred) - float(item.answer))
    tol = item.tolerance
    if err <= tol + 1e-9:
        return 1.0
    return 0.0 if tol <= 0 else float(max(0.0, 1.0 - (err - tol) / tol))


def r_ans(prompts: list, completions: list, answer: list | None = None, answer_type: list | None = None,
          tolerance: list | None = None, choices: list | None = None, **_: Any) -> list[float | None]:
    """Answer correctness: exact match (categorical) or tolerance-aware (numeric)."""
    n = len(completions)
    ans, typ = _column(answer, "answer", n), _column(answer_type, "answer_type", n)
    tol, ch = _column(tolerance, "tolerance", n), _column(choices, "choices", n)
    out: list[float | None] = []
    for i, c in enumerate(completions):
        if ans[i] is None:
            out.append(None)
            continue
        raw = extract_answer(completion_text(c))
        out.append(answer_score(raw, ans[i], typ[i] or "choice", tol[i] or 0.0, ch[i] or ()))
    return out


def _action_vs(completions: list, targets: list[Any]) -> list[float | None]:
    out: list[float | None] = []
    for c, target in zip(completions, targets, strict=True):
        if target is None:
            out.append(None)
            continue
        action = emitted_action(completion_text(c))
        out.append(PENALTY if action is None else float(score_action(action, target).score))
    return out


def r_act(prompts: list, completions: list, target_action: list | None = None, **_: Any) -> list[float | None]:
    """Action accuracy: field-level score of the emitted action against a* = g(realised future)."""
    return _action_vs(completions, _column(target_action, "target_action", len(completions)))


def r_cons(prompts: list, completions: list, decoded_action: list | None = None,
           target_action: list | None = None, **_: Any) -> list[float | None]:
    """Action-trajectory consistency: emitted action against g(decoded trajectory).

    A rollout whose decoder did not run has no profile to agree with: PENALTY when the sample has a
    label (``target_action``), i.e. it is a forecast-action task, else None.
    """
    n = len(completions)
    decoded = _column(decoded_action, "decoded_action", n)
    labelled = _column(target_action, "target_action", n)
    out: list[float | None] = []
    for c, d, t in zip(completions, decoded, labelled, strict=True):
        if d is None:
            out.append(None if t is None else PENALTY)
        else:
            out.extend(_action_vs([c], [d]))
    return out


def precision_score(pred_close: np.ndarray, true_close: np.ndarray, start_close: float,
                    pred_volume: np.ndarray | None = None, true_volume: np.ndarray | None = None) -> float:
    """R_prec of one decoded trajectory against the realised one (see module docstring). Paths: [S]."""
    ch, c = np.asarray(pred_close, np.float64), np.asarray(true_close, np.float64)
    if ch.shape != c.shape or not np.all(np.isfinite(ch)):
        return PENALTY
    c0 = float(start_close)
    naive = max(float(np.abs(c - c0).mean()), 1e-3 * c0)
    terms = [float(np.exp(-np.abs(ch - c).mean() / naive))]
    if pred_volume is not None and true_volume is not None:
        vh, v = np.asarray(pred_volume, np.float64), np.asarray(true_volume, np.float64)
        if vh.shape == v.shape and np.all(np.isfinite(vh)) and v.mean() > 0:
            terms.append(float(np.exp(-np.abs(vh - v).mean() / v.mean())))
    r = simple_returns(c[None], np.array([c0]))[0]
    rh = simple_returns(ch[None], np.array([c0]))[0]
    ks = [k for k in DA_HORIZONS if k <= len(c)] or [len(c)]
    terms.append(float(np.mean([np.sign(rh[k - 1]) == np.sign(r[k - 1]) for k in ks])))
    return float(np.mean(terms))


def r_prec(prompts: list, completions: list, pred_close: list | None = None, true_close: list | None = None,
           start_close: list | None = None, pred_volume: list | None = None, true_volume: list | None = None,
           **_: Any) -> list[float | None]:
    """Forecast precision of the decoded trajectory against the realised series."""
    n = len(completions)
    pc, tc = _column(pred_close, "pred_close", n), _column(true_close, "true_close", n)
    s, pv = _column(start_close, "start_close", n), _column(pred_volume, "pred_volume", n)
    tv = _column(true_volume, "true_volume", n)
    out: list[float | None] = []
    for i in range(n):
        if tc[i] is None or s[i] is None:
            out.append(None)
        elif pc[i] is None:
            out.append(PENALTY)
        else:
            out.append(precision_score(pc[i], tc[i], s[i], pv[i], tv[i]))
    return out


REWARD_FUNCS: dict[str, Callable[..., list[float | None]]] = {
    "r_ans": r_ans, "r_act": r_act, "r_prec": r_prec, "r_cons": r_cons,
}


@dataclass(frozen=True)
class RewardBreakdown:
    """Per-completion components (NaN = not applicable) and the weighted total. Arrays: [N]. ``weights``:
    each component's weight in the total (1 where absent)."""

    components: dict[str, np.ndarray]
    total: np.ndarray
    weights: Mapping[str, float] = field(default_factory=dict)

    def total_without(self, name: str) -> np.ndarray:
        """[N] the total without component ``name``'s weighted part: the other components' sum, NaN where
        none of them is defined (unscorable by the rest)."""
        if name not in self.components:
            raise KeyError(f"no reward component {name!r} in this breakdown (it has {sorted(self.components)})")
        others = {k: v for k, v in self.components.items() if k != name}
        return weighted_total(others, self.weights, len(self.total))


def weighted_total(components: Mapping[str, np.ndarray], weights: Mapping[str, float], n: int) -> np.ndarray:
    """[N] sum of the components times their weights (1 where absent); a NaN component adds nothing, and a
    completion whose every component is NaN (or that has none) gets NaN."""
    if not components:
        return np.full(n, np.nan)
    stacked = np.stack(list(components.values()), axis=1)  # [N, F]
    w = np.array([weights.get(k, 1.0) for k in components])
    total = np.nansum(stacked * w, axis=1)
    total[np.isnan(stacked).all(axis=1)] = np.nan
    return total


def combine_rewards(prompts: list, completions: list, funcs: Mapping[str, Callable[..., list[float | None]]],
                    weights: Mapping[str, float], **columns: Any) -> RewardBreakdown:
    """Run TRL-style reward functions and sum them with weights (TRL's ``sum_then_normalize``).

    A None from a function is NaN in its component and adds nothing to the total; a completion whose
    every component is None has total NaN (unscorable: advantage 0).
    """
    n = len(completions)
    comps: dict[str, np.ndarray] = {}
    for name, fn in funcs.items():
        vals = fn(prompts, completions, **columns)
        if len(vals) != n:
            raise ValueError(f"reward {name!r} returned {len(vals)} values for {n} completions")
        comps[name] = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    total = weighted_total(comps, weights, n)
    return RewardBreakdown(components=comps, total=total, weights={k: float(weights.get(k, 1.0)) for k in comps})


def compute_rewards(prompts: list, completions: list, weights: RewardWeights = RewardWeights(),
                    enabled: Sequence[str] = REWARD_NAMES, **columns: Any) -> RewardBreakdown:
    """Every enabled component and ``R = R_ans + alpha R_act + beta R_prec + gamma R_cons``.

    Disabled components (the ablations "w/o R_act", "w/o R_prec") are NaN and add nothing.
    """
    unknown = set(enabled) - set(REWARD_NAMES)
    if unknown:
        raise ValueError(f"unknown reward components {sorted(unknown)}; expected a subset of {REWARD_NAMES}")
    funcs = {k: REWARD_FUNCS[k] for k in REWARD_NAMES if k in enabled}
    out = combine_rewards(prompts, completions, funcs, dict(zip(REWARD_NAMES, weights.as_list(), strict=True)),
                          **columns)
    n = len(completions)
    comps = {k: out.components.get(k, np.full(n, np.nan)) for k in REWARD_NAMES}
    return RewardBreakdown(components=comps, total=out.total, weights=out.weights)


def r_total(prompts: list, completions: list, **columns: Any) -> list[float | None]:
    """The total reward with the default weights, as one TRL reward function."""
    total = compute_rewards(prompts, completions, **columns).total
    return [None if np.isnan(t) else float(t) for t in total]


def variance_shares(components: dict[str, np.ndarray], total: np.ndarray, group_size: int,
                    weights: RewardWeights = RewardWeights()) -> dict[str, float]:
    """Which component the group-relative advantage is made of: for each component c, the mean over
    groups of cov(w_c c, R) / the mean over groups of var(R), within each group of ``group_size``
    (the shares sum to 1 when every component is scored). A component whose share is near 1 decides
    the sign of almost every advantage. NaN components count as 0, as in the total."""
    scale = {"r_ans": weights.ans, "r_act": weights.alpha, "r_prec": weights.beta, "r_cons": weights.gamma}
    tot = np.nan_to_num(np.asarray(total, dtype=np.float64)).reshape(-1, group_size)
    var = float(np.mean([np.var(t, ddof=1) for t in tot])) if group_size > 1 else 0.0
    out = {}
    for name, v in components.items():
        g = scale.get(name, 1.0) * np.nan_to_num(np.asarray(v, dtype=np.float64)).reshape(-1, group_size)
        cov = float(np.mean([np.cov(a, b)[0, 1] for a, b in zip(g, tot, strict=True)])) if group_size > 1 else 0.0
        out[name] = cov / var if var > 0 else float("nan")
    return out
