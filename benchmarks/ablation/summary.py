"""The numbers of `stockr1 bench ablation`'s ``summary.json``: intervals that carry the training-seed
variance, the verdicts read from them, and the training evidence of every GRPO row.

Intervals. A trained row's value varies with its training seed as well as with the questions it is
scored on (the tiny demo: about 3 points of action accuracy between seeds). Each interval here is
computed twice on the per-seed, per-question records ``[S, Q]``:

- ``seeds x questions``: the two-stage bootstrap (``stockr1.metrics.stats.hierarchical_bootstrap``):
  resample seeds, then questions, the same draws for both sides of a difference (paired by seed and
  question: GRPO seed s starts from SFT seed s, or all from one shared SFT run);
- ``questions``: the paired bootstrap over questions of the seed-averaged values (no seed variance);

and the wider of the two is the one reported (``ci_low`` / ``ci_high``; ``interval`` names it, both are
kept). With 3 seeds the seed stage alone can be narrower than the truth (a bootstrap of 3 values), so
taking the wider never reports less uncertainty than either source gives. Verdicts:
``stockr1.metrics.verdict`` (holds / tie / worse), never the means.

Training-query reward (the probe, ``rl.probe``) uses the same scheme on ``[S seeds, Q training queries]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stockr1.metrics.stats import PairedDiff, hierarchical_bootstrap, paired_bootstrap
from stockr1.metrics.verdict import HOLDS, TIE, WORSE, verdict

# summary metric -> per-question record key (benchmarks.ablation.per_item); protocol = a parsed answer and
# a parsed action in the same rollout (records written before it existed simply lack the row)
SUMMARY_KEYS = {"qa_acc": "correct", "action_acc": "action_score", "answer_parse_rate": "parsed",
                "protocol_rate": "protocol"}
TARGET_METRICS = ("qa_acc", "action_acc")  # the target: u-GRPO above SFT on either, beyond the interval
PROTOCOL_COST = 2.0  # points of protocol rate a GRPO row may cost against SFT
TRAINING_KEYS = ("reward/total", "reward/r_ans", "reward/r_act", "reward/r_prec", "reward/r_cons", "policy/kl",
                 "policy/clip_region", "reward/frac_zero_spread", "rollout/truncated", "advantage/sign_flip",
                 "uncertainty/weight_mean")


def per_seed_matrix(seeds: Mapping[int, Mapping[str, Any]], key: str, ids: Sequence[str]) -> dict[int, np.ndarray]:
    """seed -> [Q] per-question value (x100) of ``key``, questions in ``ids`` order."""
    out = {}
    for s, rec in seeds.items():
        by_id = {r["id"]: float(r[key]) for r in rec["items"]}
        out[int(s)] = 100.0 * np.array([by_id[i] for i in ids], dtype=np.float64)
    return out


def interval(a: Mapping[int, np.ndarray], b: Mapping[int, np.ndarray] | None = None, n_boot: int = 2000,
             seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Mean of ``a`` (b None) or paired ``a - b`` over the seeds both have: both intervals (module
    docstring) at ``level``, the wider reported as ``ci_low`` / ``ci_high`` with its verdict."""
    seeds = sorted(set(a) if b is None else set(a) & set(b))
    if not seeds:
        raise ValueError(f"no common seeds: {sorted(a)} vs {sorted(b or {})}")
    A = np.stack([np.asarray(a[s], dtype=np.float64) for s in seeds])
    B = np.zeros_like(A) if b is None else np.stack([np.asarray(b[s], dtype=np.float64) for s in seeds])
    h = hierarchical_bootstrap(A, B, n_boot=n_boot, level=level, seed=seed)
    q = paired_bootstrap(A.mean(0), B.mean(0), block=1, n_boot=n_boot, level=level, seed=seed, higher_is_better=True)
    return wider(h, q, len(seeds), level)


def wider(h: PairedDiff, q: PairedDiff, n_seeds: int, level: float) -> dict[str, Any]:
    """``interval``'s record from its two intervals, seeds x questions ``h`` and questions only ``q``: the
    wider reported as ``ci_low`` / ``ci_high`` with its verdict, both kept."""
    wide = h if (h.hi - h.lo) >= (q.hi - q.lo) else q
    return {"diff": h.diff, "ci_low": wide.lo, "ci_high": wide.hi, "verdict": verdict(h.diff, wide.lo, wide.hi),
            "interval": "seeds x questions" if wide is h else "questions", "n_seeds": n_seeds, "level": level,
            "ci_seeds_questions": [h.lo, h.hi], "ci_questions": [q.lo, q.hi]}


def _spread(vals: Sequence[float]) -> dict[str, float]:
    v = np.asarray(vals, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0}


def _probe(seeds: Mapping[int, Mapping[str, Any]]) -> dict[int, np.ndarray] | None:
    """seed -> [Q] probe reward per training query, or None without a probe."""
    got = {int(s): np.asarray(rec["probe_per_query_total"], dtype=np.float64) for s, rec in seeds.items()
           if "probe_per_query_total" in rec}
    return got if got and len(got) == len(seeds) else None


def summarise(per_seed: Mapping[str, Mapping[int, Mapping[str, Any]]], n_boot: int = 2000, seed: int = 0,
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``summary.json``: per row, each metric of ``SUMMARY_KEYS`` as {mean, std over seeds, ci_low, ci_high,
    interval, ...} (``interval``); paired differences (same seeds, questions, resampling) of every row
    minus SFT and of u-GRPO minus GRPO with their verdicts; the probe's training-query reward per row
    (mean, std over seeds) and its paired-by-query difference against SFT. ``meta`` (policy_base,
    sft_release_hash, sft_run_dir) is copied in."""
    rows = {k: v for k, v in per_seed.items() if v and all("items" in r for r in v.values())}
    if not rows:
        raise ValueError("no evaluated row carries per-question records")
    first = next(iter(next(iter(rows.values())).values()))
    ids = [r["id"] for r in first["items"]]
    keys = {m: k for m, k in SUMMARY_KEYS.items() if all(k in r for v in rows.values() for rec in v.values()
                                                         for r in rec["items"])}
    mats = {k: {m: per_seed_matrix(v, key, ids) for m, key in keys.items()} for k, v in rows.items()}
    out: dict[str, Any] = {**dict(meta or {}), "n_questions": len(ids),
                           "seeds": sorted({s for v in rows.values() for s in v}), "n_boot": n_boot,
                           "interval_method": "the wider of the seeds x questions bootstrap and the questions-only "
                                              "bootstrap (benchmarks/ablation/summary.py)",
                           "rows": {}, "differences": {}}
    for k, v in rows.items():
        row: dict[str, Any] = {}
        for m in keys:
            ci = interval(mats[k][m], None, n_boot, seed)
            row[m] = {**_spread([x.mean() for x in mats[k][m].values()]), "ci_low": ci["ci_low"],
                      "ci_high": ci["ci_high"], "interval": ci["interval"]}
        if all("probe_reward_total" in rec for rec in v.values()):
            for name in ("probe_reward_total", "probe_r_ans", "probe_answer_parse_rate"):
                row[name] = _spread([rec[name] for rec in v.values()])
        shares = [rec["probe_variance_share"] for rec in v.values() if rec.get("probe_variance_share")]
        if shares and len(shares) == len(v):  # which component the advantages are made of (rl.rewards.variance_shares)
            row["probe_variance_share"] = {c: float(np.nanmean([s[c] for s in shares])) for c in shares[0]}
        out["rows"][k] = row
    pairs = [(k, "sft") for k in rows if k != "sft" and "sft" in rows]
    if "grpo" in rows and "ugrpo" in rows:
        pairs.append(("ugrpo", "grpo"))
    for a, b in pairs:
        d = {m: interval(mats[a][m], mats[b][m], n_boot, seed) for m in keys}
        pa, pb = _probe(rows[a]), _probe(rows[b])
        if pa is not None and pb is not None and len({x.shape for x in [*pa.values(), *pb.values()]}) == 1:
            d["probe_reward_total"] = interval(pa, pb, n_boot, seed)
        out["differences"][f"{a}-{b}"] = d
    return out


def ordering(summary: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """The paper's ordering SFT < GRPO <= u-GRPO on ``metric``, link by link, each link's verdict read
    from its interval: the ordering holds only where both links hold, is worse where either is worse,
    else a tie."""
    diffs = summary.get("differences", {})
    links = {k: diffs[k][metric] for k in ("grpo-sft", "ugrpo-grpo") if metric in diffs.get(k, {})}
    if len(links) < 2:
        return {"metric": metric, "available": False}
    vs = [d["verdict"] for d in links.values()]
    overall = HOLDS if all(v == HOLDS for v in vs) else WORSE if WORSE in vs else TIE
    return {"metric": metric, "available": True, "verdict": overall,
            "links": {k: {x: d[x] for x in ("diff", "ci_low", "ci_high", "verdict", "interval")} for k, d in links.items()}}


def read_metric(path: Path, key: str) -> dict[int, float]:
    """step -> value of ``key`` in a ``metrics.jsonl``; a step logged twice (re-run after a resume)
    keeps its last record, as docs/rl.md says."""
    out: dict[int, float] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get(key) is not None and rec.get("step") is not None:
            out[int(rec["step"])] = float(rec[key])
    return out


def training_evidence(grpo_root: Path, variants: Sequence[str], seeds: Sequence[int],
                      window: int = 3) -> dict[str, dict[str, Any]]:
    """Per GRPO row, from each run's ``metrics.jsonl``: the mean over its first and last ``window`` steps of
    every ``TRAINING_KEYS`` metric it logged, as mean ± std over seeds (descriptive: the rise of the
    training reward between them is read without an interval; the probe's difference carries one)."""
    out: dict[str, dict[str, Any]] = {}
    for v in variants:
        row: dict[str, Any] = {}
        for key in TRAINING_KEYS:
            first, last = [], []
            for s in seeds:
                c = read_metric(grpo_root / f"{v}-s{s}" / "metrics.jsonl", key)
                if c:
                    steps = sorted(c)
                    first.append(float(np.mean([c[t] for t in steps[:window]])))
                    last.append(float(np.mean([c[t] for t in steps[-window:]])))
            if first:
                row[key] = {"first": _spread(first), "last": _spread(last), "n_seeds": len(first)}
        if row:
            out[v] = row
    return out
