"""`stockr1 bench cost_model`: write ``results/accelerator/README.md`` from the cost model.

    stockr1 bench cost_model --out results/accelerator --run-smoke      # runs the 4B SFT smoke first (~2 min, 7 GiB)
    stockr1 bench cost_model --out results/accelerator --smoke DIR      # a `stockr1 sft ... --smoke --out DIR` run

Tables for the 4B and 8B recipes (configs/{sft,grpo}/qwen3-{4b,8b}.yaml): parameters, FLOPs per token
and per step, memory per component, and the cost model against the CPU smoke at 2 layers (parameter
count exactly, peak memory roughly). When ``--out`` holds a ``summary.json`` of a CUDA run of
``benchmarks.gpu_check.command``, its measured numbers are added; otherwise the README says it has not run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.accelerator import cost_model as cm
from benchmarks.accelerator.smoke import compare, decoder_params, run_smoke
from benchmarks.gpu_check.env import read_yaml
from stockr1.outdir import atomic_write, command_line, generated_line

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RECIPES = {"4B": "qwen3-4b", "8B": "qwen3-8b"}
SFT_TOKENS, SFT_KEPT = 2048, 512  # per trace: tokens, and logit positions (the model-written span)
PROMPT = 1024  # GRPO prompt tokens
H200, H200_HBM = cm.PEAK_BF16_TFLOPS["H200"], cm.HBM_TBPS["H200"]
# what benchmarks.gpu_check.command trains on (its defaults: 64 QA items, 1,000 context characters), measured by the
# same command at tiny width on the CPU (same data, QA items and tokenizer; the tiny decoder's tool text):
# median trace 1,466 tokens, GRPO prompts 697 tokens (so ~769 model-written tokens per trace carry logits)
CHECK_TRACE, CHECK_PROMPT = 1466, 697


def recipe(name: str) -> dict[str, Any]:
    from llm.arch import QWEN3_ARCHS

    sft, grpo = read_yaml(CONFIGS / f"sft/{name}.yaml"), read_yaml(CONFIGS / f"grpo/{name}.yaml")
    pol = sft["policy"]
    arch = cm.Arch.from_config(QWEN3_ARCHS[pol["name_or_path"]])
    ad = cm.Adapter(lora_r=int(pol["lora_r"]), d_ts=int(pol["d_ts"]))
    return {"name": pol["name_or_path"], "arch": arch, "ad": ad, "sft": sft, "grpo": grpo,
            "decoder_params": decoder_params(sft["decoder"]["config"])}


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1e3 or x == int(x) else f"{x:.3g}"


def gib(x: float) -> str:
    return f"{x / cm.GIB:.2f}"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows] + [""]


def params_section(rs: dict[str, dict]) -> list[str]:
    keys = ["base", "base_non_embedding", "lora", "trainable_tokens", "projector", "trainable", "total"]
    pcs = {k: cm.param_counts(r["arch"], r["ad"]) for k, r in rs.items()}
    rows = [[k] + [fmt(pcs[n][k]) for n in rs] for k in keys]
    rows.append(["decoder (separate model)"] + [fmt(r["decoder_params"]) for r in rs.values()])
    return ["## Parameters", ""] + table(["count", *rs], rows)


def flops_section(rs: dict[str, dict]) -> list[str]:
    out = ["## FLOPs", "", f"Per token of a {SFT_TOKENS}-token causal sequence (mean {cm.causal_keys(SFT_TOKENS):.1f} keys), "
           "LM head on every position, in GFLOPs (one multiply-add = 2 FLOPs):", ""]
    rows = []
    for n, r in rs.items():
        a, ad = r["arch"], r["ad"]
        f = cm.sequence_flops(a, ad, SFT_TOKENS, SFT_TOKENS, train=False)["model"] / SFT_TOKENS
        lt = cm.sequence_flops(a, ad, SFT_TOKENS, SFT_TOKENS)
        full = cm.sequence_flops(a, ad, SFT_TOKENS, SFT_TOKENS, full_finetune=True, checkpointing=False)["model"]
        n2 = 2 * cm.param_counts(a, ad)["total"]
        rows.append([n, fmt(n2 / 1e9), f"{f / 1e9:.2f}", f"{lt['model'] / SFT_TOKENS / 1e9:.2f}",
                     f"{lt['hardware'] / SFT_TOKENS / 1e9:.2f}", f"{full / SFT_TOKENS / 1e9:.2f}",
                     f"{lt['model'] / SFT_TOKENS / f:.2f}"])
    out += ["(2N counts the input embedding, a lookup, so an untied model's forward is below 2N.)", ""]
    out += table(["recipe", "2N", "forward", "LoRA train (model)", "+ checkpoint recompute (hardware)",
                  "full fine-tune (6N-like)", "LoRA train / forward"], rows)
    out += [f"Per step (SFT: batch 8 x {SFT_TOKENS} tokens, logits on {SFT_KEPT} per trace; u-GRPO: the config's "
            f"global queries x G rows (split over the GPUs), {PROMPT} prompt + the config's new tokens, mu passes, KL reference), and the time "
            f"it would take at 100% / 40% of an H200's bf16 peak ({H200} TFLOP/s):", ""]
    rows = []
    for n, r in rs.items():
        a, ad, t = r["arch"], r["ad"], r["grpo"]["train"]
        sft = 8 * cm.sequence_flops(a, ad, SFT_TOKENS, SFT_KEPT)["model"]
        q, g, new = int(t["queries_per_step"]), int(t["group_size"]), int(r["grpo"]["rollout"]["max_new_tokens"])
        gr = cm.grpo_step_flops(a, ad, q * g, PROMPT, new, int(t["num_iterations"]), t["loss"]["beta"] != 0)
        for what, fl in ((f"SFT step ({8 * SFT_TOKENS:,} tokens)", sft),
                         (f"u-GRPO step ({q}x{g} rows, {new} new): generation", gr["generation"]),
                         ("u-GRPO step: total", gr["model"])):
            rows.append([n, what, f"{fl / 1e12:.1f}", f"{fl / H200 / 1e12:.2f}", f"{fl / (0.4 * H200 * 1e12):.2f}"])
    return out + table(["recipe", "step", "TFLOPs", "s at 100%", "s at 40%"], rows)


def check_section(rs: dict[str, dict]) -> list[str]:
    """What ``benchmarks.gpu_check.command --scale 4b`` should see on an H200, by the cost model."""
    a, ad = rs["4B"]["arch"], rs["4B"]["ad"]
    sft = 8 * cm.sequence_flops(a, ad, CHECK_TRACE, CHECK_TRACE - CHECK_PROMPT)["model"]
    gr = cm.grpo_step_flops(a, ad, 64, CHECK_PROMPT, 512, 2, True)
    dec = cm.decode_seconds_lower_bound(a, ad, 64, CHECK_PROMPT, 512, H200_HBM)
    mem_sft = cm.training_memory(a, ad, 8 * CHECK_TRACE, 8 * (CHECK_TRACE - CHECK_PROMPT),
                                 decoder_params=rs["4B"]["decoder_params"])["total"]
    mem_grpo = cm.grpo_memory(a, ad, 64, CHECK_PROMPT, 512, 2)["peak"]
    rows = [["SFT step: 8 traces x ~1,466 tokens", f"{sft / 1e12:.0f}", f"{sft / (0.4 * H200 * 1e12):.2f}", "-",
             gib(mem_sft)],
            ["u-GRPO step: 8 x G=8 rows x (697 + 512), mu = 2, KL", f"{gr['model'] / 1e12:.0f}",
             f"{(gr['model'] - gr['generation']) / (0.4 * H200 * 1e12):.2f}", f"{dec:.2f}", gib(mem_grpo)]]
    return ["## What the GPU check should see (4B, H200, by the cost model)", "",
            "Its defaults: 64 QA items from the synthetic source, 1,000 context characters, SFT batch 8, "
            "u-GRPO as configs/grpo/qwen3-4b.yaml with 8 queries x 8 rollouts x 512 new tokens. Loss passes at "
            f"40% MFU; generation at least its bytes over {H200_HBM} TB/s of HBM (a Python decode loop adds its "
            "launch overhead per token, which the model does not know):", ""] + table(
        ["step", "model TFLOPs", "s at 40% MFU (loss passes)", "s decode lower bound", "peak GiB"], rows)


def memory_section(rs: dict[str, dict]) -> list[str]:
    out = ["## Memory per component (GiB)", "",
           f"SFT step: bf16 base, fp32 adapter + gradients + AdamW states, batch 8 x {SFT_TOKENS} tokens, logits on "
           f"{SFT_KEPT} per trace, the decoder trained beside it (fp32, 16 bytes per parameter):", ""]
    keys = ["weights", "adapter", "gradients", "adam", "activations", "logits", "decoder", "total"]
    cols, mems = [], []
    for n, r in rs.items():
        for ck in (True, False):
            cols.append(f"{n} {'checkpointing' if ck else 'no checkpointing'}")
            mems.append(cm.training_memory(r["arch"], r["ad"], 8 * SFT_TOKENS, 8 * SFT_KEPT, checkpointing=ck,
                                           decoder_params=r["decoder_params"]))
    out += table(["component", *cols], [[k] + [gib(m[k]) for m in mems] for k in keys])
    out += ["Activations per token per layer (bf16, LoRA dropout on): " + ", ".join(
        f"{n} {cm.activation_bytes_per_token_layer(r['arch']) / 1024:.0f} KiB" for n, r in rs.items()) +
        "; with checkpointing each layer keeps only its bf16 input (hidden x 2 bytes) and one layer is live "
        "during its recompute.", "",
        f"u-GRPO step: generation of the rows one GPU holds at once (`rollout.max_batch_rows` of the step's global "
        f"queries x G; KV cache of {PROMPT} prompt + new tokens per row) or one loss micro-batch (checkpointing), "
        "whichever is larger; the decoder serves the tool on the CPU:", ""]
    keys = ["weights", "adapter", "gradients", "adam", "kv_cache", "generation_logits", "loss_activations",
            "loss_logits", "peak_generation", "peak_loss", "peak"]
    cols, mems = [], []
    for n, r in rs.items():
        t, ro = r["grpo"]["train"], r["grpo"]["rollout"]
        rows = int(t["queries_per_step"]) * int(t["group_size"])
        at_once = min(rows, int(ro.get("max_batch_rows") or rows))  # the engine generates in chunks of these
        for new in (512, int(ro["max_new_tokens"])):
            cols.append(f"{n}, {at_once} of {rows} rows at once x {new} new")
            mems.append(cm.grpo_memory(r["arch"], r["ad"], at_once, PROMPT, new, int(t["micro_batch"]),
                                       decoder_params=r["decoder_params"]))
    return out + table(["component", *cols], [[k] + [gib(m[k]) for m in mems] for k in keys])


def smoke_section(smoke_dir: Path | None, out: Path) -> list[str]:
    head = ["## The cost model against the CPU smoke (2 layers, full width)", ""]
    if smoke_dir is None or not (smoke_dir / "smoke.json").exists():
        return head + ["No smoke run was given (`--smoke DIR` or `--run-smoke`).", ""]
    shutil.copy(smoke_dir / "smoke.json", out / "smoke_sft.json")
    if (smoke_dir / "baseline.json").exists():
        shutil.copy(smoke_dir / "baseline.json", out / "smoke_baseline.json")
    c = compare(smoke_dir)
    rows = [["parameters, total", fmt(c["measured_total"]), fmt(c["predicted_total"]), "exact" if c["total_equal"] else "DIFFER"],
            ["parameters, trainable", fmt(c["measured_trainable"]), fmt(c["predicted_trainable"]),
             "exact" if c["trainable_equal"] else "DIFFER"],
            ["peak memory (GiB)", f"{c['measured_gib']:.2f} ({c['memory_kind']})",
             f"{c['predicted_gib']:.2f} training state + {c['baseline_gib']:.2f} process baseline",
             f"{c['measured_gib'] / (c['predicted_gib'] + c['baseline_gib']):.2f}x"]]
    return head + [f"`stockr1 sft --config configs/sft/qwen3-4b.yaml --smoke` on this CPU ({c['tokens']} tokens, "
                   f"logits on {c['kept']}, fp32; its smoke.json is copied to `smoke_sft.json`, the baseline to "
                   "`smoke_baseline.json`). Predicted training state: "
                   + ", ".join(f"{k} {v:.2f}" for k, v in c["predicted_parts_gib"].items()) + " GiB. The process "
                   "baseline is the peak RSS of importing the stack and building the data, decoder and tokenizer "
                   "without the policy (measured in the same command).", ""] + table(
        ["quantity", "smoke (measured)", "cost model", "ratio / agreement"], rows)


def gpu_section(out: Path, rs: dict[str, dict]) -> list[str]:
    s = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    if s.get("gpu_check_has_run_on") != "cuda" or s.get("status") != "ok":
        return ["**The GPU check has not run yet** (`bash benchmarks/gpu_check/gpu_check.sh` on a GPU machine, "
                "docs/scale.md \"The prepared GPU check\"): every number below is the cost model's, none is a GPU "
                "measurement.", ""]
    env = s["environment"]
    rows = [[ph, str(s[ph]["steps_done"]), s[ph]["stop_reason"], f"{s[ph].get('median_step_s', 0):.2f}",
             f"{s[ph].get('median_tokens_per_s', 0):,.0f}", f"{s[ph].get('peak_memory_gib', 0):.1f}",
             f"{s[ph].get('median_mfu') or float('nan'):.3f}"] for ph in ("sft", "grpo") if ph in s]
    lines = [f"The GPU check ran on {env.get('device_name')} (torch {env.get('torch')}, transformers "
             f"{env.get('transformers')}, peft {env.get('peft')}; `steps.jsonl`, `summary.json`, `log.txt`, "
             f"`nvidia-smi.txt`), {s.get('args', {}).get('scale')} at full shape, random init, "
             f"{s.get('precision')}:", ""] + table(
        ["phase", "steps", "stop", "median s/step", "tokens/s", "peak GiB", "MFU"], rows)
    steps_path = out / "steps.jsonl"
    if steps_path.exists():
        steps = [json.loads(line) for line in steps_path.read_text().splitlines() if line.strip()]
        lines += measured_vs_model(s, steps, rs[s.get("args", {}).get("scale", "4b").upper()])
    return lines + decode_section(out)


def decode_section(out: Path) -> list[str]:
    """``stockr1 bench decode_profile``'s decode steps (``decode_profile.json``), where it has run."""
    f = out / "decode_profile.json"
    if not f.exists():
        return []
    d = json.loads(f.read_text())
    rows = [[str(p["rows"]), "on" if p["adapter"] else "off", f"{p['prefill_s']:.2f}", f"{1e3 * p['decode_step_s']:.0f}"]
            for p in d["phases"]]
    lines = [f"### Why generation is slow: `stockr1 bench decode_profile` on {d['device']} ({d['scale']}, "
             "`decode_profile.json`)", "",
             f"The rollout engine's decode loop (`llm.hf_backend`) on random {d['phases'][0]['prompt']}-token prompts, "
             f"{d['phases'][0]['new']} greedy steps, bf16 autocast; the LoRA adapter on, then off (peft's "
             "`disable_adapter`):", ""] + table(["rows", "LoRA adapter", "prefill s", "ms a decode step"], rows)
    by = {(p["rows"], p["adapter"]): p["decode_step_s"] for p in d["phases"]}
    rs = sorted({p["rows"] for p in d["phases"]})
    if len(rs) >= 2 and all((r, a) in by for r in rs for a in (True, False)):
        lo, hi = rs[0], rs[-1]
        grow = by[(hi, True)] / by[(lo, True)]
        rows_say = (f"about as long for {lo} rows as for {hi} ({1e3 * by[(lo, True)]:.0f} and "
                    f"{1e3 * by[(hi, True)]:.0f} ms), so it is not bound by bytes or FLOPs" if grow < 1.25 else
                    f"{grow:.1f}x as long for {hi} rows as for {lo} ({1e3 * by[(hi, True)]:.0f} and "
                    f"{1e3 * by[(lo, True)]:.0f} ms)")
        lines += [f"A decode step takes {rows_say}; the unmerged adapter makes it "
                  f"{by[(hi, True)] / by[(hi, False)]:.1f}x as long as the base model alone."]
    prof = d.get("profile", {})
    if prof.get("kernels"):
        n_fwd = 3 + prof["steps"] - 1  # the profiled phase: two prefill-only phases, then a prefill and the steps
        top = prof["top_host_ops"][:3]
        lines += [f"The profiled phase ({prof['rows']} rows) launched {prof['kernels']:,} device kernels over "
                  f"{n_fwd} forwards, about {prof['kernels'] / n_fwd:,.0f} a forward. Its largest host-side costs are "
                  + ", ".join(f"`{o['op']}` {o['self_cpu_s']:.2f} s" for o in top)
                  + (" (`Command Buffer Full`: the host waiting on a full launch queue)"
                     if any(o["op"] == "Command Buffer Full" for o in top) else "")
                  + ". Generating from weights with the adapter merged (what the vLLM backend is sent) or replaying "
                  "the step as a CUDA graph would cut the number of kernels; neither is measured here."]
    return lines + [""]


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def measured_vs_model(s: dict, steps: list[dict], r: dict) -> list[str]:
    """The check's measured steps beside what the cost model predicts for the same shapes (each step's own
    token counts): compute at 40% MFU, decode at HBM bandwidth, peak memory."""
    a, ad = r["arch"], r["ad"]
    sft = [x for x in steps if x.get("phase") == "sft"][1:]  # the first step pays the warm-up
    grpo = [x for x in steps if x.get("phase") == "grpo"]
    out_rows = []
    if sft:
        want = _median([x["model_flops"] / (0.4 * H200 * 1e12) for x in sft])
        got = _median([x["seconds"] for x in sft])
        out_rows.append(["SFT step, s (model: model FLOPs at 40% MFU)", f"{got:.2f}", f"{want:.2f}", f"{got / want:.1f}x"])
        mem = s.get("cost_model_sft_gib", {}).get("total")
        if mem:
            got = max(x["peak_memory_gib"] for x in sft)
            out_rows.append(["SFT peak GiB (model: the check's own estimate)", f"{got:.1f}", f"{mem:.1f}", f"{got / mem:.2f}x"])
    if grpo:
        t = s["grpo"]
        rows_, mb = int(grpo[0]["rows"]), int(t.get("micro_batch", 2))
        prompt = round(_median([x["prompt_tokens_mean"] for x in grpo]))
        new = round(_median([x["gen_tokens"] / x["rows"] for x in grpo]))
        dec = cm.decode_seconds_lower_bound(a, ad, rows_, prompt, new, H200_HBM)
        got = _median([x["rollout_s"] for x in grpo])
        out_rows.append([f"u-GRPO generation, s ({rows_} rows, {prompt} prompt + {new} new tokens a row; model: "
                         "bytes over HBM bandwidth)", f"{got:.1f}", f"{dec:.2f}", f"{got / dec:.0f}x"])
        fl = cm.grpo_step_flops(a, ad, rows_, prompt, new, int(t.get("num_iterations", 1)), bool(t.get("kl_reference")))
        want = (fl["model"] - fl["generation"]) / (0.4 * H200 * 1e12)
        got = _median([x["seconds"] - x["rollout_s"] for x in grpo])
        out_rows.append(["u-GRPO loss passes, s (model: at 40% MFU)", f"{got:.1f}", f"{want:.2f}", f"{got / want:.1f}x"])
        mem = cm.grpo_memory(a, ad, rows_, prompt, new, mb)["peak"] / 2**30
        got = max(x["peak_memory_gib"] for x in grpo)
        out_rows.append(["u-GRPO peak GiB", f"{got:.1f}", f"{mem:.1f}", f"{got / mem:.2f}x"])
        gen_share = _median([x["rollout_s"] / x["seconds"] for x in grpo])
        gen_rate = _median([x["gen_tokens_per_s"] for x in grpo])
    lines = ["### Measured against the cost model, same shapes", ""] + table(
        ["quantity", "measured (median)", "cost model", "measured / model"], out_rows)
    if grpo:
        lines += [f"Generation is {100 * gen_share:.0f}% of a u-GRPO step: {gen_rate:,.0f} generated tokens/s over "
                  f"{rows_} rows, about {rows_ / gen_rate * 1e3:.0f} ms a decode step, against a bandwidth bound of "
                  f"{dec / new * 1e3:.1f} ms. The reference backend (`llm.hf_backend`) steps the rows one token at a time "
                  "with the LoRA adapter unmerged, and the cost model counts bytes and FLOPs, not kernels (the "
                  "decode profile below measures that, where it has run). That is why real runs generate with vLLM (docs/scale.md "
                  "\"Rollout backends\", unverified here)."
                  + (f" Its u-GRPO loss stayed at {max(abs(x.get('loss', 0.0)) for x in grpo):.0e} or less: the "
                     "random-init policy's rewards do not vary inside a group, so its advantages are ~0; this check "
                     "times the step, it does not test learning." if max(abs(x.get("loss", 0.0)) for x in grpo) < 1e-4
                     else " This check times the step; it does not test learning."), ""]
    return lines


def write_readme(out: Path, smoke_dir: Path | None, command: str = "stockr1 bench cost_model --out results/accelerator "
                 "--run-smoke") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    rs = {k: recipe(v) for k, v in RECIPES.items()}
    lines = ["# Accelerator: cost model of the 4B and 8B recipes", "",
             generated_line(command) + " (benchmarks/accelerator/readme.py, from benchmarks/accelerator/cost_model.py)", ""]
    lines += gpu_section(out, rs) + params_section(rs) + flops_section(rs) + memory_section(rs) + check_section(rs)
    lines += smoke_section(smoke_dir, out)
    lines += ["Activations, logits and the KV cache are estimates (the tensors each op saves); weights, adapter, "
              "gradients and optimiser states are exact byte counts. MFU counts model FLOPs only (no recompute, no "
              "decoder).", ""]
    path = out / "README.md"  # the folder also holds the GPU check's files: only the README is replaced
    atomic_write(path, lambda p: p.write_text("\n".join(lines)))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench cost_model", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/accelerator"))
    ap.add_argument("--smoke", type=Path, default=None, help="the --out dir of a 4B `stockr1 sft --smoke` run")
    ap.add_argument("--run-smoke", action="store_true", help="run that smoke first, in a temporary directory")
    args = ap.parse_args(argv)
    command = command_line("stockr1 bench cost_model", sys.argv[1:] if argv is None else argv)
    if not args.run_smoke:
        print(f"wrote {write_readme(args.out, args.smoke, command)}")
        return 0
    with tempfile.TemporaryDirectory(prefix="cost_model-smoke-") as d:
        print(f"wrote {write_readme(args.out, run_smoke(Path(d)), command)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
