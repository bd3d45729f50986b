"""The README of `stockr1 bench grpo_credit` (``benchmarks.grpo_check.credit``), generated from its summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stockr1.metrics.verdict import HOLDS, TIE, WORSE, claim_line, verdict
from stockr1.outdir import generated_line

LABEL = {"full": "the step's update (all tokens: what GRPO does)",
         "decision": "an update from the answer tokens' gradient alone",
         "rest": "an update from every other token's gradient"}
CREDIT_LABEL = {"credit:sequence": "sequence (Stock-R1 Eq. 1)",
                "credit:answer_span": "answer_span",
                "credit:answer_span,cancel": "answer_span, answer prior cancelled",
                "credit:answer_span,project": "answer_span, answer prior projected out"}


def _ci(r: Mapping[str, Any], digits: int = 4) -> str:
    return f"{r['diff']:+.{digits}f} [{r['ci_low']:+.{digits}f}, {r['ci_high']:+.{digits}f}]"


def side(r: Mapping[str, Any]) -> str:
    """A shared shift has a direction, not a better side: toward Yes, toward No, or a tie."""
    return {HOLDS: "toward Yes", WORSE: "toward No"}.get(verdict(r["diff"], r["ci_low"], r["ci_high"]), "tie")


def _verdict_word(r: Mapping[str, Any]) -> str:
    v = verdict(r["diff"], r["ci_low"], r["ci_high"])
    return {TIE: "a tie (its interval includes 0)", HOLDS: "positive beyond its interval",
            WORSE: "negative beyond its interval"}[v]


def _range(v: list[float], fmt: str) -> str:
    return " and ".join(format(x, fmt) for x in v)


def reading(s: Mapping[str, Any]) -> str:
    """What the numbers say, read from the applied update's moves, each claim from its interval."""
    part = {p: s["parts"][p]["applied"] for p in ("full", "decision", "rest")}
    full, dec = part["full"]["toward_gold"], part["decision"]["toward_gold"]
    lines = [claim_line(f"Toward gold in one step, {LABEL[p]}", r["toward_gold"]["diff"], r["toward_gold"]["ci_low"],
                        r["toward_gold"]["ci_high"], digits=4, unit=" nats") for p, r in part.items()]
    out = "\n".join(f"- {line}" for line in lines)
    v_full, v_dec = verdict(full["diff"], full["ci_low"], full["ci_high"]), verdict(dec["diff"], dec["ci_low"], dec["ci_high"])
    if v_full == HOLDS and v_dec == HOLDS and dec["diff"] > 0:
        out += (f"\n\nThe step's update moves answers toward their golds {full['diff'] / dec['diff']:.2f} times as far as "
                "an update from the answer tokens' gradient alone (descriptive: a ratio of two means).")
    g = s["geometry"]
    if v_dec == HOLDS and dec["diff"] > 0 and v_full != HOLDS:
        out += (f"\n\nReading: an update from the answer tokens' gradient alone moves each query's answer toward its "
                f"gold beyond its interval, but those tokens are {max(g['decision_token_share']):.2%} or less of the "
                f"generated tokens and carry {min(g['norm_share']['decision']):.3f}–{max(g['norm_share']['decision']):.3f} "
                f"of the gradient's norm; the step's update points where the other tokens' gradient points (cosine "
                f"{min(g['cos_full_rest']):.3f} or more in every seed), whose move toward gold is "
                f"{_verdict_word(part['rest']['toward_gold'])}, and the whole step's is {_verdict_word(full)}.")
    sh = part["full"]["shared"]
    if side(sh) != "tie":
        out += (f"\n\nThe step's update shifts every query's answer {side(sh)} ({sh['diff']:+.4f} nats, beyond its "
                f"interval) while its move toward each query's own gold is {_verdict_word(full)}.")
    obs = s.get("observed_per_step")
    if obs:
        t = obs["toward_gold"]
        out += (f"\n\nThe check itself saw {t['diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}] nats per step "
                f"toward gold (its post-hoc split over {obs['steps']} steps, divided by the steps: Adam's later steps "
                "are not its first, so this is an order of magnitude to compare, not a test).")
    return out


def table(s: Mapping[str, Any], kind: str) -> str:
    rows = ["| update | toward each query's gold | verdict | shared by every query | direction |", "|---|---|---|---|---|"]
    for p in ("full", "decision", "rest"):
        t, sh = s["parts"][p][kind]["toward_gold"], s["parts"][p][kind]["shared"]
        rows.append(f"| {LABEL[p]} | {_ci(t)} | {t['verdict']} | {_ci(sh)} | {side(sh)} |")
    obs = s.get("observed_per_step")
    if obs and kind == "applied":
        rows.append(f"| observed in the check, per step (÷ {obs['steps']}) | {_ci(obs['toward_gold'])} | "
                    f"{obs['toward_gold']['verdict']} | {_ci(obs['shared'])} | {side(obs['shared'])} |")
    return "\n".join(rows)


def credit_section(s: Mapping[str, Any]) -> str:
    """The same batch's step under each compared credit (empty for a summary without them)."""
    names = [p for p in s["parts"] if p in CREDIT_LABEL]
    if not names:
        return ""
    rows = ["| credit | toward each query's gold | verdict | shared by every query | direction |", "|---|---|---|---|---|"]
    for p in names:
        t, sh = s["parts"][p]["applied"]["toward_gold"], s["parts"][p]["applied"]["shared"]
        rows.append(f"| {CREDIT_LABEL[p]} | {_ci(t)} | {t['verdict']} | {_ci(sh)} | {side(sh)} |")
    lines = [claim_line(f"Toward gold in one step under {CREDIT_LABEL[p]} credit", r["diff"], r["ci_low"], r["ci_high"],
                        digits=4, unit=" nats") for p in names for r in [s["parts"][p]["applied"]["toward_gold"]]]
    lines += [f"Shared shift in one step under {CREDIT_LABEL[p]} credit: {_ci(r)} nats, {side(r)}"
              + ("" if side(r) != "tie" else " (the interval includes 0)")
              for p in names for r in [s["parts"][p]["applied"]["shared"]]]
    seeds = s["parts"][names[0]]["applied"].get("per_seed")
    if seeds:
        lines += [f"Per seed (descriptive: one batch each, no interval), {CREDIT_LABEL[p]}: " + "; ".join(
            f"seed {k} toward gold {v['toward_gold']:+.3f}, shared {v['shared']:+.3f}"
            for k, v in s["parts"][p]["applied"]["per_seed"].items()) for p in names]
    diffs = s.get("credit_differences") or {}
    if diffs:
        rows += ["", "| paired on the same batch | toward each query's gold | verdict | shared by every query | direction |",
                 "|---|---|---|---|---|"]
        for key, r in diffs.items():
            hi, lo = key.split(" - ")
            t, sh = r["toward_gold"], r["shared"]
            rows.append(f"| {CREDIT_LABEL[hi]} − {CREDIT_LABEL[lo]} | {_ci(t)} | {t['verdict']} | {_ci(sh)} | "
                        f"{side(sh)} |")
            lines.append(claim_line(f"{CREDIT_LABEL[hi]} − {CREDIT_LABEL[lo]}, toward gold", t["diff"], t["ci_low"],
                                    t["ci_high"], digits=4, unit=" nats"))
            lines.append(f"{CREDIT_LABEL[hi]} − {CREDIT_LABEL[lo]}, shared shift: {_ci(sh)} nats, "
                         + ("a tie (the interval includes 0)" if side(sh) == "tie" else f"{side(sh)} beyond its interval"))
    return ("\n## The same batch's step under each credit (rl/grpo.py, \"Credit\"), the update applied\n\n"
            "Each seed's one batch (the rollouts and rewards above), its loss under each credit, AdamW's first update "
            "from that loss's gradient, and the moves read again on the same contexts. The credits differ only in "
            "which advantage and weight each generated token carries, so the sampling noise of separate runs is "
            "out of this comparison; the paired rows difference two credits per (seed, query) before the interval. "
            "AdamW's first update is about −lr sign(g) per weight, so a credit that cancels a direction in the "
            "gradient (the answer prior, rl/grpo.py) need not cancel it in the update.\n\n" + "\n".join(rows) + "\n\n" + "\n".join(f"- {x}" for x in lines) + "\n")


def linear_section(s: Mapping[str, Any]) -> str:
    """First-order moves of updates linear in each gradient (empty for draws without them)."""
    if "linear" not in s["parts"]["full"]:
        return ""
    rows = ["| update, linear in its gradient | toward each query's gold | verdict | shared by every query | direction |",
            "|---|---|---|---|---|"]
    for p, r in s["parts"].items():
        t, sh = r["linear"]["toward_gold"], r["linear"]["shared"]
        name = LABEL.get(p) or f"the step under {CREDIT_LABEL.get(p, p)} credit"
        rows.append(f"| {name} | {_ci(t)} | {t['verdict']} | {_ci(sh)} | {side(sh)} |")
    return ("\n## The same, predicted to first order for an update linear in the gradient (−lr g / rms(g))\n\n"
            "Each gradient above scaled to AdamW's first-step per-weight RMS (lr) without normalising each weight "
            "apart (`rl.credit.linear_step`). Where a move here is small and the applied one above is large, the "
            "per-weight normalisation of AdamW's first step made it, not the gradient.\n\n" + "\n".join(rows) + "\n\n"
            + linear_reading(s) + "\n")


def linear_reading(s: Mapping[str, Any]) -> str:
    """Per part, the linear update's moves beside AdamW's applied first step, per seed (descriptive), and what
    the step's own (``full``) pair says, each side read from its interval."""
    lines = []
    for p, r in s["parts"].items():
        if p != "full" and r == s["parts"]["full"]:
            continue  # the config's own credit: the step's update itself, already listed
        name = LABEL.get(p) or f"the step under {CREDIT_LABEL.get(p, p)} credit"
        lin, app = r["linear"].get("per_seed", {}), r["applied"].get("per_seed", {})
        lines.append(f"- {name}, per seed (descriptive), linear (AdamW applied): " + "; ".join(
            f"seed {k} toward gold {v['toward_gold']:+.3f} ({app[k]['toward_gold']:+.3f}), shared "
            f"{v['shared']:+.3f} ({app[k]['shared']:+.3f})" for k, v in lin.items() if k in app))
    lin, app = s["parts"]["full"]["linear"], s["parts"]["full"]["applied"]
    shared = {"AdamW's": app["shared"], "the linear update's": lin["shared"]}
    words = "; ".join(f"{who} shared shift is {_ci(r)} nats, "
                      + ("a tie (its interval includes 0)" if side(r) == "tie" else f"{side(r)} beyond its interval")
                      for who, r in shared.items())
    lines.append(f"\nThe step's own gradient: toward each query's gold AdamW's first step moves "
                 f"{_ci(app['toward_gold'])} nats, {_verdict_word(app['toward_gold'])}, and the linear update "
                 f"{_ci(lin['toward_gold'])}, {_verdict_word(lin['toward_gold'])}; {words}.")
    return "\n".join(lines)


def readme(s: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    g = s["geometry"]
    yes = s["batch_yes_share"]
    yes_lines = "\n".join(
        f"- seed {seed}: " + ", ".join(f"q{q} ({s['gold'][q]}) " + ("–" if v is None else f"{v:.2f}")
                                     for q, v in sorted(shares.items(), key=lambda kv: int(kv[0])))
        for seed, shares in yes.items())
    return f"""# Where a GRPO step's update comes from (`stockr1 bench grpo_credit`)

{generated_line(info['command'], info['commit'], info['date'])}

Config: `{info['config_path']}` (its start, {s['n_queries']} training queries ({s['golds']['yes']} gold Yes,
{s['golds']['no']} gold No), recipe and seeds {s['seeds']}), lr {s['lr']:g}, credit {s.get('credit', 'sequence')}. For each seed, its first step's
real batch is drawn and the gradient of its loss is split exactly into the part through the tokens that state
the answer (the decision word before `<answer>` and the `<answer>` span) and the part through every other
model-written token (`rl.credit`). AdamW's first update from each part (−lr g / (|g| + eps)) is added to
the start's trainable weights and each query's answer log-odds is read again on {s['contexts_per_query']} of the
check's fixed start contexts per query (then the weights are restored); the same moves predicted to first
order are shown below it. The moves are split as the check splits its readings (golds weighted equally),
with {s['level']:.0%} seeds x queries intervals stratified by gold.

## Move of the answer log-odds in one step (nats), the update applied

{table(s, "applied")}

{reading(s)}
{credit_section(s)}
## The same, predicted to first order (Σ update · ∇ log-odds)

{table(s, "first_order")}

Where the two tables agree, the log-odds are close to linear over one step at this lr; where they differ,
the applied moves are the ones to read.
{linear_section(s)}
## The batch's gradient

- answer tokens: {_range(g['decision_token_share'], '.2%')} of the generated tokens (seeds {s['seeds']};
  {_range([float(x) for x in g['generated_tokens']], ',.0f')} tokens; rollouts with an answer:
  {_range([float(x) for x in g['rollouts_with_answer']], '.0f')})
- norm of the answer tokens' part / the whole gradient: {_range(g['norm_share']['decision'], '.3f')}; of the rest's:
  {_range(g['norm_share']['rest'], '.3f')}
- cosine(whole, answer tokens' part): {_range(g['cos_full_decision'], '+.3f')}; cosine(whole, rest):
  {_range(g['cos_full_rest'], '+.3f')}
- Yes share of each query's rollouts in the batch (query, gold, share):
{yes_lines}

What this does not say: it is a fresh optimiser's first step (later Adam steps divide by a running √v,
and the policy and its samples move); the seed spread comes from {len(s['seeds'])} draws only, and a percentile bootstrap over {s['golds']['yes']} + {s['golds']['no']}
queries runs narrow.
"""
