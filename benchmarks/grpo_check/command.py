"""`stockr1 bench grpo_check --config configs/grpo_check/tiny.yaml --out DIR`: does GRPO raise the reward
of its own training queries?

Before any ablation, the optimiser must optimise: on a fixed set of ``n_queries`` (>= 8) training queries,
GRPO runs ``steps`` steps at the recipe's learning rate (``grpo.config`` + ``grpo.overrides``: the
recipe under test) once per training seed (>= 2). Every step trains on all ``n_queries`` queries
(``queries_per_step = n_queries``, the queries a fixed subset of the train split, the same for every seed),
from the same start (``sft_run_dir``, or the config's policy when null: the tiny random-init policy of
the slow test).

Verdict. Each policy, the start and every seed's end, is re-sampled on those queries (``rl.probe``:
``probe_repeats`` draws of ``probe_group_size`` rollouts per query, draw r with sampling seed
1000 (r + 1) + s for both the start and seed s's end, so the two share their random numbers) and scored
with the full Stock-R1 reward; a policy's per-query reward is the mean over its draws. Each draw is cached
on its own, so raising ``probe_repeats`` adds draws and keeps the earlier ones. The rise end − start per
(seed, query) gets the two-stage seeds x questions interval of ``benchmarks.ablation.summary.interval``
(the wider of it and the questions-only one), and the verdict of ``stockr1.metrics.verdict``: "holds" only
where the interval, which includes the seed spread, lies above 0.

Why it may not learn. Per step, mean ± std over seeds, from each run's ``metrics.jsonl``: the training
reward and each component, KL to the start, clip fractions, entropy, the share of groups with no reward
spread, R_ans's share of the within-group variance (``reward/var_share/r_ans``), advantage noise
(``rl.grpo.advantage_noise``), the truncation share (rollouts that hit ``max_new_tokens``); with the
recipe (lr, mu, beta, temperature, G, completion length) beside them.

Writes ``summary.json``, ``steps.json`` (seed -> step -> metric), ``training.png`` and a generated
``README.md``. Runs are cached under ``work_dir`` (git-ignored): a rerun resumes them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.ablation.command import sft_start
from benchmarks.ablation.summary import interval, read_metric, wider
from benchmarks.cache import Timings, cached
from benchmarks.grpo_check.report import STEP_KEYS, plot, readme
from llm.qa.core import YES
from rl.rewards import graded_answer
from rl.run_config import GRPORunConfig
from rl.setup import answer_contexts_run, answer_logodds_run, load_config, probe_run, run_grpo
from stockr1.config import (
    YamlConfig,
    as_plain,
    check_merged,
    config_from_dict,
    deep_update,
    load_yaml,
    parse_config_args,
    print_config,
)
from stockr1.manifest import git_commit
from stockr1.metrics.stats import stratified_bootstrap
from stockr1.outdir import command_line, output_dir, refuse_existing

MIN_QUERIES, MIN_SEEDS = 8, 2
PROBE_SEED = 1000  # probe sampling seeds 1000 + s: not the training seeds
CONTEXT_SEED = 999  # sampling seed of the start's fixed answer contexts (answer_contexts)


@dataclass(frozen=True)
class CheckGRPO:
    """The recipe under test: ``config`` with ``overrides`` merged in (the check sets the queries, steps, seed)."""

    config: str = "configs/grpo/tiny.yaml"
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GRPOCheckConfig(YamlConfig):
    """configs/grpo_check/*.yaml (each key documented there)."""

    grpo: CheckGRPO = field(default_factory=CheckGRPO)
    sft_run_dir: str | None = None  # the start; null = the config's policy (random init for tiny)
    n_queries: int = 8
    balance_yes_no: bool = False  # the queries: yes/no only, half gold Yes (rl.setup.select_train_queries)
    steps: int = 20
    seeds: tuple[int, ...] = (0, 1)
    probe_group_size: int = 8
    probe_repeats: int = 1  # independent draws of probe_group_size rollouts per query, pooled (probe_draws)
    answer_contexts: int = 0  # start rollouts per yes/no query whose answer log-odds every policy is read on (0: off)
    window: int = 3  # steps averaged at the start and the end of each training curve (descriptive)
    work_dir: str = "checkpoints/grpo_check"
    ckpt_every: int | None = None  # GRPO checkpoint interval (None = only at the end); a killed run resumes there
    threads: int = 2
    n_boot: int = 2000
    level: float = 0.95  # the verdict's interval level (lower alpha for a further look at the same seeds)
    earlier_look: str | None = None  # results dir of an earlier look at these seeds (fewer steps): alpha is split

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GRPOCheckConfig:
        cfg = config_from_dict(cls, d, "grpo_check config")
        if cfg.n_queries < MIN_QUERIES or len(set(cfg.seeds)) < MIN_SEEDS:
            raise ValueError(f"the check needs n_queries >= {MIN_QUERIES} and >= {MIN_SEEDS} distinct seeds (a seed "
                             f"spread), got {cfg.n_queries} and {list(cfg.seeds)}")
        if cfg.balance_yes_no and cfg.n_queries % 2:
            raise ValueError(f"balance_yes_no needs an even n_queries (half per gold), got {cfg.n_queries}")
        if cfg.ckpt_every is not None and cfg.ckpt_every < 1:
            raise ValueError(f"ckpt_every must be >= 1 (or null: at the end), got {cfg.ckpt_every}")
        if (cfg.steps < 1 or cfg.probe_group_size < 2 or cfg.probe_repeats < 1 or cfg.window < 1 or cfg.threads < 1
                or cfg.n_boot < 1 or cfg.answer_contexts < 0 or not 0.5 < cfg.level < 1):
            raise ValueError("steps, probe_repeats, window, threads, n_boot must be >= 1, probe_group_size >= 2, "
                             f"answer_contexts >= 0 and 0.5 < level < 1 (got level {cfg.level})")
        check_merged(GRPORunConfig, cfg.grpo.config, run_overrides(cfg, cfg.seeds[0]), "grpo_check grpo.overrides")
        return cfg


def run_overrides(cfg: GRPOCheckConfig, seed: int) -> dict[str, Any]:
    """The recipe's overrides plus the check's: the start (with the SFT run's own data section and context
    length when it saved its config, so GRPO reads the windows its qa.jsonl was made from), a fixed set of
    ``n_queries`` train queries (the QA seed picks them, not the training seed), all of them in every step,
    ``steps`` steps, the training seed."""
    sft_cfg = Path(cfg.sft_run_dir or "") / "config.yaml"
    start: dict[str, Any] = {"sft": {"run_dir": cfg.sft_run_dir}}
    if cfg.sft_run_dir and sft_cfg.is_file():
        saved = load_yaml(sft_cfg)
        start |= {k: saved[k] for k in ("data", "max_context_chars") if k in saved}
    return deep_update(deep_update(cfg.grpo.overrides, start), {
        "qa": {"max_train_queries": cfg.n_queries, **({"balance_yes_no": True} if cfg.balance_yes_no else {})},
        "train": {"queries_per_step": cfg.n_queries, "max_steps": cfg.steps, "seed": int(seed),
                  "ckpt_every": min(cfg.ckpt_every or cfg.steps, cfg.steps)}})


def probe_draws(cfg: GRPOCheckConfig, which: str, seed: int) -> list[tuple[str, int]]:
    """(cache file name, sampling seed) of each probe draw of ``which`` ("start" / "end") for training seed
    ``seed``. Draw 0 keeps the name and seed of a single-draw check (1000 + s), so its cache is reused."""
    g = cfg.probe_group_size
    return [(f"{which}-s{seed}-g{g}" + (f"-r{r}" if r else "") + ".json", PROBE_SEED * (r + 1) + seed)
            for r in range(cfg.probe_repeats)]


def pool_probes(draws: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One probe record from independent draws of the same size on the same queries: per-query rewards,
    the total, each component and rate are means over draws (equal weights: each draw has the same G);
    variance shares are the mean of the draws' finite ones."""
    if not draws:
        raise ValueError("no probe draws to pool")
    if len({len(d["per_query_total"]) for d in draws}) != 1 or len({d["group_size"] for d in draws}) != 1:
        raise ValueError("probe draws must share their queries and group size to be pooled")
    if len(draws) == 1:
        return dict(draws[0])
    out: dict[str, Any] = {"n_queries": draws[0]["n_queries"], "group_size": draws[0]["group_size"] * len(draws),
                           "seed": [d["seed"] for d in draws], "n_draws": len(draws),
                           "per_query_total": np.mean([d["per_query_total"] for d in draws], axis=0).tolist()}
    for k, v in draws[0].items():
        if k not in out and isinstance(v, int | float) and all(d.get(k) is not None for d in draws):
            out[k] = float(np.mean([d[k] for d in draws]))
    shares = _mean_shares([d.get("variance_share") or {} for d in draws])
    if shares:
        out["variance_share"] = shares
    per_query = [d["per_query"] for d in draws if d.get("per_query")]  # draws cached before rl.probe kept them lack it
    if per_query:
        out["per_query"] = [_pool_query(rows) for rows in zip(*per_query, strict=True)]
        out["per_query_draws"] = len(per_query)
    return out


def _pool_query(rows: tuple[Mapping[str, Any], ...]) -> dict[str, Any]:
    """One query's record from several draws: the answers concatenated, each component's mean over the draws
    that define it."""
    out: dict[str, Any] = {"gold": rows[0]["gold"], "answer_type": rows[0]["answer_type"],
                           "answers": [a for r in rows for a in r["answers"]]}
    for k in rows[0]:
        if k not in out:
            vals = [r[k] for r in rows if r.get(k) is not None]
            out[k] = float(np.mean(vals)) if vals else None
    return out


def read_steps(metrics: Path) -> dict[str, dict[int, float]]:
    """``STEP_KEYS`` -> step -> value from a run's ``metrics.jsonl``. rl/logging.py logs a share only for
    answers that occurred, so a Yes/No share is 0 at a step that logged its answer mix without it."""
    out = {k: c for k in STEP_KEYS if (c := read_metric(metrics, k))}
    logged = read_metric(metrics, "answers/top_share")
    for k in ("answers/share/yes", "answers/share/no"):
        if logged:
            out[k] = {t: out.get(k, {}).get(t, 0.0) for t in logged}
    return out


def run_check(cfg: GRPOCheckConfig, log=print) -> dict[str, Any]:
    """Train every seed, probe the start and each end; returns {probe, steps, timings, recipe, start, logodds}.
    ``timings``: the wall seconds of every stage when it ran (``benchmarks.cache``), cached ones included."""
    earlier = read_earlier_look(cfg)  # refused before hours of training, not after
    work = Path(cfg.work_dir)
    sft = Path(cfg.sft_run_dir) if cfg.sft_run_dir else None
    probes: dict[str, dict[int, Any]] = {"start": {}, "end": {}}
    steps: dict[int, dict[str, dict[int, float]]] = {}
    timings = Timings(work / "timings.json")
    for s in cfg.seeds:
        over = run_overrides(cfg, s)
        run_dir = work / f"s{s}"
        if not (run_dir / "summary.json").exists():
            log(f"[grpo_check] GRPO seed {s}: {cfg.steps} steps on {cfg.n_queries} queries -> {run_dir}")
            t0 = time.perf_counter()
            run_grpo(cfg.grpo.config, run=f"s{s}", out_root=work, resume=True, sft_dir=sft, overrides=over,
                     use_wandb=False)
            timings.record(f"grpo/s{s}", time.perf_counter() - t0)  # a resumed run: this invocation's part
        for which, policy_dir in (("start", None), ("end", run_dir)):
            probes[which][s] = pool_probes([cached(
                work / "probe" / name,
                lambda policy_dir=policy_dir, over=over, seed=seed: probe_run(cfg.grpo.config, policy_dir, sft,
                                                                              cfg.probe_group_size, seed, over),
                timings, f"probe/{name.removesuffix('.json')}")
                for name, seed in probe_draws(cfg, which, s)])
        steps[s] = read_steps(run_dir / "metrics.jsonl")
    logodds = read_logodds(cfg, work, sft, timings) if cfg.answer_contexts else None
    full = load_config(cfg.grpo.config, run_overrides(cfg, cfg.seeds[0]))
    t, r = full.get("train", {}), full.get("rollout", {})
    loss = t.get("loss", {})
    recipe = {"lr": t.get("lr"), "warmup_steps": t.get("warmup_steps"), "mu": t.get("num_iterations"),
              "beta": loss.get("beta"), "loss_type": loss.get("loss_type"), "group_size": t.get("group_size"),
              "queries_per_step": t.get("queries_per_step"), "temperature": r.get("temperature"),
              "max_new_tokens": r.get("max_new_tokens"), "lora_r": t.get("lora_r"),
              "uncertainty": t.get("uncertainty", {}).get("enabled"), "credit": t.get("credit") or {},
              "adam_betas": t.get("adam_betas"), "adam_eps": t.get("adam_eps"),
              "rows_lr": t.get("rows_lr"), "rows_adam_eps": t.get("rows_adam_eps"), "precision": t.get("precision"),
              "merge_lora": r.get("merge_lora"), "twin_dtype": r.get("twin_dtype")}
    start = sft_start(sft, False) if sft is not None else {"policy_base": str(full.get("policy", {}).get(
        "name_or_path")) + " (config's policy, random init)", "sft_release_hash": None, "sft_run_dir": None}
    return {"probe": probes, "steps": steps, "timings": dict(timings), "recipe": recipe, "start": start,
            "logodds": logodds, "earlier_look": earlier}


def read_logodds(cfg: GRPOCheckConfig, work: Path, sft: Path | None, timings: Timings) -> dict[str, Any]:
    """The start's fixed answer contexts (``rl.probe.answer_contexts``, sampling seed ``CONTEXT_SEED``) and
    every policy's log-odds of Yes on them: {contexts (without their token ids), start [C], end {seed: [C]}},
    each cached under ``work_dir/probe``."""
    over = run_overrides(cfg, cfg.seeds[0])  # the queries and rollout settings do not depend on the seed
    g = cfg.answer_contexts
    ctx = start_contexts(cfg, work, sft, timings)
    out: dict[str, Any] = {"contexts": [{k: v for k, v in c.items() if k != "ids"} for c in ctx], "end": {}}
    for s in (None, *cfg.seeds):
        name = "logodds-" + ("start" if s is None else f"end-s{s}") + f"-g{g}"
        vals = cached(work / "probe" / f"{name}.json", lambda s=s: {"logodds": answer_logodds_run(
            cfg.grpo.config, None if s is None else work / f"s{s}", sft, ctx, over)}, timings, name)["logodds"]
        if s is None:
            out["start"] = vals
        else:
            out["end"][s] = vals
    return out


def start_contexts(cfg: GRPOCheckConfig, work: Path, sft: Path | None, timings: Timings) -> list[dict[str, Any]]:
    """The start's fixed answer contexts (``rl.probe.answer_contexts``: ``cfg.answer_contexts`` rollouts per
    yes/no query, sampling seed ``CONTEXT_SEED``), token ids included, cached under ``work/probe`` (shared by
    the check's log-odds and ``bench grpo_ceiling``)."""
    g = cfg.answer_contexts
    over = run_overrides(cfg, cfg.seeds[0])
    return cached(work / "probe" / f"answer-contexts-g{g}.json",
                  lambda: {"contexts": answer_contexts_run(cfg.grpo.config, sft, g, CONTEXT_SEED, over)},
                  timings, f"answer-contexts-g{g}")["contexts"]


def logodds_change(logodds: Mapping[str, Any] | None, seeds: list[int], n_boot: int,
                   level: float = 0.95) -> dict[str, dict[str, Any]] | None:
    """gold ("yes" / "no") -> the change end − start of the log-odds of Yes at each fixed context's decision
    point (``rl.probe.answer_contexts``), per (seed, query) the mean over the query's contexts, with ``interval`` (seeds x queries;
    its verdict reads "the log-odds of Yes rose"), and the mean log-odds at the start and the end. As
    ``yes_share_change`` but teacher-forced: no sampling noise beyond the choice of contexts. A gold with
    fewer than 2 queries is left out; None without log-odds."""
    if not logodds:
        return None
    ctx = logodds["contexts"]
    start = np.asarray(logodds["start"], dtype=np.float64)
    end = {int(s): np.asarray(v, dtype=np.float64) for s, v in logodds["end"].items()}
    out = {}
    for gold in ("yes", "no"):
        queries = sorted({c["query"] for c in ctx if str(c["gold"]).strip().lower() == gold})
        if len(queries) < 2:
            continue
        rows = [np.array([i for i, c in enumerate(ctx) if c["query"] == q]) for q in queries]
        s0 = np.array([start[r].mean() for r in rows])
        ends = {s: np.array([end[s][r].mean() for r in rows]) for s in seeds}
        out[gold] = {"n_queries": len(queries), "n_contexts": int(sum(len(r) for r in rows)),
                     "start": float(s0.mean()), "end": float(np.mean(list(ends.values()))),
                     **interval(ends, dict.fromkeys(seeds, s0), n_boot, level=level)}
    return out


def logodds_split(logodds: Mapping[str, Any] | None, seeds: list[int], n_boot: int,
                  level: float = 0.95) -> dict[str, dict[str, Any]] | None:
    """The log-odds change split in two, golds weighted equally: ``shared`` = (Δ_Yes + Δ_No) / 2, the shift
    every query took whatever its gold (a prior), and ``toward_gold`` = (Δ_Yes − Δ_No) / 2, how far the
    queries moved toward their own gold with that shift cancelled; Δ_g is ``logodds_change``'s diff on gold
    g. Each with ``interval``'s fields, from a bootstrap stratified by gold (``stratified_interval``), so
    every resample keeps the golds' counts and the shared shift stays cancelled; ``per_seed``: seed ->
    that seed's ``shared`` and ``toward_gold`` (its queries' means, no interval). None unless both golds
    have >= 2 queries."""
    if not logodds:
        return None
    ctx = logodds["contexts"]
    golds = {c["query"]: str(c["gold"]).strip().lower() for c in ctx}
    by_gold = {g: sorted(q for q, v in golds.items() if v == g) for g in ("yes", "no")}
    if min(len(v) for v in by_gold.values()) < 2:
        return None

    start = np.asarray(logodds["start"], dtype=np.float64)
    end = {int(s): np.asarray(v, dtype=np.float64) for s, v in logodds["end"].items()}

    def change(g: str) -> np.ndarray:
        """[S, Q_g] end − start per seed and query (the query's mean over its contexts)."""
        rows = [np.array([i for i, c in enumerate(ctx) if c["query"] == q]) for q in by_gold[g]]
        return np.stack([np.array([end[s][r].mean() - start[r].mean() for r in rows]) for s in seeds])

    d_yes, d_no = change("yes"), change("no")
    counts = {"n_yes": d_yes.shape[1], "n_no": d_no.shape[1]}
    # each seed's own split: with two seeds a shared shift near 0 can be two large moves of opposite sign
    per_seed = {str(s): {"shared": float(0.5 * (d_yes[k].mean() + d_no[k].mean())),
                         "toward_gold": float(0.5 * (d_yes[k].mean() - d_no[k].mean()))}
                for k, s in enumerate(seeds)}
    return {"shared": {**stratified_interval(d_yes, d_no, 0.5, 0.5, n_boot, level), **counts},
            "toward_gold": {**stratified_interval(d_yes, d_no, 0.5, -0.5, n_boot, level), **counts},
            "per_seed": per_seed}


def stratified_interval(a: np.ndarray, b: np.ndarray, ka: float, kb: float, n_boot: int,
                         level: float) -> dict[str, Any]:
    """``ka mean(a) + kb mean(b)`` for two strata of queries ``a`` [S, Qa] and ``b`` [S, Qb] that share their
    seeds, as ``interval``'s record: the seeds x queries and the queries-only stratified bootstraps
    (``stockr1.metrics.stats.stratified_bootstrap``), the wider reported with its verdict."""
    h = stratified_bootstrap([a, b], [ka, kb], n_boot, level)
    q = stratified_bootstrap([a.mean(0, keepdims=True), b.mean(0, keepdims=True)], [ka, kb], n_boot, level)
    return wider(h, q, a.shape[0], level)


def _spread(vals: list[float]) -> dict[str, float]:
    v = np.asarray(vals, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0, "n": len(v)}


def summarise(res: Mapping[str, Any], cfg: GRPOCheckConfig) -> dict[str, Any]:
    """summary.json: the rise of the training-query reward (end − start, per seed and query) with its
    interval and verdict, per-component rises, per-step mean ± std over seeds of every ``STEP_KEYS``
    metric, and the training curve's first vs last ``window`` steps per seed (descriptive)."""
    start, end = res["probe"]["start"], res["probe"]["end"]
    seeds = sorted(int(s) for s in end)
    q = {s: np.asarray(end[s]["per_query_total"]) for s in seeds}
    q0 = {s: np.asarray(start[s]["per_query_total"]) for s in seeds}
    rise = interval(q, q0, cfg.n_boot, level=cfg.level)
    comps = component_rises(start, end, seeds, cfg.n_boot, cfg.level)
    per_step: dict[str, dict[int, dict[str, float]]] = {}
    for k in STEP_KEYS:
        by_seed = [res["steps"][s][k] for s in seeds if k in res["steps"].get(s, {})]
        if by_seed:
            common = sorted(set.intersection(*(set(c) for c in by_seed)))
            per_step[k] = {t: _spread([c[t] for c in by_seed]) for t in common}
    curve = {}
    for s in seeds:
        c = res["steps"].get(s, {}).get("reward/total", {})
        if c:
            ts = sorted(c)
            curve[s] = {"first": float(np.mean([c[t] for t in ts[:cfg.window]])),
                        "last": float(np.mean([c[t] for t in ts[-cfg.window:]]))}
    return {**res["start"], "recipe": res["recipe"], "n_queries": cfg.n_queries, "steps": cfg.steps, "seeds": seeds,
            "probe_group_size": cfg.probe_group_size, "probe_repeats": cfg.probe_repeats, "n_boot": cfg.n_boot, "window": cfg.window,
            "threads": cfg.threads, "level": cfg.level, "earlier_look": res.get("earlier_look"),
            "per_query_draws": min(int(r.get("per_query_draws", 1)) for r in [*start.values(), *end.values()]),
            "rise": rise, "rise_components": comps, "curve": curve, "per_step": per_step,
            "start_reward": _spread([start[s]["reward_total"] for s in seeds]),
            "end_reward": _spread([end[s]["reward_total"] for s in seeds]),
            "start_variance_share": _mean_shares([start[s].get("variance_share") or {} for s in seeds]),
            "per_query": per_query_answers(start, end, seeds),
            "teaching_groups": teaching_groups(start, seeds, cfg.probe_group_size),
            "yes_share_change": yes_share_change(start, end, seeds, cfg.n_boot, cfg.level),
            "answer_contexts": cfg.answer_contexts, "context_seed": CONTEXT_SEED,
            "logodds_change": logodds_change(res.get("logodds"), seeds, cfg.n_boot, cfg.level),
            "logodds_split": logodds_split(res.get("logodds"), seeds, cfg.n_boot, cfg.level)}


def component_rises(start: Mapping[int, Mapping[str, Any]], end: Mapping[int, Mapping[str, Any]], seeds: list[int],
                    n_boot: int, level: float = 0.95) -> dict[str, dict[str, Any]]:
    """Reward component -> its rise end − start: ``mean`` / ``std`` over seeds of the probe's component mean,
    and, where every probe record kept per-query components, ``interval`` over (seed, query) as the verdict's
    (seeds x queries, the wider of the two) on the ``n_queries`` queries where that component is defined for
    every seed and both policies (R_cons and R_prec are undefined on a query none of whose rollouts wrote a
    valid action). A small std over seeds says little when the queries disagree: the interval reads both."""
    recs = [start[s] for s in seeds] + [end[s] for s in seeds]
    per_query = all(r.get("per_query") for r in recs)
    out: dict[str, dict[str, Any]] = {}
    for name in ("r_ans", "r_act", "r_prec", "r_cons"):
        d = [end[s][f"reward/{name}"] - start[s][f"reward/{name}"] for s in seeds
             if end[s].get(f"reward/{name}") is not None and start[s].get(f"reward/{name}") is not None]
        if not d:
            continue
        out[name] = _spread(d)
        if not per_query:
            continue
        val = {w: {s: np.array([np.nan if q.get(name) is None else q[name] for q in side[s]["per_query"]])
                   for s in seeds} for w, side in (("start", start), ("end", end))}
        ok = ~np.any([np.isnan(val[w][s]) for w in val for s in seeds], axis=0)
        if ok.sum() >= 2:
            out[name] |= {"n_queries": int(ok.sum()),
                          "interval": interval({s: val["end"][s][ok] for s in seeds},
                                               {s: val["start"][s][ok] for s in seeds}, n_boot, level=level)}
    return out


def read_earlier_look(cfg: GRPOCheckConfig) -> dict[str, Any] | None:
    """The earlier look at the same seeds (``cfg.earlier_look``: its results dir) as {dir, steps, level, seeds,
    rise}, for the README's alpha accounting; None without one. The looks must share their seeds, and the
    earlier one must be a first look (the bound counts two)."""
    if cfg.earlier_look is None:
        return None
    path = Path(cfg.earlier_look) / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(f"earlier_look: {path} not found (the results dir of the earlier look at these seeds)")
    prev = json.loads(path.read_text())
    if sorted(prev["seeds"]) != sorted(cfg.seeds) or prev["steps"] >= cfg.steps:
        raise ValueError(f"earlier_look {cfg.earlier_look}: an earlier look has the same seeds and fewer steps, got "
                         f"seeds {prev['seeds']} at {prev['steps']} steps vs {list(cfg.seeds)} at {cfg.steps}")
    if prev.get("earlier_look"):  # the README's bound adds two alphas; a third look needs its own accounting
        raise ValueError(f"earlier_look {cfg.earlier_look} is itself a further look (at {prev['earlier_look']['dir']}): "
                         "only a second look is accounted for")
    return {"dir": cfg.earlier_look, "steps": prev["steps"], "level": prev.get("level", prev["rise"].get("level", 0.95)),
            "seeds": prev["seeds"], "rise": {k: prev["rise"][k] for k in ("diff", "ci_low", "ci_high", "verdict")}}


def _yes_share(answers: list[Any]) -> float:
    """Share of a yes/no query's answers that R_ans grades as Yes (an unread answer counts as not Yes)."""
    return sum(graded_answer(a, "yes_no") == YES for a in answers) / max(1, len(answers))


def yes_share_change(start: Mapping[int, Mapping[str, Any]], end: Mapping[int, Mapping[str, Any]],
                     seeds: list[int], n_boot: int, level: float = 0.95) -> dict[str, dict[str, Any]] | None:
    """gold ("yes" / "no") -> the change end − start of the share of Yes answers on the yes/no training
    queries with that gold, per (seed, query), with ``interval`` (seeds x queries; its verdict reads "the Yes
    share rose"). It tells an answer learnt per query (Yes up on gold-Yes, down on gold-No) from one prior
    shared by all queries (both the same way). A gold with fewer than 2 queries has no interval and is left
    out; None when some probe record has no per-query answers."""
    recs = [start[s] for s in seeds] + [end[s] for s in seeds]
    if not all(r.get("per_query") for r in recs):
        return None
    out = {}
    for gold in ("yes", "no"):
        idx = [i for i, q in enumerate(start[seeds[0]]["per_query"])
               if q["answer_type"] == "yes_no" and str(q["gold"]).strip().lower() == gold]
        if len(idx) < 2:
            continue
        share = {w: {s: np.array([_yes_share(side[s]["per_query"][i]["answers"]) for i in idx]) for s in seeds}
                 for w, side in (("start", start), ("end", end))}
        out[gold] = {"n_queries": len(idx), "start": float(np.mean(list(share["start"].values()))),
                     "end": float(np.mean(list(share["end"].values()))),
                     **interval(share["end"], share["start"], n_boot, level=level)}
    return out


def per_query_answers(start: Mapping[int, Mapping[str, Any]], end: Mapping[int, Mapping[str, Any]],
                      seeds: list[int]) -> list[dict[str, Any]] | None:
    """Per training query, over every seed: its gold answer and type, R_ans of the start and the end (mean
    over seeds) and how often each answer was given as R_ans grades it (``rl.rewards.graded_answer``; counts
    over seeds and rollouts); None when some probe record has no per-query answers (a draw cached before rl.probe kept them)."""
    recs = [start[s] for s in seeds] + [end[s] for s in seeds]
    if not all(r.get("per_query") for r in recs):
        return None
    out = []
    for i, q in enumerate(start[seeds[0]]["per_query"]):
        row: dict[str, Any] = {"gold": q["gold"], "answer_type": q["answer_type"]}
        for which, side in (("start", start), ("end", end)):
            qs = [side[s]["per_query"][i] for s in seeds]
            r_ans = [x["r_ans"] for x in qs if x.get("r_ans") is not None]
            row[f"{which}_r_ans"] = float(np.mean(r_ans)) if r_ans else None
            counts: dict[str, int] = {}
            for x in qs:
                for a in x["answers"]:
                    key = graded_answer(a, q["answer_type"])
                    counts[key] = counts.get(key, 0) + 1
            row[f"{which}_answers"] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
        out.append(row)
    return out


def teaching_groups(start: Mapping[int, Mapping[str, Any]], seeds: list[int],
                    group_size: int) -> dict[str, dict[str, int]] | None:
    """gold ("yes" / "no") -> {"groups", "mixed"}: the start's probe groups of ``group_size`` rollouts on the
    yes/no queries with that gold (each seed's pooled draws, cut in draw order) and how many of them hold the
    gold answer and another one: the groups where R_ans has spread, which a step learns its answer from, each
    pushing toward its own gold. A diagnostic added on 2026-12-06; None without per-query answers."""
    if not all(start[s].get("per_query") for s in seeds):
        return None
    out: dict[str, dict[str, int]] = {}
    for s in seeds:
        for q in start[s]["per_query"]:
            gold = str(q["gold"]).strip().lower()
            if q.get("answer_type") != "yes_no" or gold not in ("yes", "no"):
                continue
            hit = [str(a).strip().lower() == gold for a in q["answers"]]
            for k in range(0, len(hit) - group_size + 1, group_size):
                g = hit[k:k + group_size]
                row = out.setdefault(gold, {"groups": 0, "mixed": 0})
                row["groups"] += 1
                row["mixed"] += int(any(g) and not all(g))
    return out or None


def _mean_shares(shares: list[Mapping[str, float]]) -> dict[str, float]:
    """Per component, the mean of the finite variance shares (a probe whose groups had no spread has none)."""
    out = {}
    for c in shares[0] if shares else {}:
        vals = [s[c] for s in shares if s.get(c) is not None and np.isfinite(s[c])]
        if vals:
            out[c] = float(np.mean(vals))
    return out


def write_results(res: Mapping[str, Any], cfg: GRPOCheckConfig, out: Path, config_path: str | None,
                  command: str | None) -> dict[str, Any]:
    """summary.json, steps.json, training.png and README.md under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(res, cfg)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "steps.json").write_text(json.dumps(res["steps"], indent=1))
    figures = ["training.png"] if plot(summary, out / "training.png") else []
    info = {"config_path": config_path, "config": as_plain(cfg), "command": command, "commit": git_commit(),
            "date": datetime.date.today().isoformat(), "timings_s": res["timings"], "figures": figures}
    (out / "run_info.json").write_text(json.dumps(info, indent=1, default=str))
    (out / "README.md").write_text(readme(summary, info))
    return summary


def check_args(ap: argparse.ArgumentParser, argv: list[str] | None
               ) -> tuple[argparse.Namespace, GRPOCheckConfig, list[str]] | None:
    """The grpo_check family's common command line (grpo_check, grpo_credit, grpo_ceiling): ``--config`` and
    its dotted overrides read into a ``GRPOCheckConfig``; None once ``--print-config`` has printed it; an
    argparse error without ``--out``. Returns (args, config, argv as given)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args, over = parse_config_args(ap, argv)
    cfg = GRPOCheckConfig.from_yaml(args.config, over)
    if args.print_config:
        print_config(cfg)
        return None
    if args.out is None:
        ap.error("--out is required")
    return args, cfg, argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench grpo_check", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/grpo_check/tiny.yaml", help="check config (configs/grpo_check/)")
    ap.add_argument("--out", default=None, help="result directory; refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out (the runs in the work dir are reused)")
    parsed = check_args(ap, argv)
    if parsed is None:
        return 0
    args, cfg, argv = parsed
    refuse_existing(args.out, args.overwrite, f" (the GRPO runs are cached in {cfg.work_dir}: a rerun reuses them)")
    torch.set_num_threads(cfg.threads)
    res = run_check(cfg)
    with output_dir(args.out, args.overwrite) as out:
        s = write_results(res, cfg, out, args.config, command_line("stockr1 bench grpo_check", argv))
    r = s["rise"]
    print(f"training-query reward end - start {r['diff']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]: {r['verdict']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
