"""GRPO run metrics, collapse warnings and the W&B / JSONL logger.

Metric names (the W&B panels of docs/rl.md use them verbatim):

- ``reward/<r_ans|r_act|r_prec|r_cons|total>``: mean over rollouts (components: where applicable)
- ``reward/total_std``, ``reward/group_std`` (mean within-group spread), ``reward/frac_zero_spread``,
  ``reward/var_share/<component>`` (``rl.rewards.variance_shares``: the component's share of the
  within-group variance of the total, what the advantages are made of)
- ``policy/entropy|kl|clip_low|clip_high|clip_region``, ``loss``, ``advantage/abs_mean``,
  ``advantage/noise_std`` and ``advantage/sign_flip`` (``rl.grpo.advantage_noise``: how much each advantage
  depends on the group's other draws)
- ``rollout/action_success_rate`` (a parsed action reached the decoder and it returned a path),
  ``rollout/action_completeness`` (M4), ``rollout/answer_parse_rate``, ``rollout/gen_tokens``,
  ``rollout/finish/<answer|eos|length>``, ``rollout/truncated`` (share of rollouts that hit
  ``max_new_tokens``: finish reason ``length``, 0 when none did)
- ``answers/share/<answer>`` (``rl.rewards.graded_answer`` lower-cased: ``yes``, ``unreadable``, ``none``;
  see ``_answer_share_keys``), ``answers/top_share``, ``actions/direction/<up|down|flat|none>``
- ``uncertainty/u_mean``, ``uncertainty/weight_mean`` (raw w(U)), ``uncertainty/weight_spread`` (largest /
  smallest surrogate weight of the step: 1 = the weight did nothing), ``uncertainty/weight_norm_mean`` (this
  rank's mean surrogate weight); the step's wall seconds: ``time/rollout_s`` (decoding with the tool),
  ``time/scoring_s`` (rewards, advantages, batch), ``time/reference_s`` (pi_old / KL reference pass),
  ``time/hold_s`` (the shared answer direction of ``answer_prior: hold``, 0 otherwise), ``time/loss_s``
  (forward + backward), ``time/update_s`` (clip + optimiser + the hold's projection), ``time/step_s`` (all of
  them); ``answer_prior/held_move`` (under ``hold``: the first-order move of the mean answer log-odds removed)
- ``warn/zero_spread``, ``warn/answer_dominates``, ``warn/action_dominates`` (1 when the warning fired)
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rl.grpo import advantage_noise
from rl.rewards import PENALTY, RewardBreakdown, RewardWeights, graded_answer, variance_shares

log = logging.getLogger("rl")


@dataclass(frozen=True)
class CollapseThresholds:
    """When to warn: groups stop varying, or one answer / action direction takes over."""

    zero_spread: float = 0.5  # share of groups with zero reward spread
    dominant: float = 0.9  # share of the most common answer (or action direction)
    min_count: int = 8  # fewer answers than this are too few to call a collapse


def _share(values: Sequence[str]) -> dict[str, float]:
    c = Counter(values)
    return {k: v / max(len(values), 1) for k, v in c.most_common()}


def _answer_share_keys(rollouts: Sequence[Any], samples: Sequence[Any], group_size: int) -> list[str]:
    """The key each rollout's answer is counted under in ``answers/share/<key>``: on a query with an answer
    type, ``rl.rewards.graded_answer`` lower-cased ("Yes, because…" counts as "yes", like "Yes"; "unreadable";
    "none" where no ``<answer>`` was written); on a query without one (no gold answer), the raw text, squashed
    and cut to 24 characters. Rollout i answers query i // group_size."""
    out = []
    for i, r in enumerate(rollouts):
        cols = samples[i // group_size].columns
        if r.answer is None or cols.get("answer_type"):
            out.append(graded_answer(r.answer, cols.get("answer_type"), cols.get("choices") or ()).lower())
        else:
            out.append(" ".join(r.answer.split()).lower()[:24] or "empty")
    return out


def step_metrics(step: int, rollouts: Sequence[Any], samples: Sequence[Any], rewards: RewardBreakdown,
                 advantages: Tensor, group_size: int, u: Tensor, w: Tensor,
                 stats: Mapping[str, float], weights: RewardWeights | None = None) -> dict[str, Any]:
    """Everything logged for one step: ``{"scalars": {...}, "rows": [sample rollout rows]}``. ``weights``:
    the reward weights of the total (for the variance shares; default App. C.2's)."""
    from forecast_action.score import completeness

    s: dict[str, float] = {"step": float(step)}
    for name, v in rewards.components.items():
        if not np.isnan(v).all():
            s[f"reward/{name}"] = float(np.nanmean(v))
    tot = rewards.total
    s["reward/total"] = float(np.nanmean(tot)) if not np.isnan(tot).all() else math.nan
    s["reward/total_std"] = float(np.nanstd(tot)) if not np.isnan(tot).all() else math.nan
    grouped = tot.reshape(-1, group_size)
    with np.errstate(invalid="ignore"):
        spread = np.array([np.nanstd(g) if np.isfinite(g).sum() > 1 else 0.0 for g in grouped])
    s["reward/group_std"] = float(spread.mean())
    s["reward/frac_zero_spread"] = float((spread < 1e-9).mean())
    if group_size > 1 and not np.isnan(tot).all():
        for name, share in variance_shares(rewards.components, tot, group_size, weights or RewardWeights()).items():
            if np.isfinite(share):
                s[f"reward/var_share/{name}"] = float(share)
    s["advantage/abs_mean"] = float(advantages.abs().mean())
    noise = advantage_noise(torch.as_tensor(tot), group_size, seed=step)
    s["advantage/noise_std"], s["advantage/sign_flip"] = noise["std"], noise["sign_flip"]
    n = len(rollouts)
    s["rollout/action_success_rate"] = sum(r.action is not None and r.forecast is not None for r in rollouts) / n
    s["rollout/action_completeness"] = float(np.mean([completeness(r.action) for r in rollouts]))
    r_ans = rewards.components.get("r_ans", np.full(len(rollouts), np.nan))
    labelled = ~np.isnan(r_ans)
    if labelled.any():
        s["rollout/answer_parse_rate"] = float((r_ans[labelled] != PENALTY).mean())
    s["rollout/gen_tokens"] = float(np.mean([r.n_generated for r in rollouts]))
    for reason, share in _share([r.finish_reason for r in rollouts]).items():
        s[f"rollout/finish/{reason}"] = share
    s["rollout/truncated"] = float(np.mean([r.finish_reason == "length" for r in rollouts]))
    answers = _share(_answer_share_keys(rollouts, samples, group_size))
    for a, share in answers.items():
        s[f"answers/share/{a}"] = share
    s["answers/top_share"] = max(answers.values())
    for d, share in _share([getattr(r.action, "direction", None) or "none" for r in rollouts]).items():
        s[f"actions/direction/{d}"] = share
    s["uncertainty/u_mean"] = float(np.nanmean(u.numpy())) if not bool(u.isnan().all()) else math.nan
    s["uncertainty/weight_mean"] = float(w.mean())
    s.update({k: float(v) for k, v in stats.items()})
    rows = []
    for i, r in enumerate(rollouts):
        rows.append({"step": step, "query": r.prompt_index, "sample": r.sample_index,
                     "prompt_tail": r.prompt[-200:], "completion": r.completion[:2000],
                     "total": float(tot[i]), **{k: float(v[i]) for k, v in rewards.components.items()},
                     "advantage": float(advantages[i]), "answer": r.answer,
                     "action": None if r.action is None else r.action.to_text(), "finish": r.finish_reason})
    return {"scalars": s, "rows": rows}


def collapse_warnings(s: Mapping[str, float], n_answers: int, th: CollapseThresholds = CollapseThresholds()) -> list[str]:
    """Human-readable warnings for one step's scalars (empty when all is well)."""
    out = []
    if s.get("reward/frac_zero_spread", 0.0) >= th.zero_spread:
        out.append(f"{s['reward/frac_zero_spread']:.0%} of groups have zero reward spread: no learning signal "
                   "(rewards saturated or rollouts identical; raise temperature or G)")
    if n_answers >= th.min_count:
        answers = {k[len("answers/share/"):]: v for k, v in s.items() if k.startswith("answers/share/")}
        top = max(answers, key=answers.get) if answers else None
        if top is not None and answers[top] >= th.dominant:
            out.append(f"one answer dominates: no readable answer in {answers[top]:.0%} of rollouts (format failure)"
                       if top == "none" else
                       f"one answer dominates: {top!r} is {answers[top]:.0%} of answers (collapse to one class?)")
        dirs = {k[len("actions/direction/"):]: v for k, v in s.items() if k.startswith("actions/direction/")}
        top_d = max(dirs, key=dirs.get) if dirs else None
        if top_d is not None and dirs[top_d] >= th.dominant:
            out.append(f"one action dominates: no parsed action in {dirs[top_d]:.0%} of rollouts (format failure)"
                       if top_d == "none" else
                       f"one action dominates: direction={top_d!r} in {dirs[top_d]:.0%} of rollouts")
    return out


def step_line(s: Mapping[str, Any]) -> str:
    """The one-line summary of a GRPO step printed beside its progress: reward (and its answer / action
    parts), KL to the reference, parse rates."""
    def f(key: str, fmt: str = ".3f", scale: float = 1.0, unit: str = "") -> str:
        v = s.get(key)
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(scale * v, fmt) + unit

    return (f"reward {f('reward/total')} (ans {f('reward/r_ans')}, act {f('reward/r_act')}), KL {f('policy/kl', '.4f')}, "
            f"action ok {f('rollout/action_success_rate', '.0f', 100, '%')}, answer parses "
            f"{f('rollout/answer_parse_rate', '.0f', 100, '%')}")


class RunLogger:
    """W&B (offline unless WANDB_MODE says otherwise) + ``metrics.jsonl`` / ``samples.jsonl`` in out_dir.

    project / group / name: the W&B run's coordinates (docs/rl.md "Dashboards").
    """

    def __init__(self, out_dir: str | Path, project: str = "stockr1-grpo", group: str | None = None,
                 name: str | None = None, config: Mapping[str, Any] | None = None, use_wandb: bool = True,
                 thresholds: CollapseThresholds = CollapseThresholds()):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.thresholds, self.run, self.warnings = thresholds, None, []
        mode = os.environ.get("WANDB_MODE", "offline")
        if use_wandb and mode != "disabled":
            import wandb

            id_file = self.out_dir / "wandb_id.txt"  # same run id on resume
            run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:8]
            id_file.write_text(run_id)
            self.run = wandb.init(project=project, group=group, name=name, id=run_id, resume="allow", mode=mode,
                                  dir=str(self.out_dir), config=dict(config or {}), reinit="finish_previous")

    def log(self, step: int, metrics: Mapping[str, Any], n_rows: int = 4) -> list[str]:
        s = dict(metrics["scalars"])
        warns = collapse_warnings(s, len(metrics["rows"]), self.thresholds)
        s["warn/zero_spread"] = float(any("zero reward spread" in w for w in warns))
        s["warn/answer_dominates"] = float(any("answer dominates" in w for w in warns))
        s["warn/action_dominates"] = float(any("action dominates" in w for w in warns))
        for w in warns:
            log.warning("step %d: %s", step, w)
        self.warnings += [{"step": step, "warning": w} for w in warns]
        rows = list(metrics["rows"])[:n_rows]
        with open(self.out_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in s.items()}) + "\n")
        with open(self.out_dir / "samples.jsonl", "a") as f:
            for r in rows:
                f.write(json.dumps(r, default=str) + "\n")
        if self.run is not None:
            import wandb

            payload: dict[str, Any] = {k: v for k, v in s.items() if k != "step"}
            if rows:
                cols = list(rows[0])
                payload["samples"] = wandb.Table(columns=cols, data=[[str(r[c]) for c in cols] for r in rows])
            self.run.log(payload, step=step)
        return warns

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
