"""The README and the figure of `stockr1 bench grpo_check` (``benchmarks.grpo_check.command``), generated from its
``summary.json``: the verdict read from the interval, the per-step table, and the diagnostics to read
when the reward does not rise."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl.grad_scale import GROUPS
from rl.grpo import CreditConfig
from stockr1.metrics.verdict import HOLDS, WORSE, claim_line, verdict
from stockr1.outdir import generated_line

# per-step metrics the check reads from each run's metrics.jsonl (rl/logging.py names)
STEP_KEYS = ("reward/total", "reward/r_ans", "reward/r_act", "reward/r_prec", "reward/r_cons", "policy/kl",
             "policy/clip_low", "policy/clip_high", "policy/clip_region", "policy/entropy", "reward/frac_zero_spread",
             "reward/var_share/r_ans", "advantage/noise_std", "advantage/sign_flip", "rollout/truncated",
             "rollout/answer_parse_rate", "rollout/action_success_rate", "answers/share/yes", "answers/share/no",
             "uncertainty/weight_spread", "policy/grad_norm", "lr", "time/step_s", "time/rollout_s", "time/hold_s",
             "answer_prior/held_move",
             *(f"policy/grad_{m}/{g}" for g in GROUPS for m in ("share", "rms", "mean_abs")))  # rl/grad_scale.py
TABLE = (("reward/total", "reward", ".3f"), ("reward/r_ans", "R_ans", ".3f"), ("reward/r_act", "R_act", ".3f"),
         ("reward/r_prec", "R_prec", ".3f"), ("reward/r_cons", "R_cons", ".3f"), ("policy/kl", "KL", ".1e"),
         ("policy/clip_low", "clip low", ".3f"), ("policy/clip_high", "clip high", ".3f"),
         ("reward/frac_zero_spread", "no-spread groups", ".2f"), ("reward/var_share/r_ans", "R_ans var share", ".2f"),
         ("advantage/sign_flip", "adv. sign flip", ".2f"), ("rollout/truncated", "truncated", ".2f"),
         ("answers/share/yes", "Yes share", ".2f"), ("answers/share/no", "No share", ".2f"),
         ("answer_prior/held_move", "held move (nats)", ".3f"))  # answer_prior "hold" only (rl/prior_hold.py)
PANELS = (("reward/total", "mean training reward"), ("reward/r_ans", "R_ans"), ("policy/kl", "KL to start (k3)"),
          ("policy/clip_region", "clipped token share"), ("reward/var_share/r_ans", "R_ans share of group variance"),
          ("rollout/truncated", "truncated rollouts"))


def _cell(per_step: Mapping[str, Any], key: str, step: int, fmt: str) -> str:
    v = per_step.get(key, {}).get(step)
    return "–" if v is None else f"{format(v['mean'], fmt)} ± {format(v['std'], fmt)}"


def step_table(summary: Mapping[str, Any]) -> str:
    ps = {k: {int(t): v for t, v in c.items()} for k, c in summary["per_step"].items()}
    steps = sorted(ps.get("reward/total", {}))
    cols = [(k, h, f) for k, h, f in TABLE if k in ps]
    lines = ["| step | " + " | ".join(h for _, h, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {t} | " + " | ".join(_cell(ps, k, t, f) for k, _, f in cols) + " |" for t in steps]
    return "\n".join(lines) + "\n"


def _mean_over_steps(summary: Mapping[str, Any], key: str) -> float | None:
    c = summary["per_step"].get(key)
    return None if not c else sum(v["mean"] for v in c.values()) / len(c)


def _threads(summary: Mapping[str, Any]) -> str:
    return f"{summary['threads']} threads" if summary.get("threads") else "threads not recorded"


def credit_text(recipe: Mapping[str, Any]) -> str:
    """Which advantage each token carried (``train.credit``; rl/grpo.py, "Credit")."""
    c = CreditConfig(**(recipe.get("credit") or {}))  # the recipe's overrides over the trainer's defaults
    held = ("; each step's update lost its first-order move of the step's mean answer log-odds, read on "
            f"{c.hold_per_query} decision contexts per query (answer prior held, rl/prior_hold.py)"
            if c.answer_prior == "hold" else "")
    if c.mode == "sequence":
        return f"credit sequence (Stock-R1 Eq. 1: the total's advantage on every token{held})"
    prior = {"cancel": ", centred per answer over the step's teaching rollouts (answer prior cancelled)",
             "project": ", with its component along the spans' slopes removed per answer (answer prior projected "
                        "out)"}.get(c.answer_prior, "")
    span = "the answer span" if c.answer_tags else "the answer span's words (its <answer> tags left out)"
    return (f"credit {c.mode} ({span} carries R_ans's advantage{prior} with {c.answer_share:.0%} of its "
            f"rollout's weight, the other tokens that of R − R_ans: a departure from Stock-R1 Eq. 1{held})")


def decoding_text(recipe: Mapping[str, Any]) -> str:
    """What decoded the rollouts (``rollout.merge_lora``, ``rollout.twin_dtype``; docs/scale.md)."""
    if not recipe.get("merge_lora"):  # the checks before 2026-12-06 lack the key: the policy decoded itself
        return "decoded by the policy itself"
    return (f"decoded by a merged {recipe.get('twin_dtype') or 'float32'} twin of the policy (rollout.merge_lora"
            + (", twin_dtype: the sampler's log-probs are not the loss's)" if recipe.get("twin_dtype") else ")"))


def adam_text(recipe: Mapping[str, Any]) -> str:
    """AdamW's betas and eps (``train.adam_betas``, ``train.adam_eps``; torch's defaults where the recipe sets
    none, as in every check before 2026-12-06)."""
    betas, eps = recipe.get("adam_betas"), recipe.get("adam_eps")
    text = (f"AdamW betas {tuple(betas) if betas else '(0.9, 0.999) (default)'}, "
            f"eps {eps if eps is not None else '1e-8 (default)'}")
    rows_lr, rows_eps = recipe.get("rows_lr"), recipe.get("rows_adam_eps")
    if rows_lr is not None or rows_eps is not None:  # train.rows_lr / rows_adam_eps: a group of their own
        text += (f"; the protocol rows and the projector at lr {rows_lr if rows_lr is not None else recipe['lr']}, "
                 f"eps {rows_eps if rows_eps is not None else eps if eps is not None else 1e-8}")
    return text


def grad_by_group(summary: Mapping[str, Any]) -> str | None:
    """The gradient per kind of trainable weight (rl/grad_scale.py), at step 1 (the start policy's batch) and
    over all steps; None for runs logged before 2026-12-06, which lack it."""
    ps = summary["per_step"]
    parts = []
    for g in GROUPS:
        share, rms = ps.get(f"policy/grad_share/{g}"), ps.get(f"policy/grad_rms/{g}")
        if not share or not rms:
            continue
        first = min(share, key=int)
        parts.append(f"{g} {share[first]['mean']:.0%} / {rms[first]['mean']:.1e} at step {first}, "
                     f"{_mean_over_steps(summary, f'policy/grad_share/{g}'):.0%} / "
                     f"{_mean_over_steps(summary, f'policy/grad_rms/{g}'):.1e} over steps")
    if not parts:
        return None
    return ("gradient by kind of weight before clipping (share of its squared norm / per-entry RMS, mean over seeds; "
            "an AdamW eps above a group's RMS makes its step linear): " + "; ".join(parts))


def diagnostics(summary: Mapping[str, Any]) -> list[str]:
    """What to read when the reward does not rise: each suspect of the issue with its number."""
    r = summary["recipe"]
    out = [f"recipe: lr {r['lr']} (warmup {r['warmup_steps']}), mu {r['mu']}, beta {r['beta']}, loss {r['loss_type']}, "
           f"temperature {r['temperature']}, G {r['group_size']}, {r['queries_per_step']} queries per step, up to "
           f"{r['max_new_tokens']} new tokens, u-GRPO weight {'on' if r['uncertainty'] else 'off'}, {credit_text(r)}, "
           f"{adam_text(r)}, precision {r.get('precision') or '32-true'}, {decoding_text(r)}"]
    share = summary.get("start_variance_share") or {}
    if share:
        out.append("what the start policy's advantages are made of (probe; share of the within-group variance of the "
                   "total): " + ", ".join(f"{c} {v:.2f}" for c, v in share.items()))
    named = (("reward/var_share/r_ans", "R_ans's share of the within-group variance during training", ".2f"),
             ("reward/frac_zero_spread", "groups with no reward spread (no signal)", ".0%"),
             ("advantage/sign_flip", "advantage sign flips when a group's mates are redrawn (0.5 = coin)", ".2f"),
             ("advantage/noise_std", "advantage std under those redraws", ".2f"),
             ("rollout/truncated", "rollouts that hit max_new_tokens", ".1%"),
             ("policy/clip_region", "clipped token share", ".3f"),
             ("policy/grad_norm", "gradient norm before clipping", ".3f"))
    for key, what, fmt in named:
        v = _mean_over_steps(summary, key)
        if v is not None:
            out.append(f"{what}: {format(v, fmt)} (mean over steps and seeds)")
    by_group = grad_by_group(summary)
    if by_group:
        out.append(by_group)
    step_s, rollout_s = _mean_over_steps(summary, "time/step_s"), _mean_over_steps(summary, "time/rollout_s")
    if step_s is not None:
        out.append(f"cost: {step_s:.0f} s a step, of which rollouts {rollout_s or 0:.0f} s (mean over steps and seeds; "
                   f"{_threads(summary)})")
    kl = summary["per_step"].get("policy/kl")
    if kl:
        last = kl[max(kl, key=int)]
        out.append(f"KL to the start at the last step: {last['mean']:.2e} ± {last['std']:.1e} (how far the policy moved)")
    return out


def _draws(summary: Mapping[str, Any]) -> str:
    g, n = summary["probe_group_size"], summary.get("probe_repeats", 1)
    if n == 1:
        return f"{g} times per query (sampling seed 1000 + s for both)"
    return (f"{n * g} times per query: {n} draws of {g}, draw r with sampling seed 1000 (r + 1) + s for both, "
            f"pooled by mean")


def _answers(counts: Mapping[str, int], top: int = 3) -> str:
    items = list(counts.items())
    rest = sum(n for _, n in items[top:])
    return ", ".join(f"{a} {n}" for a, n in items[:top]) + (f", other {rest}" if rest else "")


def _r(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def query_section(summary: Mapping[str, Any]) -> str:
    """Per training query: gold, R_ans start → end and the answers given (counts over seeds and rollouts), or
    '' when the probes kept no per-query answers."""
    rows = summary.get("per_query")
    if not rows:
        return ""
    up = sum(1 for r in rows if None not in (r["start_r_ans"], r["end_r_ans"]) and r["end_r_ans"] > r["start_r_ans"])
    down = sum(1 for r in rows if None not in (r["start_r_ans"], r["end_r_ans"]) and r["end_r_ans"] < r["start_r_ans"])
    n = sum(rows[0]["start_answers"].values())
    lines = [f"## Per query: which answers moved\n\nR_ans (mean over seeds) and the answers given ({n} rollouts per "
             f"query and policy: every seed's probe draws that kept per-query answers, "
             f"{summary.get('per_query_draws', 1)} per seed); descriptive, no interval. R_ans rose on {up} of "
             f"{len(rows)} queries and fell on {down}.\n",
             "| query | type | gold | R_ans start | R_ans end | answers start | answers end |", "|---" * 7 + "|"]
    lines += [f"| {i} | {r['answer_type']} | {r['gold']} | {_r(r['start_r_ans'])} | {_r(r['end_r_ans'])} | "
              f"{_answers(r['start_answers'])} | {_answers(r['end_answers'])} |" for i, r in enumerate(rows)]
    lines.append(teaching_line(summary.get("teaching_groups"), summary.get("probe_group_size")))
    lines.append(prior_line(summary.get("yes_share_change") or {}))
    return "\n".join(lines) + "\n\n"


def teaching_line(groups: Mapping[str, Mapping[str, int]] | None, group_size: int | None) -> str:
    """Where the start's answers can teach (``command.teaching_groups``), per gold; '' without both golds."""
    if not groups or set(groups) != {"yes", "no"}:
        return ""
    y, n = groups["yes"], groups["no"]
    return (f"\nWhere R_ans can teach at the start (a diagnostic added on 2026-12-06): the start's probe groups of "
            f"{group_size} that hold the gold answer and another, the groups a step's answer signal comes from, each "
            f"pushing toward its own gold: gold-Yes queries {y['mixed']} of {y['groups']} groups, gold-No queries "
            f"{n['mixed']} of {n['groups']}. The signal is balanced between the golds only where these counts are; "
            "where one gold has more, a shift of every answer toward it earns R_ans within the step.\n")


def prior_line(change: Mapping[str, Mapping[str, Any]], what: str = "the Yes share",
               heading: str = "Yes/No queries (seeds x queries intervals)", source: str = "these probes",
               digits: int = 2) -> str:
    """Did the Yes/No answer move toward each query's gold (learnt per query) or one way on all queries (one
    prior)? ``what`` is the measure of Yes (its share of sampled answers, or its teacher-forced log-odds);
    both claims are "toward the gold", each read from its interval; '' without both golds."""
    if set(change) != {"yes", "no"}:
        return ""
    y, n = change["yes"], change["no"]
    f = f"{{:.{digits}f}}"
    toward_yes = claim_line(f"{what} rises on the {y['n_queries']} gold-Yes queries ({f.format(y['start'])} → "
                            f"{f.format(y['end'])})", y["diff"], y["ci_low"], y["ci_high"], digits=digits)
    toward_no = claim_line(f"{what} falls on the {n['n_queries']} gold-No queries ({f.format(n['start'])} → "
                           f"{f.format(n['end'])})", n["diff"], n["ci_low"], n["ci_high"], higher_is_better=False,
                           digits=digits)
    how = {"per_query": "Both move toward their gold beyond their intervals: the answer is learnt per query.",
           "one_prior": (f"{what[0].upper() + what[1:]} moves the same way on both golds beyond their intervals: the "
                         "answer shifts as one prior over queries, not per query, so R_ans gains on one gold what it "
                         "loses on the other."),
           "away": "Both move away from their gold beyond their intervals.",
           "tie": (f"At least one is a tie: {source} cannot tell an answer learnt per query from one prior shared by "
                   "all queries.")}[prior_kind(change)]
    return f"\n{heading}:\n\n- {toward_yes}\n- {toward_no}\n\n{how}"


def prior_kind(change: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What the two "toward the gold" claims say together: per_query (both hold), one_prior (one holds, the
    other is worse: the same shift on both golds), away (both worse), tie (either ties); None without both."""
    if set(change) != {"yes", "no"}:
        return None
    vy = verdict(change["yes"]["diff"], change["yes"]["ci_low"], change["yes"]["ci_high"])
    vn = verdict(change["no"]["diff"], change["no"]["ci_low"], change["no"]["ci_high"], higher_is_better=False)
    if vy == vn == HOLDS:
        return "per_query"
    if {vy, vn} == {HOLDS, WORSE}:
        return "one_prior"
    return "away" if vy == vn == WORSE else "tie"


def blocking_line(summary: Mapping[str, Any]) -> str:
    """Which reward component blocks the rise, read from the evidence: R_ans's share of the within-group
    variance during training and how the answer moved (the teacher-forced log-odds when the check read them,
    else the sampled Yes shares). Names R_ans only where the answer moved as one prior beyond both intervals
    and R_ans carries most of the variance; otherwise says what is not settled."""
    share = _mean_over_steps(summary, "reward/var_share/r_ans")
    found = next(((key, what, source, kind) for key, what, source in (
        ("logodds_change", "the log-odds of Yes", "on fixed contexts"), ("yes_share_change", "the Yes share", "in the probes"))
        if (kind := prior_kind(summary.get(key) or {})) is not None), None)
    if found is None or share is None:
        return "Which component blocks it is not settled: the check has no per-query answers to read."
    key, what, source, kind = found
    ch = summary[key]
    moved = f"{what} {ch['yes']['diff']:+.2f} on gold-Yes queries, {ch['no']['diff']:+.2f} on gold-No ones, {source}"
    if kind == "one_prior" and share >= 0.5:
        return (f"Which component blocks it: **R_ans**. It carries {share:.0%} of the within-group reward variance "
                "during training, so it sets most of each advantage, and the answer moved as one prior over all queries "
                f"({moved}), which R_ans pays on one gold and charges on the other.{_other_components(summary)}")
    how = {"per_query": "per query", "one_prior": "as one prior", "away": "away from its gold",
           "tie": "in a way these intervals cannot tell"}[kind]
    return (f"Which component blocks it is not settled: R_ans carries {share:.0%} of the within-group reward variance "
            f"and the answer moved {how} ({moved}).{_other_components(summary)}")


def _other_components(summary: Mapping[str, Any]) -> str:
    """How the components besides R_ans read on their own intervals (Verdict, per component), or ''."""
    other = {c: v["interval"]["verdict"] for c, v in (summary.get("rise_components") or {}).items()
             if c != "r_ans" and "interval" in v}
    if not other:
        return ""
    return (" The other components' rises read (per component, above): "
            + ", ".join(f"{c} {v}" for c, v in other.items()) + ".")


def logodds_section(summary: Mapping[str, Any]) -> str:
    """The teacher-forced version of the Yes-share claims, or '' when the check read no log-odds."""
    change = summary.get("logodds_change")
    if not change or set(change) != {"yes", "no"}:
        return ""
    n_ctx = change["yes"]["n_contexts"] + change["no"]["n_contexts"]
    intro = (f"## The answer's log-odds on fixed contexts\n\nThe start wrote {summary['answer_contexts']} rollouts "
             f"per yes/no query (sampling seed {summary['context_seed']}); the {n_ctx} that reached `<answer>` are cut where each decides: "
             "before the last \" Yes\" / \" No\" it wrote ahead of the tag, the word its conclusion states and the "
             "tag copies (right after the tag when it stated none; `rl.probe.decision_point`). Every policy (the "
             "start, each seed's end) gives log p(Yes) − log p(No) for the word written there, on that same text "
             "(`rl.probe.answer_logodds`, temperature 1). The reasoning and the observation are held fixed, "
             "so this measures how each policy maps a context to its answer, without sampling noise.\n")
    return (intro + prior_line(change, "the log-odds of Yes", "Per gold (seeds x queries intervals)",
                               "the log-odds", digits=2) + split_lines(summary.get("logodds_split")) + "\n\n")


def split_lines(split: Mapping[str, Mapping[str, Any]] | None) -> str:
    """The same change split into a shift shared by every query and a move toward each query's gold, golds
    weighted equally (``logodds_split``): the direct reading of "learnt per query", since a shared shift
    cancels from the second. A diagnostic added on 2026-12-05 after every check's declared readings,
    so no declared verdict reads it. '' without a split."""
    if not split:
        return ""
    sh, tg = split["shared"], split["toward_gold"]
    side = {HOLDS: "toward Yes, beyond its interval", WORSE: "toward No, beyond its interval"}.get(
        verdict(sh["diff"], sh["ci_low"], sh["ci_high"]), "a tie: the interval includes 0")
    toward = claim_line("the log-odds move toward each query's own gold, the shared shift cancelled: "
                        "(Δ_Yes − Δ_No) / 2", tg["diff"], tg["ci_low"], tg["ci_high"], digits=2)
    n_yes, n_no = sh.get("n_yes"), sh.get("n_no")
    counts = f"{n_yes} gold-Yes and {n_no} gold-No queries, " if n_yes and n_no else ""
    return ("\n\nSplit, golds weighted equally (a diagnostic added on 2026-12-05 after every check's declared "
            f"readings, so no verdict rests on it; {counts}seeds x queries intervals that resample each gold's "
            "queries apart; with this few queries a percentile bootstrap runs narrow):\n\n"
            f"- a shift shared by every query, (Δ_Yes + Δ_No) / 2: {sh['diff']:+.2f} [{sh['ci_low']:+.2f}, "
            f"{sh['ci_high']:+.2f}]: {side}\n- {toward}" + per_seed_line(split.get("per_seed")))


def per_seed_line(per_seed: Mapping[str, Mapping[str, float]] | None) -> str:
    """Each training seed's split (its queries' means, no interval), so that a shared shift near 0 made of
    two large moves of opposite sign reads as such; '' for a summary written before it was recorded."""
    if not per_seed:
        return ""
    parts = [f"seed {s}: shared {v['shared']:+.2f}, toward gold {v['toward_gold']:+.2f}" for s, v in per_seed.items()]
    return "\n- per training seed (descriptive): " + "; ".join(parts)


def look_section(summary: Mapping[str, Any]) -> str:
    """The sequential design when this check is a further look at the seeds of an earlier one: what the earlier
    look found and the Bonferroni bound on claiming a rise falsely over both looks; '' for a first look."""
    prev = summary.get("earlier_look")
    if not prev:
        return ""
    r, level = prev["rise"], summary.get("level", 0.95)
    bound = (1 - prev["level"]) + (1 - level)
    return (f"\nThis is a second look at the same seeds: [{prev['dir']}]({_rel(prev['dir'])}) trained them "
            f"{prev['steps']} steps and read {r['diff']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] "
            f"({r['verdict']}, {prev['level']:.1%} interval); these runs continue them to {summary['steps']} steps and "
            f"every end is probed afresh. Over the two looks the chance of claiming a rise that is not there is at most "
            f"{1 - prev['level']:.1%} + {1 - level:.1%} = {bound:.1%} (Bonferroni), so this look's interval is "
            f"{level:.1%}.\n")


def _rel(results_dir: str) -> str:
    """A link from one results/grpo_check/<check> README to another check's results dir."""
    return "../" + Path(results_dir).name


def component_lines(summary: Mapping[str, Any]) -> str:
    """The per-component rises: mean ± std over seeds, and the interval over seeds x queries where the probes
    kept per-query components. These say which component moved; they are diagnostics read beside the verdict,
    not four more verdicts on the check (nothing here corrects for reading four), so their words are the
    interval's and no more."""
    comps = summary.get("rise_components") or {}
    if not comps:
        return "- per component: –"
    level = summary.get("level", 0.95)
    if not any("interval" in v for v in comps.values()):
        return ("- per component (end − start, mean ± std over seeds; no per-query records, so no interval): "
                + "; ".join(f"{c} {v['mean']:+.3f} ± {v['std']:.3f}" for c, v in comps.items()))
    rows = []
    for c, v in comps.items():
        if "interval" not in v:
            rows.append(f"  - {c} {v['mean']:+.3f} ± {v['std']:.3f} (no interval: fewer than 2 queries define it)")
            continue
        i = v["interval"]
        rows.append(f"  - {c} {v['mean']:+.3f} ± {v['std']:.3f}; {v['n_queries']} queries: "
                    f"{claim_line(f'{c} rises', i['diff'], i['ci_low'], i['ci_high'], digits=3)}")
    return (f"- per component, a diagnostic of which one moved (end − start: mean ± std over seeds of the probe's "
            f"mean over rollouts, then the {level:.1%} seeds x queries interval of the per-query means, on the queries "
            "that define it; four readings, "
            "not corrected for their number):\n" + "\n".join(rows))


def _per_query(summary: Mapping[str, Any]) -> int:
    return summary["probe_group_size"] * summary.get("probe_repeats", 1)


def readme(summary: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """README.md of the check, from ``summary.json`` and ``run_info.json``."""
    rise = summary["rise"]
    level = summary.get("level", 0.95)
    verdict_line = claim_line(f"GRPO raises the reward of its own training queries (end − start, probe, {level:.1%} "
                              "interval)", rise["diff"], rise["ci_low"], rise["ci_high"], digits=3)
    curve = "; ".join(f"seed {s}: {c['first']:+.3f} → {c['last']:+.3f}" for s, c in summary["curve"].items())
    start = (f"`{summary['sft_run_dir']}` (policy base `{summary['policy_base']}`, weights `{summary['sft_release_hash']}`)"
             if summary.get("sft_release_hash") else f"the config's policy (`{summary['policy_base']}`)")
    command = info.get("command") or f"stockr1 bench grpo_check --config {info['config_path']} --out <this dir>"
    figs = "".join(f"\n![{f}]({f})\n" for f in info.get("figures", []))
    (a, b), (c, d) = rise["ci_seeds_questions"], rise["ci_questions"]
    both = (f"\n- the two intervals: seeds x queries [{a:+.3f}, {b:+.3f}] (resampling the {rise['n_seeds']} training "
            f"seeds), queries only [{c:+.3f}, {d:+.3f}]; the verdict reads the wider ({rise['interval']})")
    status = ("The optimiser optimises on these queries." if rise["verdict"] == HOLDS else
              "The reward does not rise beyond the interval: read the diagnostics below before anything else. "
              + blocking_line(summary))
    return f"""# GRPO on its own training queries (`stockr1 bench grpo_check`)

{generated_line(command, info.get('commit'), info.get('date'))}

Start: {start}. {summary['n_queries']} fixed training queries, every one in every step, {summary['steps']} steps,
training seeds {summary['seeds']}; recipe `{info['config']['grpo']['config']}` with
`{json.dumps(info['config']['grpo'].get('overrides', {}), default=str)}`.
Each policy (the start and every seed's end) re-sampled {_draws(summary)} (`rl.probe`), full Stock-R1 reward; interval: {level:.1%} {rise['interval']} bootstrap
({summary['n_boot']} resamples, the wider of the seeds x queries and the queries-only one).
{look_section(summary)}
## Verdict

- {verdict_line}{both}
- probe reward start {summary['start_reward']['mean']:+.3f} ± {summary['start_reward']['std']:.3f} → end
  {summary['end_reward']['mean']:+.3f} ± {summary['end_reward']['std']:.3f} (mean ± std over seeds)
{component_lines(summary)}
- the start is one policy, probed once per seed with that seed's sampling seeds: its spread over seeds
  (± {summary['start_reward']['std']:.3f}) is the probe's sampling noise alone, {_per_query(summary)} rollouts per query; the
  end's (± {summary['end_reward']['std']:.3f}) is the training-seed spread plus that noise
- training reward, mean of the first vs last {summary['window']} steps (descriptive): {curve or '–'}

{status}

## Per step (mean ± std over seeds)

{step_table(summary)}
{query_section(summary)}{logodds_section(summary)}## Diagnostics

{chr(10).join(f"- {d}" for d in diagnostics(summary))}
{figs}
Files: [summary.json](summary.json), [steps.json](steps.json) (seed → metric → step), [run_info.json](run_info.json).
"""


def plot(summary: Mapping[str, Any], path: Path) -> Path | None:
    """Per-step curves (mean ± std over seeds) of ``PANELS``; None when nothing was logged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ps = summary["per_step"]
    if "reward/total" not in ps:
        return None
    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    for ax, (key, label) in zip(axes.ravel(), PANELS, strict=True):
        c = ps.get(key)
        if c:
            t = np.array(sorted(int(k) for k in c))
            m = np.array([c[k]["mean"] for k in sorted(c, key=int)])
            s = np.array([c[k]["std"] for k in sorted(c, key=int)])
            ax.plot(t, m, lw=1.8)
            ax.fill_between(t, m - s, m + s, alpha=0.2)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("GRPO step", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
