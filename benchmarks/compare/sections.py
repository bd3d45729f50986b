"""README sections of ``stockr1 bench compare`` that read what a run saved in ``run_info.json``: the
training budgets of every method, each sibling's SFT and its validation parse check, and where
Trade-R1's two gates differ. Nothing here is typed by hand; a run without the saved fields (one from
before the SFT stage) gets no section."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from stockr1.metrics.stats import wilson_interval
from stockr1.metrics.verdict import HOLDS, TIE, WORSE, target_verdict, verdict

UNPARSED_TARGET = 0.05  # at most 5% unparsed validation decisions after SFT
TARGET_WORDS = {HOLDS: "yes", TIE: "undecided", WORSE: "NO"}


def _f(x: Any, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def budget_section(run_info: Mapping[str, Any]) -> list[str]:
    """Every method's SFT and GRPO budget, side by side (Stock-R1's from its SFT run's summary)."""
    cfg, infos = run_info["config"], run_info.get("info", {})
    sft, g = cfg.get("sft"), cfg["grpo"]
    if not sft:
        return []
    s1 = run_info.get("stock_r1_sft") or {}
    grpo = (f"{g.get('steps')} steps x {g.get('queries_per_step')} queries x {g.get('group_size')} rollouts, "
            f"lr {g.get('lr')}")
    rows = ["| Method | SFT data | SFT steps x batch | SFT lr | SFT (s) | GRPO |", "|---|---|---|---|---|---|"]
    s1_grpo = (run_info.get("policies") or {}).get("stock_r1", {}).get("grpo_steps", g.get("steps"))
    if s1:
        rows.append(f"| stock_r1 | {s1.get('n_traces')} traces (joint SFT, `{s1.get('run_dir')}`) | "
                    f"{s1.get('steps')} x {s1.get('batch_size')} | {s1.get('lr')} | {_f(s1.get('sec'), '.0f')} | "
                    f"{grpo if s1_grpo else 'none (evaluated as released)'} |")
    for name in run_info["methods"]:
        r = (infos.get(name) or {}).get("sft")
        if r:
            rows.append(f"| {name} | {r['examples']} train-split days | {r['steps']} x {r['batch_size']} | {r['lr']} | "
                        f"{_f(r.get('sft_s'), '.0f')} | {grpo} |")
    return ["## Budgets", "",
            "Each sibling method trains its own SFT on its own teacher texts (`rl.methods.text_sft`, "
            f"{sft['warmup_steps']} warmup steps then cosine to {sft['min_lr_ratio']} x lr) from the same seeded init, "
            f"for {sft['steps']} steps of batch {sft['batch_size']}"
            + (" (the step budget of Stock-R1's joint SFT run)" if s1 and s1.get("steps") == sft["steps"] else "")
            + ", then the GRPO budget. SFT seconds are the wall time "
            "of the run that trained each (`--methods` subsets run side by side share the cores), so they compare "
            "only roughly.", "",
            *rows, ""]


def sft_section(run_info: Mapping[str, Any]) -> list[str]:
    """Each sibling's SFT: loss and the share of unparsed greedy decisions on validation decision days
    (target <= 5%), with a Wilson interval; the target column reads that interval
    (``target_verdict``): yes = below 5% beyond it, NO = above beyond it, undecided = it straddles 5%."""
    infos = run_info.get("info", {})
    reps = {n: (infos.get(n) or {}).get("sft") for n in run_info["methods"]}
    reps = {n: r for n, r in reps.items() if r}
    if not reps:
        return []
    rows = ["| Method | Loss first -> last 50 | Validation decisions | Unparsed | Unparsed (%) [95%] | <= 5% |",
            "|---|---|---|---|---|---|"]
    for n, r in reps.items():
        k, m = int(r["val_unparsed"]), int(r["val_decisions"])
        lo, hi = wilson_interval(k, m) if m else (math.nan, math.nan)
        ok = TARGET_WORDS[target_verdict(k / m, lo, hi, UNPARSED_TARGET, at_least=False)] if m else "-"
        rows.append(f"| {n} | {r['loss_first']:.3f} -> {r['loss_last']:.3f} | {m} | {k} | "
                    f"{100 * k / max(1, m):.1f} [{100 * lo:.1f}, {100 * hi:.1f}] | {ok} |")
    return ["## After SFT: parseable decisions on held-out days", "",
            "Greedy decisions of each SFT policy (before GRPO) on the validation split's decision days (every "
            "holding-th validation day per ticker): the test days are not used to check or pick anything. "
            "Trade-R1's FSR and DSR rows are one SFT run (one teacher).", "", *rows, ""]


def gate_section(run_info: Mapping[str, Any]) -> list[str]:
    """Trade-R1 FSR vs DSR: per GRPO step, both gates and their inputs on each run's own rollouts
    (logged at weight 0), and how far apart the two trained policies and their decisions ended."""
    infos, gates = run_info.get("info", {}), run_info.get("trade_r1_gates")
    steps = {n: (infos.get(n) or {}).get("rewards_per_step") for n in ("trade_r1_fsr", "trade_r1_dsr")}
    if not all(steps.values()) or not gates:
        return []
    rows = ["| Run | Step | r (market) | s (consistency) | G_FSR | G_DSR | G_FSR - G_DSR | group spread |",
            "|---|---|---|---|---|---|---|---|"]
    for n, hist in steps.items():
        for k, h in enumerate(hist, 1):
            fsr, dsr = h.get("gate_fsr"), h.get("gate_dsr")
            diff = fsr - dsr if fsr is not None and dsr is not None else None
            rows.append(f"| {n} | {k} | {_f(h.get('r'), '.4f')} | {_f(h.get('s'), '.3f')} | {_f(fsr, '.3f')} | "
                        f"{_f(dsr, '.3f')} | {_f(diff, '.3f')} | {_f(h.get('group_std'), '.3f')} |")
    same, moved = gates["same_decisions"], (gates["param_l2_fsr_vs_sft"], gates["param_l2_dsr_vs_sft"])
    logged = [h for hist in steps.values() for h in hist]
    r_abs = _mean([abs(h["r"]) for h in logged if h.get("r") is not None])
    s_mean = _mean([h["s"] for h in logged if h.get("s") is not None])
    spread = {n: _mean([h["group_std"] for h in hist if h.get("group_std") is not None]) for n, hist in steps.items()}
    if max(moved) == 0:
        why = ("neither run's GRPO moved its weights: every group's rollouts got the same reward (no advantage), "
               "so the rows coincide by construction.")
    elif same >= 0.99:
        why = ("the GRPO budget moves the weights too little to change any greedy argmax, so the rows coincide "
               "although the training rewards differ.")
    else:
        why = "the gates led the two runs to different decisions."
    return ["## Trade-R1: where FSR and DSR differ", "",
            "Both runs start from the same SFT policy and sample with the same seed; each trains on its own gate "
            "(FSR: G = r + 2s; DSR: G = r (0.5 + s) if r > 0 else r (2 - s)) and logs the other gate and its inputs "
            "at weight 0 on its own rollouts (so step 1, before any update, is the same in both). "
            f"Over the logged steps mean |r| is {_f(r_abs, '.4f')} and mean s {_f(s_mean, '.3f')}: FSR's G moves "
            "with 2s, DSR's with r scaled by s, so the two rank a group's rollouts differently wherever r and s "
            "disagree. Advantages are normalised by each group's spread ((G - mean) / (std + 1e-4), `rl.grpo`), so "
            f"the gates' different scales (mean group spread {_f(spread['trade_r1_fsr'], '.4f')} under FSR, "
            f"{_f(spread['trade_r1_dsr'], '.4f')} under DSR) barely matter: what differs is the order of a group's "
            "rollouts.", "", *rows, "",
            f"After GRPO the two policies are {gates['param_l2_fsr_dsr']:.4g} apart (L2 over all weights; each moved "
            f"{moved[0]:.4g} / {moved[1]:.4g} from the shared SFT policy) and {100 * same:.1f}% of their greedy test "
            f"decisions are the same side: {why}", ""]


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else math.nan


def scale_section(run_info: Mapping[str, Any], intervals: Mapping[str, Any] | None) -> list[str]:
    """What the table can and cannot tell at this scale (the count of ties read from the intervals)."""
    days = run_info["decision_days"]
    diffs = {k: v["cumulative_return"] for k, v in (intervals or {}).get("differences", {}).items()
             if not k.endswith("(anonymised)") and v.get("cumulative_return", {}).get("lo") is not None}
    ties = sum(verdict(c["value"], c["lo"], c["hi"]) == TIE for c in diffs.values())
    return ["## What this table can and cannot tell", "",
            f"- It can tell whether each method's pipeline runs end to end on equal terms and how its decisions "
            f"behave: {days['n']} non-overlapping decisions per method, the parse rate, the sides, tokens and tool "
            "calls per decision, and intervals that say when two rows are indistinguishable.",
            "- It cannot rank the methods as the papers do: every policy is a tiny random-init Qwen3 (no language "
            f"or market knowledge) trained on CPU, and {ties} of the {len(diffs)} paired CR differences (against buy-and-hold "
            "and against Stock-R1) hold 0.",
            "- The real-scale protocol is configs/compare/real.yaml (GPU), with the same code path.", ""]


def _backbone(run_info: Mapping[str, Any], method: str) -> tuple[str, bool]:
    """(base model, random-init?) of one method's policy: its own entry in ``policies`` (a row may run
    on another backbone than the config's policy, e.g. Stock-R1 as the shipped small pretrained policy),
    else the config's policy."""
    own = (run_info.get("policies") or {}).get(method)
    policy = run_info["config"]["policy"]
    name = str((own or policy).get("name_or_path"))
    random_init = name == "tiny" or (own is None and int(policy.get("random_init_layers") or 0) > 0)
    return name, random_init


def _count(rate: float, n: int | None) -> str:
    """A rate as a count of ``n`` decisions (a percentage without ``n``)."""
    return f"{round(rate * n)} of {n}" if n else f"{100 * rate:.1f}%"


def probe_section(run_info: Mapping[str, Any], intervals: Mapping[str, Any] | None,
                  levels: Mapping[str, Any] | None = None,
                  metrics: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The memorisation probe's paired gaps (``<method> - <method> (anonymised)``) whose interval excludes 0,
    and what such a gap can mean for each method's own backbone: on a random-init policy it is not
    memorisation; on a pretrained one it may be, mixed with the probe's shift of the inputs, and ``metrics``
    show when that shift broke the output format (unparsed decisions with and without the probe)."""
    an = run_info.get("anonymise")
    if not an or not intervals:
        return []
    gaps = {k.split(" - ")[0]: v for k, v in intervals["differences"].items() if k.endswith("(anonymised)")}
    found = {m: [(label, c) for key, label in (("cumulative_return", "CR"), ("hit_rate", "HR"))
                 if (c := g.get(key)) and c["lo"] is not None and c["hi"] is not None
                 and verdict(c["value"], c["lo"], c["hi"]) != TIE] for m, g in gaps.items()}
    found = {m: v for m, v in found.items() if v}
    beyond = {m: [f"{label} {100 * c['value']:+.1f} [{100 * c['lo']:+.1f}, {100 * c['hi']:+.1f}] points"
                  for label, c in v] for m, v in found.items()}
    lines = ["## Memorisation probe: the gaps", "",
             ("Paired gaps beyond noise: " + "; ".join(f"{m} ({', '.join(v)})" for m, v in beyond.items()) + ".")
             if beyond else "No paired gap (CR, HR) excludes 0: the probe changed no method's results beyond noise.", ""]
    random_init = [m for m in beyond if _backbone(run_info, m)[1]]
    if random_init:
        lines += [f"Random-init policies ({', '.join(random_init)}) never saw the test period, so their gaps are not "
                  "memorisation. The probe keeps every answer, label "
                  f"and reward (tested) but moves the inputs outside the training range (dates {an['weeks']} weeks "
                  f"later, prices x {an['scale']}); a policy that keys on absolute price levels or calendar years "
                  "reacts. At real scale the same gap mixes memorisation with this level dependence; telling them "
                  "apart needs a policy that is invariant to the rescaling first.", ""]
    for m in (m for m in beyond if not _backbone(run_info, m)[1]):
        base = f"{m} runs on the pretrained `{_backbone(run_info, m)[0]}`"
        line = (f"{base}, so its gap may be memorisation (the knowledge-cutoff line at the top says whether these "
                "decision days precede its cutoff), mixed with its reaction to the probe's shifted inputs."
                if any(c["value"] > 0 for _, c in found[m]) else
                f"{base}; its gap is below 0 (it did worse on the named stocks and dates than on the anonymised "
                "ones), which knowing them would not cause: it is its reaction to the probe's shifted inputs.")
        plain, anon = (metrics or {}).get(m), (metrics or {}).get(f"{m} (anonymised)")
        if plain and anon and plain.get("parse_failure_rate") is not None and anon.get("parse_failure_rate") is not None:
            n = int(plain["n_decisions"]) if plain.get("n_decisions") else None
            line += (f" Its unparsed decisions: {_count(plain['parse_failure_rate'], n)} without the probe, "
                     f"{_count(anon['parse_failure_rate'], n)} with it")
            line += (": the shifted prompt breaks its output format, so part of the gap is that, not knowledge; a gap "
                     "read as memorisation needs a probe that leaves the policy's format intact."
                     if anon["parse_failure_rate"] > plain["parse_failure_rate"] else ".")
        lines += [line, ""]
    if levels and beyond:  # Stock-R1 writes absolute levels: where they sit against the plain and rescaled closes
        lo, hi = levels["close_range"]
        lines += [f"Stock-R1's emitted end values span {levels['end_value_range'][0]:.4g} .. "
                  f"{levels['end_value_range'][1]:.4g}, against test closes of {lo:.4g} .. {hi:.4g} "
                  f"({100 * levels['share_end_value_below_close']:.0f}% of them below the day's close) and "
                  f"rescaled closes of {lo * an['scale']:.4g} .. {hi * an['scale']:.4g}: whether a written level "
                  "reads as a fall or a rise depends on the price scale, not on the market.", ""]
    return lines
