"""`stockr1 bench grpo_credit --config configs/grpo_check/smollm2-135m-balanced.yaml --out DIR`: how much of a
GRPO step moves the answers, and how much the rest of the completion.

The training-query check (``bench grpo_check``) found each query's answer log-odds moving toward its gold
by ~0.1 nats in 5 steps while shared shifts moved 0.3–4 nats. This asks why, on the same start, queries
and recipe (the check's config), at the first step of each of its seeds, without training:

1. the step's real batch (``GRPOTrainer.sample``: the rollouts seed s's first step trained on);
2. the gradient of its loss split exactly in two (``rl.credit.step_gradients``): through the tokens that
   state the answer (``rl.credit.decision_tokens``) and through all the others;
3. the gradient of each query's answer log-odds on the check's fixed start contexts
   (``rl.credit.logodds_gradients``, the first ``--contexts-per-query`` of each query);
4. AdamW's first update from each gradient (about −lr sign(g)) and its first-order move of every query's
   log-odds; split as the check splits its readings: toward each query's gold, and shared (golds weighted
   equally), with the seeds x queries interval (stratified by gold).

5. the same batch's whole step under each credit of ``compared_credits`` (sequence, Stock-R1 Eq. 1;
   answer_span; answer_span with the answer prior cancelled, and projected out; rl/grpo.py, "Credit"), its AdamW first update
   and moves, so the credits are compared on one batch, without the sampling noise of separate runs;
6. for every update, the first-order move of an update linear in its gradient at the same per-weight RMS
   (``rl.credit.linear_step``): what AdamW's per-weight normalisation changes (a draw cached before this
   reading lacks it; delete ``work_dir/credit/draw-s*.json`` to draw it).

So it reads, per step and to first order: how far the recipe's update moves the answers toward their
golds, how far an update made of the answer tokens' gradient alone would, and how far the rest does. The
check's observed move per step (``--observed``: its results folder) is shown beside it, descriptively.

Writes ``summary.json`` and a generated ``README.md``; each seed's draw is cached under
``<work_dir>/credit/`` (a rerun resumes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.cache import Timings, cached
from benchmarks.grpo_check.command import (
    GRPOCheckConfig,
    check_args,
    run_overrides,
    start_contexts,
    stratified_interval,
)
from benchmarks.grpo_check.credit_report import readme
from rl.answer_span import decision_tokens
from rl.credit import (
    adam_first_step,
    applied_moves,
    cosine,
    linear_step,
    logodds_gradients,
    norm,
    predicted_moves,
    step_gradient,
    step_gradients,
    with_credit,
)
from rl.grpo import CreditConfig
from rl.setup import build_trainer, load_config
from stockr1.config import as_plain
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, output_dir, refuse_existing

PARTS = ("full", "decision", "rest")
CREDIT_PART = "credit:"  # a part named "credit:<mode>[,cancel|,project]": the same batch's whole step under that credit


def compared_credits(share: float) -> dict[str, CreditConfig]:
    """The credits every draw compares on its one batch (rl/grpo.py, "Credit"), at the config's answer share."""
    return {f"{CREDIT_PART}sequence": CreditConfig(),
            f"{CREDIT_PART}answer_span": CreditConfig(mode="answer_span", answer_share=share),
            f"{CREDIT_PART}answer_span,cancel": CreditConfig(mode="answer_span", answer_share=share,
                                                             answer_prior="cancel"),
            f"{CREDIT_PART}answer_span,project": CreditConfig(mode="answer_span", answer_share=share,
                                                              answer_prior="project")}


# paired on one batch: what answer-span credit changes against Eq. 1, what cancelling the prior changes, and
# what projecting it out along the spans' slopes changes against cancelling it
CREDIT_CONTRASTS = ((f"{CREDIT_PART}answer_span", f"{CREDIT_PART}sequence"),
                    (f"{CREDIT_PART}answer_span,cancel", f"{CREDIT_PART}answer_span"),
                    (f"{CREDIT_PART}answer_span,project", f"{CREDIT_PART}answer_span,cancel"))


def parts_of(draws: list[Mapping[str, Any]]) -> list[str]:
    """The parts every draw holds, in order (a draw cached before the credit comparison has only PARTS)."""
    names = [p for p in draws[0]["moves"] if all(p in d["moves"] for d in draws)]
    order = [*PARTS, *compared_credits(0.5)]  # the names do not depend on the share
    return [p for p in order if p in names] + [p for p in names if p not in order]


def split_moves(moves: Mapping[str, float], by_gold: Mapping[str, list[int]]) -> dict[str, float]:
    """One seed's moves split as the intervals split them, golds weighted equally (descriptive, no interval):
    toward gold (mean_Yes − mean_No) / 2 and shared (mean_Yes + mean_No) / 2."""
    y = float(np.mean([moves[str(q)] for q in by_gold["yes"]]))
    n = float(np.mean([moves[str(q)] for q in by_gold["no"]]))
    return {"toward_gold": (y - n) / 2, "shared": (y + n) / 2}


def _yes_share(answers: list[Any]) -> float | None:
    parsed = [str(a).strip().lower() for a in answers if a is not None]
    return None if not parsed else float(np.mean([a == "yes" for a in parsed]))


def draw(cfg: GRPOCheckConfig, seed: int, contexts: list[dict[str, Any]], per_query: int,
         work: Path) -> dict[str, Any]:
    """One seed's first step: its batch, the split gradient and each part's first-order moves."""
    sft = Path(cfg.sft_run_dir) if cfg.sft_run_dir else None
    trainer, st = build_trainer(load_config(cfg.grpo.config, run_overrides(cfg, seed)), sft, work / f"s{seed}")
    if len(trainer.opt.param_groups) > 1:  # adam_first_step below reads one lr and one eps: refuse before the work
        raise ValueError(f"{cfg.grpo.config}: grpo_credit reads AdamW's first step with one lr and eps, but this "
                         f"recipe's optimiser has {len(trainer.opt.param_groups)} groups (train.rows_lr / "
                         "train.rows_adam_eps, or lambda_ts > 0); screen it without them")
    t0 = time.perf_counter()
    lo = logodds_gradients(trainer, st.samples, contexts, per_query)
    t_lo = time.perf_counter() - t0
    sb = trainer.sample()
    mask = decision_tokens(sb.rollouts, sb.batch["gen"], trainer.engine.tokenizer)
    old_ref = trainer.old_and_ref(sb)  # the batch's log-probs: the same under every credit
    grads = step_gradients(trainer, sb, mask, old_ref)
    compared = compared_credits(trainer.cfg.credit.answer_share)
    same = [name for name, credit in compared.items() if credit == trainer.cfg.credit]  # the step itself: "full"
    for name, credit in compared.items():
        if name not in same:
            grads[name] = step_gradient(trainer, with_credit(trainer, sb, credit), old_ref=old_ref)
    lr = trainer.cfg.lr * trainer.cfg.lr_factor(0)
    eps = float(trainer.opt.param_groups[0].get("eps", 1e-8))
    updates = {p: adam_first_step(g, lr, eps) for p, g in grads.items()}
    moves = {p: predicted_moves(u, lo) for p, u in updates.items()}
    linear = {p: predicted_moves(linear_step(g, lr), lo) for p, g in grads.items()}
    t1 = time.perf_counter()
    real = applied_moves(trainer, st.samples, contexts, per_query, updates)
    for name in same:
        moves[name], real[name], linear[name] = moves["full"], real["full"], linear["full"]
    t_real = time.perf_counter() - t1
    g = trainer.cfg.group_size
    answers = [r.answer for r in sb.rollouts]
    return {
        "seed": seed, "lr": lr, "eps": eps, "credit": trainer.cfg.credit.label,
        "gold": {q: st.samples[q].columns.get("answer") for q in lo},
        "moves": {p: {str(q): v for q, v in m.items()} for p, m in moves.items()},
        "real_moves": {p: {str(q): v for q, v in m.items()} for p, m in real.items()},
        "linear_moves": {p: {str(q): v for q, v in m.items()} for p, m in linear.items()},
        "cos_full_decision": cosine(grads["full"], grads["decision"]),
        "cos_full_rest": cosine(grads["full"], grads["rest"]),
        "norm_share": {p: norm(grads[p]) / norm(grads["full"]) for p in ("decision", "rest")},
        # each gradient's per-entry RMS: the scale an AdamW eps must be set against to make the step linear
        "grad_rms": {p: norm(g) / sum(t.numel() for t in g.values()) ** 0.5 for p, g in grads.items()},
        "decision_token_share": float(mask.sum() / sb.batch["gen"].sum()),
        "generated_tokens": int(sb.batch["gen"].sum()), "rollouts": len(sb.rollouts),
        "rollouts_with_answer": int(mask.any(1).sum()),
        "batch_yes_share": {str(next(i for i, x in enumerate(st.samples) if x is q)): _yes_share(answers[k * g:(k + 1) * g])
                            for k, q in enumerate(sb.samples)},
        "time_s": {"logodds_gradients": t_lo, "applied": t_real, "step": time.perf_counter() - t0 - t_lo - t_real},
    }


def run_credit(cfg: GRPOCheckConfig, per_query: int, log=print) -> dict[str, Any]:
    work = Path(cfg.work_dir) / "credit"
    timings = Timings(work / "timings.json")
    sft = Path(cfg.sft_run_dir) if cfg.sft_run_dir else None
    contexts = start_contexts(cfg, Path(cfg.work_dir), sft, timings)  # the check's own, drawn once for all three
    draws = {}
    for s in cfg.seeds:
        log(f"[grpo_credit] seed {s}: first step's batch, split gradient, log-odds gradients")
        draws[s] = cached(work / f"draw-s{s}.json", lambda s=s: draw(cfg, s, contexts, per_query, work),
                          timings, f"draw/s{s}")
    return {"draws": draws, "timings": dict(timings), "n_contexts": len(contexts)}


def summarise(res: Mapping[str, Any], cfg: GRPOCheckConfig, per_query: int,
              observed: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per part and kind (``first_order``: predicted; ``applied``: the update applied and the log-odds read
    again): toward-gold and shared moves (seeds x queries, stratified by gold), the gradient geometry per
    seed, and the check's observed move per step beside them."""
    draws = [res["draws"][s] for s in sorted(res["draws"], key=int)]
    gold = {int(q): str(v).strip().lower() for q, v in draws[0]["gold"].items()}
    by_gold = {g: sorted(q for q, v in gold.items() if v == g) for g in ("yes", "no")}
    names = parts_of(draws)
    parts: dict[str, dict[str, Any]] = {p: {} for p in names}
    kinds = [("first_order", "moves"), ("applied", "real_moves")]
    if all("linear_moves" in d for d in draws):  # draws cached before 2026-12-06's linear reading lack it
        kinds.append(("linear", "linear_moves"))
    for kind, key in kinds:
        for p in names:
            a = np.array([[d[key][p][str(q)] for q in by_gold["yes"]] for d in draws])
            b = np.array([[d[key][p][str(q)] for q in by_gold["no"]] for d in draws])
            parts[p][kind] = {"toward_gold": stratified_interval(a, b, 0.5, -0.5, cfg.n_boot, cfg.level),
                              "shared": stratified_interval(a, b, 0.5, 0.5, cfg.n_boot, cfg.level),
                              "per_query_mean": {str(q): float(np.mean([d[key][p][str(q)] for d in draws])) for q in gold},
                              "per_seed": {str(d["seed"]): split_moves(d[key][p], by_gold) for d in draws}}
    differences = {}
    for hi, lo in CREDIT_CONTRASTS:
        if hi in names and lo in names:
            a = np.array([[d["real_moves"][hi][str(q)] - d["real_moves"][lo][str(q)] for q in by_gold["yes"]] for d in draws])
            b = np.array([[d["real_moves"][hi][str(q)] - d["real_moves"][lo][str(q)] for q in by_gold["no"]] for d in draws])
            differences[f"{hi} - {lo}"] = {
                "toward_gold": stratified_interval(a, b, 0.5, -0.5, cfg.n_boot, cfg.level),
                "shared": stratified_interval(a, b, 0.5, 0.5, cfg.n_boot, cfg.level)}
    geometry = {k: [d[k] for d in draws] for k in ("cos_full_decision", "cos_full_rest", "decision_token_share",
                                                     "generated_tokens", "rollouts_with_answer")}
    geometry["norm_share"] = {p: [d["norm_share"][p] for d in draws] for p in ("decision", "rest")}
    obs = None
    if observed is not None and observed.get("logodds_split"):
        sp, steps = observed["logodds_split"], int(observed["steps"])
        obs = {k: {"diff": sp[k]["diff"] / steps, "ci_low": sp[k]["ci_low"] / steps, "ci_high": sp[k]["ci_high"] / steps,
                   "verdict": sp[k]["verdict"]} for k in ("toward_gold", "shared")}
        obs["steps"] = steps
    return {"seeds": [d["seed"] for d in draws], "lr": draws[0]["lr"], "eps": draws[0]["eps"],
            "credit": draws[0].get("credit", "sequence"),
            "n_queries": len(gold), "golds": {g: len(v) for g, v in by_gold.items()},
            "contexts_per_query": per_query, "n_contexts": res["n_contexts"], "level": cfg.level, "n_boot": cfg.n_boot,
            "parts": parts, "credit_differences": differences, "geometry": geometry, "observed_per_step": obs,
            "batch_yes_share": {str(d["seed"]): d["batch_yes_share"] for d in draws},
            "gold": {str(q): v for q, v in gold.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench grpo_credit", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/grpo_check/smollm2-135m-balanced.yaml",
                    help="a grpo_check config: its start, queries, recipe, seeds and answer contexts")
    ap.add_argument("--out", default=None, help="result directory; refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace --out (the cached draws are reused)")
    ap.add_argument("--contexts-per-query", type=int, default=4, help="start contexts per query for its log-odds gradient")
    ap.add_argument("--observed", default=None, help="results folder of a grpo_check run of this config (its move per step)")
    parsed = check_args(ap, argv)
    if parsed is None:
        return 0
    args, cfg, argv = parsed
    if not cfg.answer_contexts:
        ap.error(f"{args.config} sets answer_contexts: 0; the log-odds gradients need the check's fixed contexts")
    if args.contexts_per_query < 1:
        ap.error("--contexts-per-query must be >= 1")
    observed = None
    if args.observed:
        path = Path(args.observed) / "summary.json"
        if not path.is_file():
            ap.error(f"--observed {args.observed}: no summary.json there (a finished `stockr1 bench grpo_check` folder)")
        observed = json.loads(path.read_text())
    refuse_existing(args.out, args.overwrite, f" (the draws are cached in {cfg.work_dir}/credit: a rerun reuses them)")
    torch.set_num_threads(cfg.threads)
    res = run_credit(cfg, args.contexts_per_query)
    summary = summarise(res, cfg, args.contexts_per_query, observed)
    info = {"config_path": args.config, "config": as_plain(cfg), "observed": args.observed,
            "command": command_line("stockr1 bench grpo_credit", argv), "commit": git_commit(),
            "date": datetime.date.today().isoformat(), "timings_s": res["timings"]}
    with output_dir(args.out, args.overwrite) as out:
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        (out / "run_info.json").write_text(json.dumps(info, indent=1, default=str))
        (out / "README.md").write_text(readme(summary, info))
    for p in summary["parts"]:
        for kind in ("applied", "first_order"):
            t = summary["parts"][p][kind]["toward_gold"]
            print(f"{p}: toward gold {t['diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}] per step ({kind})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
