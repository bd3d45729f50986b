"""`stockr1 bench action`: does the forecast action carry information, and does it control the decoder?

    stockr1 bench action --checkpoint checkpoints/action_tiny/decoder --out results/action

1. Oracle gain. On held-out windows, the decoder conditioned on the true future action a* = g(y) vs the
   same decoder with no action: return RMSE and CRPS (``stockr1.metrics.forecast``). Reported for the full
   a* (its numeric fields pin end/max/min, an upper bound), for a* without numeric fields (the discrete
   profile only) and for the direction field alone.
2. Controllability. For every window, request single-field actions that differ only in that field
   (direction up / down / flat, volatility low / medium / high, ...) and report how often the profile of
   the decoded trajectory g(decoded) has the requested value (``actions_from_forecast``, consensus over
   sample paths). The no-action decode gives the base rate of each value. Target (issue 21): >= 80% on
   the extremes and >= 60% on the middle value of direction, volatility, range, drawdown and tail risk.

``--baseline DIR`` measures a second decoder (e.g. the shipped one) on the same windows and seeds and
shows it beside (``baseline/...`` keys in metrics.json).

Writes ``metrics.json`` (model -> metric -> value), ``table.md``, ``controllability.png``,
``control_distribution.png`` (per field: requested value vs the realised distribution of g(decoded)) and a
``README.md`` generated from them (command, commit, date), all at once at the end (``stockr1.outdir``:
an ``--out`` holding results is refused unless ``--overwrite``; a failed run leaves it as it was).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from forecast_action.derive import ActionThresholds, actions_from_forecast, actions_from_windows
from forecast_action.schema import FIELD_SPECS, ForecastAction
from stockr1.metrics.forecast import REDUCERS, per_window, reduce
from stockr1.metrics.stats import block_resamples, paired_bootstrap, wilson_interval
from stockr1.metrics.verdict import HOLDS, TIE, WORSE, claim_line, target_verdict
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing
from stockr1.progress import Progress
from stockr1.types import Windows

CONTROL_FIELDS = ("direction", "volatility_level", "range_width_bin", "max_drawdown_bin", "tail_risk_level",
                  "trendline_fit", "monotonicity", "peak_timing_bin", "trough_timing_bin")
# issue 21: >= 80% on the extremes and >= 60% on the middle value of these fields
TARGET_FIELDS = ("direction", "volatility_level", "range_width_bin", "max_drawdown_bin", "tail_risk_level")
EXTREME_TARGET, MIDDLE_TARGET = 0.8, 0.6
REPORT = ("return_rmse", "crps", "price_mape", "da_10", "cov_close90", "width_close90", "rv_mae_dist")


def held_out(windows: Windows, split: str, max_windows: int | None) -> Windows:
    w = windows.split_of(split)
    if max_windows and len(w) > max_windows:  # evenly spaced in time, deterministic
        w = w.select(np.linspace(0, len(w) - 1, max_windows).round().astype(int))
    return w


def strip(a: ForecastAction, keep: tuple[str, ...] | None = None, numeric: bool = True) -> ForecastAction:
    d = {k: v for k, v in a.present().items()
         if (keep is None or k in keep) and (numeric or FIELD_SPECS[k].kind != "numeric")}
    return ForecastAction(**d)


def oracle_gain(decoder, w: Windows, th: ActionThresholds, n_samples: int, seed: int,
                n_boot: int = 1000) -> dict[str, dict[str, float]]:
    """Per variant (no action, a*, a* without numeric fields, a*'s direction alone) the forecast metrics;
    for each oracle variant the reduction of return RMSE and CRPS against no action, and the paired
    date-block bootstrap interval of the difference ``<metric>_diff`` = oracle − no action
    (``<metric>_ci_lo`` / ``_ci_hi``; below 0 = the action helps), one set of resamples for all."""
    a_star = actions_from_windows(w, th)
    variants = {
        "unconditioned": None,
        "oracle_full": a_star,
        "oracle_discrete": [strip(a, numeric=False) for a in a_star],
        "oracle_direction": [strip(a, keep=("direction",)) for a in a_star],
    }
    out, parts = {}, {}
    for name, acts in variants.items():
        fc = decoder.forecast(w, acts, n_samples, generator=torch.Generator().manual_seed(seed))
        parts[name] = per_window(fc, w)
        m = reduce(parts[name])
        out[name] = {k: m[k] for k in REPORT if k in m}
    base = out["unconditioned"]
    resamples = block_resamples(w.date, horizon=w.future.shape[1], n_boot=n_boot, seed=seed) if len(w) > 1 else None
    for name in ("oracle_full", "oracle_discrete", "oracle_direction"):
        for k in ("return_rmse", "crps"):
            out[name][f"{k}_reduction"] = 1.0 - out[name][k] / base[k]
            if resamples is not None:
                d = paired_bootstrap(parts[name][k], parts["unconditioned"][k], stat=REDUCERS[k], resamples=resamples)
                out[name] |= {f"{k}_diff": d.diff, f"{k}_ci_lo": d.lo, f"{k}_ci_hi": d.hi}
    return out


def controllability(decoder, w: Windows, th: ActionThresholds, n_samples: int, seed: int,
                    fields: tuple[str, ...] = CONTROL_FIELDS) -> dict[str, dict]:
    """Per field: for each value v, ``row[v]`` = share of windows with g(decoded) == v under the request
    {field: v}, ``row["base_" + v]`` the share under no action, ``row["dist_" + v]`` the realised
    distribution of g(decoded) over the field's values under that request (and ``dist_none``)."""
    start = w.last_close
    gen = torch.Generator().manual_seed(seed)
    base = actions_from_forecast(decoder.forecast(w, None, n_samples, generator=gen), start, th)
    out: dict[str, dict] = {}
    bar = Progress(len(fields), "[bench action]", unit="field")
    for f in fields:
        values = FIELD_SPECS[f].values or ()
        row: dict = {"dist_none": [float(np.mean([getattr(p, f) == u for p in base])) for u in values]}
        for v in values:
            gen = torch.Generator().manual_seed(seed)
            fc = decoder.forecast(w, [ForecastAction(**{f: v})] * len(w), n_samples, generator=gen)
            prof = actions_from_forecast(fc, start, th)
            row[v] = float(np.mean([getattr(p, f) == v for p in prof]))
            row[f"base_{v}"] = float(np.mean([getattr(p, f) == v for p in base]))
            row[f"dist_{v}"] = [float(np.mean([getattr(p, f) == u for p in prof])) for u in values]
            if f == "direction":
                mean_prof = actions_from_forecast(fc, start, th, source="mean")
                row[f"{v}_mean_path"] = float(np.mean([p.direction == v for p in mean_prof]))
        row["mean"] = float(np.mean([row[v] for v in values]))
        ext, mid = extremes_and_middle(f)
        row["extremes"] = float(np.mean([row[v] for v in ext]))
        row["middle"] = row[mid]
        out[f] = row
        bar.advance()
    return out


def extremes_and_middle(field: str) -> tuple[tuple[str, str], str]:
    """The two extreme values of a field and its middle one: ordinal fields' first and last bins and the
    one between; categorical ones list theirs as (extreme, extreme, middle): up / down / flat,
    increasing / decreasing / mixed."""
    spec = FIELD_SPECS[field]
    values = spec.values or ()
    if spec.kind == "categorical":
        return (values[0], values[1]), values[2]
    return (values[0], values[-1]), values[1]


def share_verdict(share: float, trials: int, target: float) -> str:
    """"``share`` of ``trials`` is at least ``target``" read from its Wilson 95% interval
    (``stockr1.metrics.verdict.target_verdict``): holds / tie / worse. The windows are evenly spaced
    held-out days, treated as independent trials (overlapping futures make the interval a bit narrow)."""
    lo, hi = wilson_interval(round(share * trials), trials)
    return target_verdict(share, lo, hi, target)


def targets_met(control: dict, n_windows: int) -> dict[str, str]:
    """Issue 21's target per TARGET_FIELDS entry, extremes >= 80% and the middle value >= 60%, as one
    verdict: "holds" when both hold beyond their Wilson intervals, "worse" when either is below its
    target beyond the interval, else "tie". The extremes pool two requests (2 x n_windows trials)."""
    out = {}
    for f in TARGET_FIELDS:
        if f not in control:
            continue
        v = (share_verdict(control[f]["extremes"], 2 * n_windows, EXTREME_TARGET),
             share_verdict(control[f]["middle"], n_windows, MIDDLE_TARGET))
        out[f] = WORSE if WORSE in v else HOLDS if v == (HOLDS, HOLDS) else TIE
    return out


TARGET_WORDS = {HOLDS: "met", TIE: "undecided", WORSE: "missed"}


def oracle_claims(oracle: dict) -> list[str]:
    """"Conditioning on a* lowers return RMSE / CRPS" for each oracle variant, one generated line each
    with its paired interval and verdict (lower is better)."""
    out = []
    for name in ("oracle_full", "oracle_discrete", "oracle_direction"):
        for k in ("return_rmse", "crps"):
            m = oracle.get(name, {})
            if f"{k}_ci_lo" in m:
                out.append(claim_line(f"{name} lowers {k} (oracle − no action)", m[f"{k}_diff"], m[f"{k}_ci_lo"],
                                      m[f"{k}_ci_hi"], higher_is_better=False, digits=5))
    return out


def oracle_lines(claims: list[str]) -> str:
    return ("\nOracle gain, paired date-block bootstrap (95%):\n\n" + "\n".join(f"- {c}" for c in claims) + "\n"
            if claims else "")


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _with_was(row: dict, old: dict | None, key: str) -> str:
    return f"{_pct(row[key])} / was {_pct(old[key])}" if old else _pct(row[key])


def table_text(oracle: dict, control: dict, meta: dict, baseline: dict | None = None) -> str:
    """``baseline``: {"oracle": .., "control": ..} of a second decoder (``--baseline``), shown beside."""
    lines = [f"# Action benchmark ({meta['split']} split, {meta['n_windows']} windows, {meta['n_samples']} samples)",
             "", "## Oracle gain (decoder conditioned on a* = g(realised future) vs no action)", "",
             "| decoder | model | return RMSE | CRPS | RMSE reduction | CRPS reduction | price MAPE | DA-10 | cov90 |",
             "|---|---|---|---|---|---|---|---|---|"]
    arms = [("decoder", oracle, control)] + ([("baseline", baseline["oracle"], baseline["control"])] if baseline else [])
    for arm, orc, _ in arms:
        for name, m in orc.items():
            red = (f"{m['return_rmse_reduction']:+.1%} | {m['crps_reduction']:+.1%}" if "crps_reduction" in m
                   else "- | -")
            lines.append(f"| {arm} | {name} | {m['return_rmse']:.4f} | {m['crps']:.4f} | {red} | {m['price_mape']:.4f} | "
                         f"{m.get('da_10', float('nan')):.3f} | {m['cov_close90']:.3f} |")
    lines += ["", "## Controllability: share of windows where g(decoded) has the requested value",
              "(single-field actions; `base` = share with no action"
              + ("; `was` = the baseline decoder's share" if baseline else "")
              + f"; target >= {EXTREME_TARGET:.0%} on the extremes and >= {MIDDLE_TARGET:.0%} on the middle value "
              f"for {', '.join(TARGET_FIELDS)})", "",
              "| field | requested value: match (base" + (", was" if baseline else "") + ") | extremes | middle | mean |",
              "|---|---|---|---|---|"]
    for f, row in control.items():
        vals = FIELD_SPECS[f].values or ()
        old = baseline["control"].get(f) if baseline else None
        cells = ", ".join(f"{v}: {_pct(row[v])} (base {_pct(row['base_' + v])}{', was ' + _pct(old[v]) if old else ''})"
                          for v in vals)
        lines.append(f"| {f} | {cells} | " + " | ".join(_with_was(row, old, k) for k in ("extremes", "middle", "mean"))
                     + " |")
    if "direction" in control:
        d = control["direction"]
        lines += ["", "Direction of the mean path (not the sample consensus): "
                  + ", ".join(f"{v}: {d[v + '_mean_path']:.0%}" for v in ("up", "down", "flat"))]
    return "\n".join(lines) + "\n"


def readme(table: str, meta: dict, command: str) -> str:
    """results/<out>/README.md from this run's table (never edited by hand)."""
    body = table.split("\n", 1)[1].replace("\n## ", "\n### ")  # the table's own title becomes the setup line
    met = ", ".join(f"{f} {TARGET_WORDS.get(v, v)}" for f, v in meta["targets_met"].items()) or "none evaluated"
    vs = f" Beside it: the baseline decoder `{meta['baseline']}` on the same windows." if meta.get("baseline") else ""
    return "\n".join([
        "# Action benchmark: oracle gain and controllability of the decoder (`stockr1 bench action`)", "",
        generated_line(command), "",
        f"Decoder `{meta['checkpoint']}` on the {meta['split']} split of `{meta['data']}`: {meta['n_windows']} evenly "
        f"spaced windows, {meta['n_samples']} sample paths, seed {meta['seed']}, {meta['seconds']:.0f} s.{vs} "
        f"Controllability target (>= {EXTREME_TARGET:.0%} on the extremes, >= {MIDDLE_TARGET:.0%} on the middle "
        f"value; met = beyond the Wilson 95% interval of the share, missed = below it beyond the interval, "
        f"undecided = the interval straddles the target): {met}.", oracle_lines(meta.get("oracle_claims", [])), body,
        "Files: [metrics.json](metrics.json), [table.md](table.md), [controllability.png](controllability.png), "
        "[control_distribution.png](control_distribution.png) (per field: requested value vs the realised "
        "distribution of g(decoded)).", ""])


def plot(path: Path, control: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    labels, match, base = [], [], []
    for f, row in control.items():
        for v in FIELD_SPECS[f].values or ():
            labels.append(f"{f.replace('_bin', '').replace('_level', '')}={v}")
            match.append(row[v])
            base.append(row["base_" + v])
    x = np.arange(len(labels))
    ax.bar(x - 0.2, match, 0.4, label="requested")
    ax.bar(x + 0.2, base, 0.4, label="no action (base rate)")
    ax.axhline(0.8, color="k", lw=0.8, ls="--")
    ax.set_xticks(x, labels, rotation=75, fontsize=7)
    ax.set_ylabel("g(decoded) == requested")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_distribution(path: Path, arms: dict[str, dict]) -> None:
    """One panel per field (columns) and decoder (rows): for each requested value (and no action), the
    realised distribution of g(decoded) over the field's values as a stacked bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fields = list(next(iter(arms.values())))
    fig, axes = plt.subplots(len(arms), len(fields), figsize=(2.3 * len(fields), 2.6 * len(arms)), squeeze=False)
    for r, (arm, control) in enumerate(arms.items()):
        for c, f in enumerate(fields):
            ax, row, values = axes[r][c], control[f], FIELD_SPECS[f].values or ()
            req = [*values, "none"]
            dist = np.array([row["dist_" + v] for v in req])  # [requested, realised]
            bottom = np.zeros(len(req))
            for j, u in enumerate(values):
                ax.bar(np.arange(len(req)), dist[:, j], bottom=bottom, label=u, color=f"C{j}")
                bottom += dist[:, j]
            ax.set_xticks(np.arange(len(req)), req, rotation=45, fontsize=7)
            ax.set_ylim(0, 1)
            ax.set_title(f"{arm}: {f}" if len(arms) > 1 else f, fontsize=8)
            ax.tick_params(labelsize=7)
            if r == 0:
                ax.legend(fontsize=6, title="g(decoded)", title_fontsize=6)
            if c == 0:
                ax.set_ylabel("share of windows", fontsize=8)
    fig.supxlabel("requested value", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def decoder_thresholds(decoder, checkpoint: str, explicit: str | None) -> ActionThresholds:
    """g as the decoder was trained against: ``--thresholds``, else the decoder's own (``stockr1
    decoder`` saves them inside), else ``thresholds.json`` of the SFT run whose ``decoder/`` it is."""
    if explicit:
        return ActionThresholds.load(explicit)
    if decoder.thresholds is not None:
        return decoder.thresholds
    run = Path(checkpoint).parent / "thresholds.json"
    if not run.is_file():
        raise SystemExit(f"{checkpoint} carries no action thresholds and {run} does not exist: give --thresholds")
    return ActionThresholds.load(run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stockr1 bench action", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True,
                   help="saved decoder directory (`stockr1 decoder` OUT/decoder, an SFT run's decoder/)")
    p.add_argument("--thresholds", default=None,
                   help="action thresholds JSON (default: the decoder's own, else thresholds.json of its SFT run)")
    p.add_argument("--out", required=True, help="output directory (refused if it holds results, unless --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    p.add_argument("--data", default="sample", choices=["sample", "synthetic"])
    p.add_argument("--split", default="test", choices=["val", "test"])
    p.add_argument("--max-windows", type=int, default=500)
    p.add_argument("--n-samples", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--baseline", default=None,
                   help="a second saved decoder (e.g. the shipped one) measured on the same windows and shown beside")
    p.add_argument("--fields", default=",".join(CONTROL_FIELDS))
    argv = [] if argv is None else list(argv)
    a = p.parse_args(argv)
    refuse_existing(a.out, a.overwrite)  # before any work
    fields = tuple(f for f in a.fields.split(",") if f)
    unknown = [f for f in fields if f not in CONTROL_FIELDS]
    if unknown:
        raise ValueError(f"--fields: unknown {unknown}; choose from {CONTROL_FIELDS}")
    torch.set_num_threads(a.threads)
    from forecast_action.build import load_decoder
    from forecast_action.train import DecoderDataConfig, load_windows

    t0 = time.time()
    decoder = load_decoder(a.checkpoint)
    th = decoder_thresholds(decoder, a.checkpoint, a.thresholds)
    cfg = decoder.ts_cfg
    w = held_out(load_windows(DecoderDataConfig(source=a.data, lookback=cfg.lookback, horizon=cfg.horizon)),
                 a.split, a.max_windows)
    oracle = oracle_gain(decoder, w, th, a.n_samples, a.seed)
    control = controllability(decoder, w, th, a.n_samples, a.seed, fields)
    baseline = None
    if a.baseline:  # scored with its own g (thresholds), on the same windows and seeds
        old = load_decoder(a.baseline)
        old_th = decoder_thresholds(old, a.baseline, None)
        baseline = {"oracle": oracle_gain(old, w, old_th, a.n_samples, a.seed),
                    "control": controllability(old, w, old_th, a.n_samples, a.seed, fields)}
    meta = {"checkpoint": str(a.checkpoint), "baseline": a.baseline, "data": a.data, "split": a.split,
            "n_windows": len(w), "n_samples": a.n_samples, "seed": a.seed, "seconds": round(time.time() - t0, 1),
            "targets_met": targets_met(control, len(w)), "oracle_claims": oracle_claims(oracle)}
    metrics = {**oracle, **{f"control/{f}": row for f, row in control.items()}, "meta": meta}
    if baseline:
        metrics |= {f"baseline/{k}": v for k, v in baseline["oracle"].items()}
        metrics |= {f"baseline/control/{f}": row for f, row in baseline["control"].items()}
    table = table_text(oracle, control, meta, baseline)
    with output_dir(a.out, a.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
        (out / "table.md").write_text(table)
        (out / "README.md").write_text(readme(table, meta, command_line("stockr1 bench action", argv)))
        plot(out / "controllability.png", control)
        plot_distribution(out / "control_distribution.png",
                          {"decoder": control} | ({"baseline": baseline["control"]} if baseline else {}))
    print(table)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
