"""`stockr1 bench ablation [--config configs/ablation/demo.yaml] [--seeds 0 1 2] --out DIR`

Stock-R1 Table 3 / Fig. 4 at demo scale: SFT only, + GRPO (w = 1), + u-GRPO, and u-GRPO without
R_act / without R_prec, each evaluated on the same held-out QA slice, mean ± std over seeds.

Per seed s (``sft.per_seed: true``, the default): one joint SFT run (``llm.sft.run_sft``, policy init
and batch order seeded by s; QA items, decoder warm-up and traces shared with the first seed's run
through SFT's ``prepare_from``), then every GRPO variant starts from *that* SFT checkpoint
(``rl.setup.run_grpo``, GRPO seed s) with the same budget (``grpo.overrides``). So the seed spread of
every row includes the SFT's own seed variance, and within a seed the rows differ only by the RL
variant. With ``sft.per_seed: false`` one SFT (seed = first seed) is reused by all seeds, and the SFT
row has zero spread (greedy decoding is deterministic). With ``sft.run_dir`` a finished SFT run
(``stockr1 sft``) is the shared start of every seed and variant and no SFT is trained here.

Evaluation: ``benchmarks.qa.evaluate_run`` (the QA benchmark's greedy rollouts through the one
rollout engine and its grader) on a family-balanced slice of the first SFT run's test questions,
plus action accuracy = mean ``forecast_action.score.score_action(emitted, a*)`` with a* = g(realised
future) (a missing or unparsable action scores 0), the field-level score R_act uses.

Every stage caches its result under ``--work`` (git-ignored), so an interrupted benchmark resumes:
finished SFT/GRPO runs and evaluations are reused, an unfinished GRPO run continues from ``last.ckpt``.
Writes ``summary.json`` (``benchmarks.ablation.summary``: per row and per paired difference, intervals
that include the training-seed variance and the verdicts read from them; the probe's training-query
reward; each GRPO row's training evidence from its ``metrics.jsonl``; ``policy_base`` and
``sft_release_hash`` of the SFT start), ``metrics.json`` (variant -> metric -> mean, ``<metric>_std``,
``n_seeds``), ``per_seed.json``, ``table.md`` (Table 3 layout), ``training.png``, ``entropy.png``
(Fig. 4), ``run_info.json`` (config, wall seconds of every stage as recorded in
``<work>/timings.json`` when it ran, the ordering verdicts) and ``README.md``
(``benchmarks.ablation.report``: the targets, and where they are missed, which component blocks them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.ablation.plots import entropy_curves, plot_entropy, plot_training
from benchmarks.ablation.report import readme
from benchmarks.ablation.summary import ordering, summarise, training_evidence
from benchmarks.cache import Timings, cached
from benchmarks.qa.command import evaluate_run
from forecast_action.derive import ActionThresholds, actions_from_windows
from forecast_action.score import score_action
from llm.build import load_data
from llm.qa import QAConfig, load_items
from llm.qa.answers import is_correct, normalize_answer
from llm.qa.core import FAMILY_TITLES
from llm.sft import run_fingerprint, run_sft
from llm.sft_config import SFTRunConfig
from rl.run_config import GRPORunConfig
from rl.setup import load_config, probe_run, run_grpo
from rl.trainer import GRPOTrainConfig
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
from stockr1.outdir import command_line, output_dir, refuse_existing
from stockr1.progress import Progress
from stockr1.types import train_only

FAMILY_COLS = ("forecast", "event", "fundamental", "news", "multi_signal")
PROBE_METRICS = ("probe_reward_total", "probe_r_ans", "probe_answer_parse_rate")
METRICS = (*FAMILY_COLS, "overall", "action_accuracy", "action_success_rate", "answer_parse_rate", *PROBE_METRICS)


@dataclass(frozen=True)
class Variant:
    """One Table 3 row. ``grpo`` = None: the SFT checkpoint itself; else overrides for ``run_grpo``
    that set *both* switches explicitly (uncertainty weight, reward components), so a base config
    that changes its defaults cannot silently change what a row means."""

    key: str
    label: str
    grpo: Mapping[str, Any] | None


ALL_REWARDS = ("r_ans", "r_act", "r_prec", "r_cons")
PROBE_SEED = 1000  # probe seeds 1000 + s: not the training seeds


def _rl(weighted: bool, drop: str | None = None) -> dict[str, Any]:
    comps = [c for c in ALL_REWARDS if c != drop]
    return {"train": {"uncertainty": {"enabled": weighted}, "reward_components": comps}}


VARIANTS: tuple[Variant, ...] = (
    Variant("sft", "SFT w/ thinking", None),
    Variant("grpo", "+ GRPO (w = 1)", _rl(False)),
    Variant("ugrpo", "+ u-GRPO", _rl(True)),
    Variant("ugrpo_no_ract", "w/o R_act (Actions)", _rl(True, "r_act")),
    Variant("ugrpo_no_rprec", "w/o R_prec (Forecast)", _rl(True, "r_prec")),
    Variant("ugrpo_no_rcons", "w/o R_cons (Consistency)", _rl(True, "r_cons")),
)
VARIANTS_BY_KEY = {v.key: v for v in VARIANTS}


@dataclass(frozen=True)
class AblationSFT:
    """The SFT start: ``config`` (trained per seed with ``overrides`` merged in) or a finished ``run_dir``."""

    config: str = "configs/sft/tiny.yaml"
    run_dir: str | None = None
    per_seed: bool = True
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AblationGRPO:
    """Every GRPO row: ``config`` with the shared budget ``overrides`` merged in."""

    config: str = "configs/grpo/tiny.yaml"
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AblationEval:
    n: int = 200
    max_new_tokens: int = 640
    split: str = "test"  # "val" only to choose the recipe

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"eval.n and eval.max_new_tokens must be >= 1, got {self.n}, {self.max_new_tokens}")
        if self.split not in ("val", "test"):
            raise ValueError(f"eval.split must be 'val' (recipe choice) or 'test', got {self.split!r}")


@dataclass(frozen=True)
class AblationProbe:
    group_size: int = 4  # rollouts per GRPO training query and seed (0 = no probe)

    def __post_init__(self) -> None:
        if self.group_size < 0:
            raise ValueError(f"probe.group_size must be >= 0, got {self.group_size}")


@dataclass(frozen=True)
class AblationConfig(YamlConfig):
    """configs/ablation/*.yaml (each key documented there)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    threads: int = 2
    work_dir: str = "checkpoints/ablation"
    variants: tuple[str, ...] = tuple(v.key for v in VARIANTS)
    sft: AblationSFT = field(default_factory=AblationSFT)
    grpo: AblationGRPO = field(default_factory=AblationGRPO)
    eval: AblationEval = field(default_factory=AblationEval)
    # re-sample every policy on the GRPO training queries (rl.probe): G rollouts per query and seed
    probe: AblationProbe = field(default_factory=AblationProbe)
    n_boot: int = 2000  # paired bootstrap resamples over questions
    wandb: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AblationConfig:
        """Strict, and the SFT / GRPO ``overrides`` are checked merged into their base configs now."""
        cfg = config_from_dict(cls, d, "ablation config")
        unknown = sorted(set(cfg.variants) - set(VARIANTS_BY_KEY))
        if unknown:
            raise ValueError(f"unknown variants {unknown}; valid: {list(VARIANTS_BY_KEY)}")
        if len(cfg.seeds) < 1:
            raise ValueError("seeds must list at least one seed")
        if cfg.threads < 1 or cfg.n_boot < 1:
            raise ValueError(f"threads and n_boot must be >= 1, got {cfg.threads}, {cfg.n_boot}")
        check_merged(SFTRunConfig, cfg.sft.config, cfg.sft.overrides, "ablation config sft.overrides")
        check_merged(GRPORunConfig, cfg.grpo.config, cfg.grpo.overrides, "ablation config grpo.overrides")
        return cfg


# ------------------------------------------------------------------------------ config resolution
def sft_overrides(cfg: AblationConfig, seed: int, share_from: Path | None) -> dict[str, Any]:
    """Overrides of the SFT config for ``seed``: budget, seed, and (after the first seed) the shared
    QA items / decoder warm-up / traces of the first seed's run."""
    over = deep_update(cfg.sft.overrides, {"run": f"s{seed}", "train": {"seed": int(seed)}})
    if share_from is not None:
        over["prepare_from"] = str(share_from)
    return over


def grpo_overrides(cfg: AblationConfig, variant: Variant, seed: int, sft_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides passed to ``run_grpo`` for one (variant, seed): the shared budget, the SFT run's
    data/QA sections (GRPO must draw its training queries from the items the SFT saw), the seed, the
    W&B group, then the variant's switches last so nothing can undo them."""
    if variant.grpo is None:
        raise ValueError(f"variant {variant.key!r} has no GRPO stage")
    # every QAConfig field spelled out: a key of the GRPO base config's qa section (merged, not
    # replaced, by run_grpo) must not change which items are generated
    qa = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(QAConfig()).items()}
    over = deep_update(cfg.grpo.overrides, {
        "data": dict(sft_cfg.get("data", {})),
        "max_context_chars": sft_cfg.get("max_context_chars"),
        "qa": {**qa, **dict(sft_cfg.get("qa", {})), **dict(cfg.grpo.overrides.get("qa", {}))},
        "seed": int(seed),
        "train": {"seed": int(seed)},
        "wandb": {"group": f"ablation/{variant.key}"},
    })
    return deep_update(over, variant.grpo)


def resolved_grpo(cfg: AblationConfig, variant: Variant, seed: int, sft_cfg: Mapping[str, Any]):
    """(full GRPO config dict, ``GRPOTrainConfig``) exactly as ``run_grpo`` will build them."""
    full = load_config(cfg.grpo.config, grpo_overrides(cfg, variant, seed, sft_cfg))
    return full, GRPOTrainConfig.from_dict(full.get("train", {}))


def resolved_sft(cfg: AblationConfig, seed: int, share_from: Path | None) -> dict[str, Any]:
    return deep_update(load_yaml(cfg.sft.config), sft_overrides(cfg, seed, share_from))


# ------------------------------------------------------------------------------ evaluation
def balanced_slice(items: Sequence[Any], n: int) -> list[Any]:
    """The first ``n`` items taking families round-robin in stored order (same slice for every row)."""
    by_fam: dict[str, list[Any]] = {}
    for it in items:
        by_fam.setdefault(it.family, []).append(it)
    queues = [list(v) for _, v in sorted(by_fam.items())]
    out: list[Any] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def action_accuracy(pairs: Sequence[tuple[Any, Any]], windows, thresholds) -> float:
    """Mean field-level score (%) of each rollout's emitted action against a* = g(realised future)."""
    idx = np.array([it.window for it, _ in pairs], dtype=int)
    targets = actions_from_windows(windows.select(idx), thresholds)
    return 100.0 * float(np.mean([score_action(r.action, t).score for (_, r), t in zip(pairs, targets, strict=True)]))


def per_item(pairs: Sequence[tuple[Any, Any]], windows, thresholds) -> list[dict[str, Any]]:
    """One record per graded question: correct, answer parsed, protocol (a parsed answer and a parsed
    action), action score vs a* (the paired unit of the bootstrap)."""
    idx = np.array([it.window for it, _ in pairs], dtype=int)
    targets = actions_from_windows(windows.select(idx), thresholds)
    out = []
    for (it, r), t in zip(pairs, targets, strict=True):
        ans = normalize_answer(it, r.answer)
        out.append({"id": it.id, "family": it.family, "correct": bool(is_correct(it, ans)),
                    "parsed": ans is not None, "protocol": ans is not None and r.action is not None,
                    "action_score": float(score_action(r.action, t).score)})
    return out


def evaluate(run_dir: Path, items, windows, thresholds, max_new_tokens: int,
             max_context_chars: int | None = None) -> dict[str, Any]:
    """The QA benchmark's grader on ``items`` (``benchmarks.qa.evaluate_run``) + action accuracy, and
    the per-question records. ``max_context_chars``: the SFT config's, so evaluation prompts are the
    prompts SFT/GRPO saw."""
    metrics, pairs = evaluate_run(run_dir, items, windows, max_new_tokens, max_context_chars)
    return {**metrics, "action_accuracy": action_accuracy(pairs, windows, thresholds),
            "items": per_item(pairs, windows, thresholds)}


# ------------------------------------------------------------------------------ aggregation
def aggregate(per_seed: Mapping[str, Mapping[int, Mapping[str, float]]],
              metrics: Sequence[str] = METRICS) -> dict[str, dict[str, float]]:
    """variant -> {metric: mean, metric_std: sample std (ddof=1; 0 for one seed), n_seeds}."""
    out: dict[str, dict[str, float]] = {}
    for variant, seeds in per_seed.items():
        row: dict[str, float] = {"n_seeds": float(len(seeds))}
        for m in metrics:
            vals = np.array([s[m] for s in seeds.values() if m in s and s[m] is not None], dtype=np.float64)
            if len(vals) == 0:
                continue
            row[m] = float(vals.mean())
            row[f"{m}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        out[variant] = row
    return out


def fmt(row: Mapping[str, float], m: str) -> str:
    return "–" if m not in row else f"{row[m]:.1f} ± {row[m + '_std']:.1f}"


def render_table(agg: Mapping[str, Mapping[str, float]]) -> str:
    """Table 3 layout: one row per variant, QA accuracy per family + Avg., action accuracy (%)."""
    cols = [FAMILY_TITLES[f] for f in FAMILY_COLS] + ["Avg. QA Acc.", "Action Acc.", "Action success"]
    keys = [*FAMILY_COLS, "overall", "action_accuracy", "action_success_rate"]
    lines = ["| Method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for key, row in agg.items():
        label = VARIANTS_BY_KEY[key].label if key in VARIANTS_BY_KEY else key
        lines.append(f"| {label} | " + " | ".join(fmt(row, m) for m in keys) + " |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ running
def _write_yaml(cfg: Mapping[str, Any], path: Path, note: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {note}\n" + yaml.safe_dump(dict(cfg), sort_keys=False))
    return path


def check_source(work: Path, sft_dir: Path) -> None:
    """``work`` caches GRPO runs and evaluations built on one SFT run: stamp it with that run's weights
    (``llm.sft.run_fingerprint``) and refuse, naming both, when a retrained SFT run meets old caches."""
    fp, stamp = run_fingerprint(sft_dir), work / "sft_source.json"
    if stamp.exists():
        old = json.loads(stamp.read_text())
        if old.get("fingerprint") != fp:
            raise ValueError(f"{work} holds GRPO runs and evaluations started from {old.get('sft_dir')} with weights "
                             f"{old.get('fingerprint')}, but {sft_dir} now has weights {fp}: pass a fresh --work "
                             f"or move {work} aside")
        return
    if any((work / d).exists() for d in ("grpo", "eval")):
        raise ValueError(f"{work} holds GRPO runs or evaluations of an unknown SFT start (no {stamp.name}): pass a "
                         f"fresh --work or move {work} aside")
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"sft_dir": str(sft_dir), "fingerprint": fp}, indent=1))


def run_ablation(cfg: AblationConfig, out: Path, log=print) -> dict[str, Any]:
    """Train and evaluate every (variant, seed); returns {per_seed, metrics, timings}."""
    work = Path(cfg.work_dir)
    timings = Timings(work / "timings.json")
    variants = [VARIANTS_BY_KEY[k] for k in cfg.variants]
    per_seed: dict[str, dict[int, dict[str, float]]] = {v.key: {} for v in variants}
    per_seed_sft = cfg.sft.per_seed
    shared = Path(cfg.sft.run_dir) if cfg.sft.run_dir else None  # a finished SFT run, reused
    if shared is not None and not (shared / "summary.json").exists():
        raise FileNotFoundError(f"sft.run_dir {shared} is not a finished SFT run (no summary.json); "
                                f"train it with `stockr1 sft --config {cfg.sft.config}`")
    if shared is not None:
        check_source(work, shared)
    first = shared or work / "sft" / f"s{cfg.seeds[0]}"
    eval_cache: dict[str, Any] = {}
    bar = Progress(len(cfg.seeds) * len(variants), "[ablation]", unit="row")  # a row: one (variant, seed)
    for seed in cfg.seeds:
        sft_seed = cfg.seeds[0] if shared is not None or not per_seed_sft else seed
        sft_dir = shared or work / "sft" / f"s{sft_seed}"
        sft_cfg = (load_yaml(shared / "config.yaml") if shared is not None
                   else resolved_sft(cfg, sft_seed, None if sft_seed == cfg.seeds[0] else first))
        if not (sft_dir / "summary.json").exists():
            path = _write_yaml(sft_cfg, work / "configs" / f"sft-s{sft_seed}.yaml",
                               f"derived by stockr1 bench ablation from {cfg.sft.config}")
            log(f"[ablation] SFT seed {sft_seed} -> {sft_dir}")
            t0 = time.perf_counter()
            run_sft(path, run=f"s{sft_seed}", out_root=work / "sft", resume=True)  # the bench's work dir resumes
            timings.record(f"sft/s{sft_seed}", time.perf_counter() - t0)
        if not eval_cache:  # the held-out slice and thresholds: from the first seed's SFT run
            windows, _ = load_data(sft_cfg.get("data", {}))
            split = cfg.eval.split  # "val" only to choose the recipe
            test = [it for it in load_items(first / "qa.jsonl") if it.split == split]
            th = first / "thresholds.json"  # g as the SFT/GRPO runs used it (fit on train windows)
            eval_cache = {"windows": windows, "ctx_chars": sft_cfg.get("max_context_chars"),
                          "thresholds": ActionThresholds.load(th) if th.exists() else ActionThresholds.fit(train_only(windows)),
                          "items": balanced_slice(test, cfg.eval.n)}
        ev = eval_cache
        mnt = cfg.eval.max_new_tokens
        for v in variants:
            name = f"{v.key}-s{seed}"
            if v.grpo is None:
                run_dir = sft_dir
            else:
                run_dir = work / "grpo" / name
                if not (run_dir / "summary.json").exists():
                    log(f"[ablation] GRPO {name}")
                    t0 = time.perf_counter()
                    run_grpo(cfg.grpo.config, run=name, out_root=work / "grpo", resume=True, sft_dir=sft_dir,
                             overrides=grpo_overrides(cfg, v, seed, sft_cfg), use_wandb=cfg.wandb)
                    timings.record(f"grpo/{name}", time.perf_counter() - t0)
            eval_name = f"{v.key}-s{sft_seed}" if v.grpo is None else name
            log(f"[ablation] eval {name}")
            split = cfg.eval.split
            row = dict(cached(
                work / "eval" / f"{eval_name}-{split}-n{len(ev['items'])}-t{mnt}.json",
                lambda run_dir=run_dir, ev=ev, mnt=mnt: evaluate(run_dir, ev["items"], ev["windows"],
                                                                 ev["thresholds"], mnt, ev["ctx_chars"]),
                timings, f"eval/{name}"))
            g = cfg.probe.group_size
            if g > 0:  # the training-query reward of this policy, re-sampled (the SFT row per seed too)
                log(f"[ablation] probe {name}")
                setup_variant = v if v.grpo is not None else VARIANTS_BY_KEY["ugrpo"]
                pr = cached(work / "probe" / f"{name}-g{g}.json",
                             lambda run_dir=run_dir, sv=setup_variant, seed=seed, sft_dir=sft_dir, sft_cfg=sft_cfg, g=g:
                             probe_run(cfg.grpo.config, run_dir, sft_dir, g, PROBE_SEED + seed,
                                       grpo_overrides(cfg, sv, seed, sft_cfg)),
                             timings, f"probe/{name}")
                row.update({"probe_reward_total": pr["reward_total"], "probe_r_ans": pr["reward/r_ans"],
                            "probe_answer_parse_rate": pr["answer_parse_rate"],
                            "probe_per_query_total": pr["per_query_total"]})
                if pr.get("variance_share"):
                    row["probe_variance_share"] = pr["variance_share"]
            per_seed[v.key][seed] = row
            bar.advance()
    return {"per_seed": per_seed, "metrics": aggregate(per_seed), "timings": dict(timings),
            "n_eval": len(eval_cache.get("items", [])),
            "eval_families": dict(_count_families(eval_cache.get("items", []))),
            "start": sft_start(first, shared is None and per_seed_sft)}


def sft_start(sft_dir: Path, per_seed: bool) -> dict[str, Any]:
    """What every GRPO row started from: ``policy_base`` (the SFT policy's base model, e.g. ``tiny`` or a hub
    name, with ``random_init_layers`` when random-init), ``sft_release_hash`` (``llm.sft.run_fingerprint``:
    the content hash of its policy/ and decoder/, what ``check_source`` stamps the caches with) and its
    directory. With per-seed SFT runs these describe the first seed's run."""
    pcfg = json.loads((sft_dir / "policy" / "policy_config.json").read_text())
    base = str(pcfg.get("name_or_path"))
    if int(pcfg.get("random_init_layers") or 0) > 0:
        base += f" (random init, {pcfg['random_init_layers']} layers)"
    return {"policy_base": base, "sft_release_hash": run_fingerprint(sft_dir), "sft_run_dir": str(sft_dir),
            "sft_per_seed": bool(per_seed)}


def _count_families(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[it.family] = out.get(it.family, 0) + 1
    return out


def write_results(res: Mapping[str, Any], cfg: AblationConfig, out: Path, config_path: str | None,
                  command: str | None = None) -> None:
    """Every file under ``out`` from this run's numbers: summary.json (the issue's schema), metrics.json,
    per_seed.json, table.md, training.png, entropy.png, run_info.json, README.md."""
    out.mkdir(parents=True, exist_ok=True)
    grpo_rows = [k for k in cfg.variants if VARIANTS_BY_KEY[k].grpo is not None]
    summary = summarise(res["per_seed"], cfg.n_boot, meta=res.get("start"))
    summary["training"] = training_evidence(Path(cfg.work_dir) / "grpo", grpo_rows, cfg.seeds)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "metrics.json").write_text(json.dumps(res["metrics"], indent=1))
    (out / "per_seed.json").write_text(json.dumps(res["per_seed"], indent=1))
    (out / "table.md").write_text(render_table(res["metrics"]))
    figures = []
    if plot_training(Path(cfg.work_dir) / "grpo", grpo_rows, cfg.seeds, out / "training.png"):
        figures.append("training.png")
    curves = {k: entropy_curves(Path(cfg.work_dir) / "grpo", k, cfg.seeds) for k in ("grpo", "ugrpo")
              if k in cfg.variants}
    if any(curves.values()):
        plot_entropy(curves, out / "entropy.png")
        figures.append("entropy.png")
    info = {"config_path": config_path, "config": as_plain(cfg),
            "command": command, "commit": git_commit(), "date": datetime.date.today().isoformat(),
            "timings_s": res["timings"], "total_s": float(sum(res["timings"].values())),
            "n_eval": res["n_eval"], "eval_families": res["eval_families"], "figures": figures,
            "ordering": {m: ordering(summary, m) for m in ("qa_acc", "action_acc")}}
    (out / "run_info.json").write_text(json.dumps(info, indent=1, default=str))
    labels = {v.key: v.label for v in VARIANTS}
    (out / "README.md").write_text(readme(summary, info, labels))


def resummarise(out: Path, command: str | None = None) -> dict[str, Any]:
    """Rewrite ``summary.json``, ``run_info.json``'s verdicts and ``README.md`` of a finished ablation folder
    from its own ``per_seed.json`` (the per-question records): no training, no evaluation. For results
    measured before the intervals included the seed variance. The training evidence is read from the
    config's work dir when its runs are still there; the SFT start is recorded when its directory is."""
    per_seed = {k: {int(s): rec for s, rec in v.items()} for k, v in json.loads((out / "per_seed.json").read_text()).items()}
    info = json.loads((out / "run_info.json").read_text())
    cfg = AblationConfig.from_dict(info["config"])
    sft_dir = Path(cfg.sft.run_dir) if cfg.sft.run_dir else None
    start = (sft_start(sft_dir, False) if sft_dir is not None and (sft_dir / "policy").is_dir() and (sft_dir / "decoder").is_dir()
             else {"policy_base": None, "sft_release_hash": None, "sft_run_dir": cfg.sft.run_dir})
    summary = summarise(per_seed, cfg.n_boot, meta=start)
    grpo_rows = [k for k in cfg.variants if VARIANTS_BY_KEY[k].grpo is not None]
    summary["training"] = training_evidence(Path(cfg.work_dir) / "grpo", grpo_rows, cfg.seeds)
    info["ordering"] = {m: ordering(summary, m) for m in ("qa_acc", "action_acc")}
    info["resummarised"] = {"command": command, "commit": git_commit(), "date": datetime.date.today().isoformat()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "run_info.json").write_text(json.dumps(info, indent=1, default=str))
    (out / "README.md").write_text(readme(summary, info, {v.key: v.label for v in VARIANTS}))
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench ablation", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/ablation/demo.yaml", help="ablation config (configs/ablation/)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="override the config's seeds")
    ap.add_argument("--variants", nargs="+", default=None, choices=list(VARIANTS_BY_KEY))
    ap.add_argument("--work", default=None, help="where SFT/GRPO runs and eval caches go (default: config)")
    ap.add_argument("--out", default=None, help="result directory (results/ablation for the committed one); "
                                                "refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out (the runs in the work dir are reused)")
    ap.add_argument("--resummarise", action="store_true",
                    help="rewrite summary.json, the verdicts of run_info.json and README.md of the finished --out from "
                         "its per_seed.json (no training or evaluation)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args, over = parse_config_args(ap, argv)
    if args.resummarise:
        if args.out is None:
            ap.error("--resummarise needs --out (a finished ablation folder)")
        resummarise(Path(args.out), command_line("stockr1 bench ablation", argv))
        print(f"rewrote {args.out}/summary.json, run_info.json, README.md")
        return 0
    for key, val in (("seeds", args.seeds), ("variants", args.variants), ("work_dir", args.work)):
        if val is not None:
            over[key] = val
    cfg = AblationConfig.from_yaml(args.config, over)
    if args.print_config:
        print_config(cfg)
        return 0
    if args.out is None:
        ap.error("--out is required")
    refuse_existing(args.out, args.overwrite, f" (SFT/GRPO runs and evaluations are cached in {cfg.work_dir}: a "
                                              "rerun with --overwrite resumes them)")
    torch.set_num_threads(cfg.threads)
    res = run_ablation(cfg, Path(args.out))
    with output_dir(args.out, args.overwrite) as out:
        write_results(res, cfg, out, args.config, command_line("stockr1 bench ablation", argv))
    print(render_table(res["metrics"]))
    print(f"wrote {args.out}")
    return 0
