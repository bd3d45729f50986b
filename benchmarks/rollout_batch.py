"""`stockr1 bench rollout_batch --config configs/grpo/smollm2-135m.yaml --out results/rollout_batch`: what
dropping finished rows from a decode batch saves on the rollouts GRPO and the QA benchmark decode, or (with
``--compare merge_lora``) what decoding a LoRA policy through a twin with its adapter merged saves.

The reference backend (`llm.hf_backend.HFBackend`) decodes a batch until its last row stops. The rollouts of
one step differ in length by hundreds of tokens, so without compaction the batch keeps stepping rows that are
done. This command decodes the same training queries of the run (`rl.setup.build_setup`: the SFT run's
train items, prompts, soft tokens and frozen tool, as a GRPO step sees them) twice per temperature, once
with the backend's compaction off and once on, same seed, alternating which goes first. It writes
``results.json`` and a generated ``README.md``: seconds, generated tokens, and their ratio.

Greedy rows give the same tokens either way, up to floating-point reduction order, so their times compare
like for like. Sampled rows share their random draws with the rows of their batch, so a seed gives other
(equally distributed) samples with compaction. Their times are compared per generated token.

``--compare merge_lora`` decodes the same way with ``rollout.merge_lora`` off and on (compaction on in both):
the policy's own peft forward against its merged twin (`llm.hf_backend`), the same function up to
floating-point rounding, so greedy rows agree unless a near-tie flips.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

import torch

from stockr1.config import load_yaml
from stockr1.manifest import git_commit
from stockr1.outdir import command_line, generated_line, output_dir, refuse_existing

COMPARED = {"compact": ("compaction", "dropping finished rows from a batch"),
            "merge_lora": ("merged twin", "decoding through a twin with the LoRA adapter merged"),
            "twin_bf16": ("bf16 merged twin", "decoding through a merged twin held in bf16, against the policy itself")}


def sampler_gap(engine, rollouts, samples) -> dict[str, float]:
    """The log-probs the sampler drew each generated token with against the engine's policy's own (what the
    loss reads: `llm.logprobs.token_logprobs` at the sampling temperature, banned tokens masked as the sampler
    masks them): per token |Δ| mean and 99th percentile (`llm.logprobs.logprob_gap`). Rounding alone when the
    policy itself decoded; the mismatch a rounded twin samples with otherwise."""
    from llm.logprobs import keep_for_mask, logprob_gap, token_logprobs
    from rl.trainer import rollout_batch

    b = rollout_batch(rollouts, samples, engine.pad_id)
    drawn = torch.zeros(b["ids"].shape, dtype=torch.float32)  # aligned with token_ids; 0 where the model wrote nothing
    for i, r in enumerate(rollouts):
        drawn[i, : len(r.logprobs)] = torch.tensor(r.logprobs, dtype=torch.float32)
    keep = keep_for_mask(b["gen"])
    with torch.no_grad():
        lp = torch.cat([token_logprobs(engine.policy, b["ids"][k:k + 4], b["att"][k:k + 4],
                                       None if b["ts"] is None else b["ts"][k:k + 4],
                                       temperature=engine.temperature if engine.temperature > 0 else 1.0,
                                       banned_token_ids=engine.banned_token_ids, logits_to_keep=keep)
                        for k in range(0, len(rollouts), 4)])
    g = logprob_gap(lp.float(), drawn, b["gen"])
    return {"tokens": g["tokens"], "mean": g["token_mean"], "p99": g["token_p99"]}  # the keys its results were written with


def decode(setup, queries: int, group: int, temperature: float, compact: bool, max_new_tokens: int,
           max_batch_rows: int | None, seed: int, merge_lora: bool = False, twin_dtype: torch.dtype | None = None,
           score: bool = False) -> dict[str, Any]:
    """Rollouts of the first ``queries`` training samples x ``group``; wall seconds, tokens, finish reasons;
    with ``score``, the sampler's log-probs against the policy's (``sampler_gap``, untimed)."""
    from llm.hf_backend import HFBackend
    from llm.rollout import RolloutEngine
    from llm.sampling import SeededGenerator, TokenSampler
    from llm.tools import ForecastTool
    from rl.soft_tokens import soft_tokens

    def backend(engine: RolloutEngine) -> HFBackend:
        sampler = TokenSampler(engine.temperature, engine.top_p, engine.banned_token_ids, SeededGenerator(seed))
        return HFBackend(engine.policy, engine.pad_id, sampler, engine.max_batch_rows, engine.prefill_chunk,
                         compact=compact, merge_lora=merge_lora, twin_dtype=twin_dtype)

    policy = setup.policy.eval()
    engine = RolloutEngine(policy, policy.tokenizer, [ForecastTool(setup.decoder, setup.windows)],
                           max_new_tokens=max_new_tokens, temperature=temperature, max_batch_rows=max_batch_rows,
                           backend=backend)
    samples = setup.samples[:queries]
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        rollouts = engine.generate([s.prompt for s in samples], soft_tokens(samples), [s.sample_ref for s in samples],
                                   num_return_sequences=group)
    wall = time.perf_counter() - t0
    n_gen = [r.n_generated for r in rollouts]
    gap = sampler_gap(engine, rollouts, samples) if score else None
    return {"compact": compact, "merge_lora": merge_lora, "twin_dtype": None if twin_dtype is None else str(twin_dtype),
            "sampler_gap": gap, "temperature": temperature, "wall_s": round(wall, 2), "rollouts": len(rollouts),
            "generated_tokens": int(sum(n_gen)), "max_generated": int(max(n_gen)),
            "s_per_1k_tokens": round(1000 * wall / max(sum(n_gen), 1), 3),
            "truncated": sum(r.finish_reason == "length" for r in rollouts),
            "token_ids": [list(r.completion_ids) for r in rollouts]}


def readme(res: dict[str, Any]) -> str:
    a = res["args"]
    compare = a.get("compare", "compact")  # results written before --compare existed compared compaction
    name, what = COMPARED[compare]
    title = {"compact": "# Decoding with and without dropping finished rows (`stockr1 bench rollout_batch`)",
             "merge_lora": "# Decoding a LoRA policy with and without a merged twin (`stockr1 bench rollout_batch "
                           "--compare merge_lora`)",
             "twin_bf16": "# Decoding a LoRA policy itself and through a merged twin in bf16 (`stockr1 bench "
                          "rollout_batch --compare twin_bf16`)"}[compare]
    lines = [title, "",
             generated_line(res["command"], res["commit"], res["date"]), "",
             f"Policy: the SFT run `{res['sft']}` (base `{res['policy_base']}`), {a['queries']} training queries x "
             f"{a['group']} rollouts in one batch (max_batch_rows {a['max_batch_rows']}), up to {a['max_new_tokens']} "
             f"new tokens, {a['threads']} threads, seed {a['seed']}. Each temperature decodes the same prompts with "
             f"{name} off and on (alternating which goes first across temperatures), after a short "
             "warm-up decode. Both timings are only comparable when nothing else ran on the cores.",
             "", f"| temperature | {name} | wall s | generated tokens | longest row | truncated | s per 1k tokens |",
             "|---|---|---|---|---|---|---|"]
    for r in res["runs"]:
        lines.append(f"| {r['temperature']} | {'on' if r[compare] else 'off'} | {r['wall_s']:.1f} | "
                     f"{r['generated_tokens']} | {r['max_generated']} | {r['truncated']} | {r['s_per_1k_tokens']:.2f} |")
    lines += ["", f"Ratios, on / off ({what}):" if compare != "compact" else "Ratios, on / off:", ""]
    for t, c in res["ratios"].items():
        why = (" (sampled: other draws, as documented)" if compare == "compact" and float(t) > 0
               else " (floating-point order)" if compare == "compact"
               else " (floating-point rounding: a near-tie decided otherwise, and the row went its own way from there)")
        same = "the same tokens in every row" if c["same_tokens"] else f"{c['rows_differ']} of {c['rows']} rows differ{why}"
        lines.append(f"- temperature {t}: wall time x{c['wall']:.2f}, time per generated token x{c['per_token']:.2f}; "
                     f"{same}.")
    gaps = [r for r in res["runs"] if r.get("sampler_gap")]
    if gaps:
        lines += ["", "The log-probs the sampler drew each generated token with, against the policy's own at the same "
                  "temperature (what the GRPO loss scores the rows with; `sampler_gap`), per token |Δ|:", ""]
        for r in gaps:
            g = r["sampler_gap"]
            lines.append(f"- temperature {r['temperature']}, {name} {'on' if r[compare] else 'off'}: mean {g['mean']:.4f}, "
                         f"99th percentile {g['p99']:.4f} nats over {g['tokens']:,} tokens")
        lines += ["", "Off, the policy itself decoded, so its gap is rounding between the decode loop's cached steps and "
                  "one full forward: the floor the other row is read against."]
    lines += ["", "One run per setting: a single timing, no interval. Files: [results.json](results.json).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from rl.setup import build_setup, load_config, sft_dir_of

    ap = argparse.ArgumentParser(prog="stockr1 bench rollout_batch", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/grpo/smollm2-135m.yaml", help="a GRPO config (its data, policy, rollout)")
    ap.add_argument("--sft", default=None, help="the SFT run to start from (default: the config's sft.run_dir)")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.8])
    ap.add_argument("--max-new-tokens", type=int, default=640)
    ap.add_argument("--max-batch-rows", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare", choices=sorted(COMPARED), default="compact",
                    help="what each pair switches off and on: compaction, or the merged LoRA twin (compaction on)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--overwrite", action="store_true")
    argv = sys.argv[1:] if argv is None else list(argv)
    a = ap.parse_args(argv)
    if a.queries < 1 or a.group < 1:
        ap.error("--queries and --group must be >= 1")
    refuse_existing(a.out, a.overwrite)
    torch.set_num_threads(a.threads)
    sft = sft_dir_of(load_config(a.config), a.sft)
    saved = load_yaml(sft / "config.yaml") if sft is not None and (sft / "config.yaml").is_file() else {}
    # the data and context length the SFT run's qa.jsonl was made from (as bench grpo_check reads them)
    cfg = load_config(a.config, {k: saved[k] for k in ("data", "max_context_chars") if k in saved})
    setup = build_setup(cfg, sft)
    if len(setup.samples) < a.queries:
        raise ValueError(f"{a.config}: {len(setup.samples)} training queries, fewer than --queries {a.queries}")
    # warm-up: the first forwards pay one-off allocation and kernel setup, which the first timed decode must not
    decode(setup, 1, 2, 0.0, True, 16, a.max_batch_rows, a.seed)
    runs, ratios = [], {}
    for k, t in enumerate(a.temperatures):
        pair = {}
        for on in ((False, True) if k % 2 == 0 else (True, False)):  # alternate which goes first
            twin = on and a.compare == "twin_bf16"
            r = decode(setup, a.queries, a.group, t, on or a.compare != "compact", a.max_new_tokens, a.max_batch_rows,
                       a.seed, merge_lora=on and a.compare in ("merge_lora", "twin_bf16"),
                       twin_dtype=torch.bfloat16 if twin else None, score=a.compare != "compact")
            r[a.compare] = on
            print(f"[rollout_batch] T={t} {a.compare}={on}: {r['wall_s']} s, {r['generated_tokens']} tokens", flush=True)
            pair[on] = r
        runs += [pair[False], pair[True]]
        differ = sum(x != y for x, y in zip(pair[False]["token_ids"], pair[True]["token_ids"], strict=True))
        ratios[str(t)] = {"wall": pair[True]["wall_s"] / pair[False]["wall_s"],
                          "per_token": pair[True]["s_per_1k_tokens"] / pair[False]["s_per_1k_tokens"],
                          "same_tokens": differ == 0, "rows_differ": differ, "rows": pair[True]["rollouts"]}
    res = {"command": command_line("stockr1 bench rollout_batch", argv), "commit": git_commit(),
           "date": datetime.date.today().isoformat(), "args": vars(a), "sft": str(sft),
           "policy_base": str(setup.policy.cfg.name_or_path), "ratios": ratios,
           "runs": [{k: v for k, v in r.items() if k != "token_ids"} for r in runs]}
    with output_dir(a.out, a.overwrite) as out:
        (out / "results.json").write_text(json.dumps(res, indent=1, default=str))
        (out / "README.md").write_text(readme(res))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
