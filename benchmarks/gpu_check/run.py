"""The body of ``benchmarks.gpu_check.command``: data -> traces -> tokenizer -> policy on the device -> SFT steps ->
u-GRPO steps, through the project's own trainers (llm.sft.SFTTrainer, rl.trainer.GRPOTrainer)."""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.accelerator import cost_model as cm
from benchmarks.gpu_check.env import Unfit, read_yaml
from benchmarks.gpu_check.phase import CONFIGS, TINY_DECODER, TINY_POLICY, Meter, Recorder, Scale, run_phase


class RecordingEngine:
    """A ``RolloutEngine`` that keeps the last generation's rollouts (for token counts and FLOPs)."""

    def __init__(self, engine: Any):
        self._engine = engine
        self.last: list[Any] = []

    def generate(self, *a: Any, **kw: Any) -> list[Any]:
        self.last = self._engine.generate(*a, **kw)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def policy_arch(policy) -> cm.Arch:
    return cm.Arch.from_config(policy.model.config.get_text_config().to_dict())


def adapter_of(policy) -> cm.Adapter:
    from llm.special_tokens import PROTOCOL_TOKENS

    c = policy.cfg
    return cm.Adapter(c.lora_r, policy.lora_target_names, len(PROTOCOL_TOKENS) if c.train_protocol_tokens and c.lora_r else 0,
                      c.d_ts, c.projector)


def policy_section(sft_cfg: dict[str, Any], scale: Scale, tokenizer: Path, dtype: str, d_ts: int) -> dict[str, Any]:
    """The config's policy at full depth with random weights (4b/8b), or the tiny random Qwen3 (tiny)."""
    from llm.arch import qwen3_config

    pol = dict(sft_cfg["policy"])
    if scale.tiny:
        return {**pol, **TINY_POLICY, "d_ts": d_ts, "tokenizer_path": str(tokenizer), "dtype": dtype}
    layers = int(qwen3_config(pol["name_or_path"]).num_hidden_layers)
    return {**pol, "random_init_layers": layers, "tokenizer_path": str(tokenizer), "dtype": dtype}


def check_memory(sft_cfg: dict[str, Any], scale: Scale, tokens_per_row: int, batch: int, d_ts: int) -> dict[str, float]:
    """The cost model's SFT peak (GiB) for this batch; ``Unfit`` when it exceeds the GPU's memory."""
    from llm.arch import QWEN3_ARCHS

    arch = cm.Arch.from_config(QWEN3_ARCHS[sft_cfg["policy"]["name_or_path"]])
    mem = cm.training_memory(arch, cm.Adapter(d_ts=d_ts), batch * tokens_per_row, batch * tokens_per_row)
    gib = {k: v / cm.GIB for k, v in mem.items()}
    have = torch.cuda.get_device_properties(0).total_memory / cm.GIB
    if gib["total"] > 0.95 * have:
        raise Unfit(f"the cost model puts the SFT step at {gib['total']:.1f} GiB, the GPU has {have:.1f} GiB")
    return gib


def sft_phase(args: argparse.Namespace, joint: Any, tcfg: Any, sdata: Any, work: Path, deadline: float, meter: Meter,
              rec: Recorder, peak: float | None) -> dict[str, Any]:
    """``SFTTrainer.train_step`` on batches of the configured size until the steps or the deadline run out."""
    from llm.logprobs import keep_for_mask
    from llm.sft import SFTTrainer

    trainer = SFTTrainer(joint, tcfg, work / "sft")
    arch, ad = policy_arch(joint.policy), adapter_of(joint.policy)
    rng = np.random.default_rng(0)
    bs = min(tcfg.batch_size, len(sdata))

    def step(_: int) -> dict[str, Any]:
        b = sdata.batch(sdata.sample(rng, bs))
        loss = trainer.train_step(b)
        keep = keep_for_mask(b.loss_mask)
        rows = b.attention_mask.sum(1).tolist()
        flops = sum(cm.sequence_flops(arch, ad, int(t), min(keep, int(t)))["model"] for t in rows)
        return {"tokens": float(sum(rows)), "model_flops": flops, "rows": len(rows), "loss": float(loss.total.detach()),
                "l_sft": float(loss.sft), "l_ts": float(loss.ts)}

    return {**run_phase("sft", args.sft_steps, deadline, step, meter, rec, peak), "batch": bs}


def run_check(args: argparse.Namespace, scale: Scale, work: Path, rec: Recorder, meter: Meter, t_start: float) -> None:
    from forecast_action.derive import ActionThresholds
    from llm.build import load_data, local_tokenizer
    from llm.policy import Policy, PolicyConfig
    from llm.rollout import RolloutEngine
    from llm.sft import JointSFT, TrainConfig, from_dict, prepare, sft_data
    from llm.smoke import prepared_decoder
    from llm.tools import ForecastTool
    from rl.run_config import RolloutConfig
    from rl.setup import build_samples
    from rl.trainer import GRPOTrainConfig, GRPOTrainer, StockR1Scorer
    from stockr1.config import config_from_dict

    s, dev = rec.summary, args.device
    torch.manual_seed(0)
    if dev == "cpu":
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    bf16 = args.precision == "bf16" or (args.precision == "auto" and dev == "cuda")
    precision, dtype = ("bf16-mixed", "bfloat16") if bf16 else ("32-true", "float32")
    sft_cfg, grpo_cfg = read_yaml(CONFIGS / scale.sft_config), read_yaml(CONFIGS / scale.grpo_config)
    data = {"source": "synthetic", "lookback": sft_cfg["data"]["lookback"], "horizon": sft_cfg["data"]["horizon"]}
    setup: dict[str, float] = {}
    s.update(setup_s=setup, sft_config=scale.sft_config, grpo_config=scale.grpo_config, data=data, precision=precision)

    t0 = time.monotonic()
    windows, _ = load_data(data)
    dcfg = {"decoder": TINY_DECODER} if scale.tiny else sft_cfg
    dec_file = prepared_decoder(dcfg, windows, work / "decoder_init")
    scfg = {**sft_cfg, "data": data, "qa": {"n_train": args.qa_items, "n_val": 0, "n_test": 0, "seed": 0},
            "traces": {"drop_trivial": False}, "max_context_chars": args.max_context_chars,
            "decoder": {"checkpoint": str(dec_file)}, "prepare_from": None}
    if scale.tiny:
        scfg["policy"] = {**sft_cfg["policy"], **TINY_POLICY, "d_ts": int(TINY_DECODER["ts"]["d_llm"])}
    windows, items, decoder, traces = prepare(scfg, work / "prep")
    tok = local_tokenizer(traces, args.tokenizer_vocab, work / "tokenizer")
    setup["data_traces_tokenizer"] = time.monotonic() - t0

    d_ts = int(decoder.ts_cfg.d_llm)
    tcfg = from_dict(TrainConfig, {**sft_cfg["train"], "accelerator": dev, "precision": precision, "devices": 1,
                                   "num_nodes": 1, "strategy": "auto", "max_steps": args.sft_steps})
    t0 = time.monotonic()
    sec = policy_section(scfg, scale, tok, dtype, d_ts)
    with torch.device(dev):  # weights are created on the device: no CPU copy of the 4B
        policy = Policy(PolicyConfig.from_dict(sec))
    meter.sync()
    setup["policy_build"] = time.monotonic() - t0
    arch, ad = policy_arch(policy), adapter_of(policy)
    predicted = cm.param_counts(arch, ad)
    measured = {"total": sum(p.numel() for p in policy.parameters()),
                "trainable": sum(p.numel() for p in policy.parameters() if p.requires_grad)}
    s["shapes"] = {"hidden": arch.hidden, "layers": arch.layers, "vocab_rows": arch.vocab, "tied": arch.tied,
                   "lora_r": ad.lora_r, "d_ts": d_ts, "policy_device": str(policy.device)}
    s["params"] = {"measured": measured, "cost_model": predicted,
                   "match": measured == {k: predicted[k] for k in measured}}
    sdata = sft_data(traces, items, windows, policy.tokenizer, tcfg)
    lens = [len(e[0]) for e in sdata.enc]
    s["sft_data"] = {"traces": len(sdata), "tokens_per_trace_median": float(np.median(lens)), "max": max(lens)}
    if dev == "cuda" and not scale.tiny:
        s["cost_model_sft_gib"] = check_memory(scfg, scale, max(lens), tcfg.batch_size, d_ts)
    rec.write()

    # ---------------- SFT
    budget_end = t_start + args.budget_s - args.reserve_s  # the reserve: writing results, freeing the GPU
    sft_deadline = time.monotonic() + args.sft_share * max(0.0, budget_end - time.monotonic())
    peak = cm.peak_tflops_for(s["environment"].get("device_name", "")) if dev == "cuda" else None
    s["sft"] = sft_phase(args, JointSFT(policy, decoder, tcfg.lambda_ts), tcfg, sdata, work, sft_deadline, meter, rec,
                         peak)
    rec.write()
    decoder.cpu().eval()  # as in rl.cli: the frozen decoder serves the tool on the CPU
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()

    # ---------------- u-GRPO
    t0 = time.monotonic()
    thresholds = ActionThresholds.load(work / "prep" / "thresholds.json")
    train_items = [it for it in items if it.split == "train"]
    samples = build_samples(train_items, windows, thresholds, decoder, policy.tokenizer, args.max_context_chars)
    gcfg = GRPOTrainConfig.from_dict({**grpo_cfg["train"], "accelerator": dev, "devices": 1, "num_nodes": 1,
                                      "strategy": "auto",
                                      "precision": precision, "queries_per_step": args.queries,
                                      "group_size": args.group, "max_steps": args.grpo_steps, "ckpt_every": 10**9})
    rollout = {**grpo_cfg.get("rollout", {}), "max_new_tokens": args.new_tokens}
    rollout["max_batch_rows"] = max(int(rollout.get("max_batch_rows") or 0), args.queries * args.group)
    rcfg = config_from_dict(RolloutConfig, rollout, "grpo.rollout")  # as rl.cli builds it: the hf backend by default
    engine = RecordingEngine(RolloutEngine(policy, policy.tokenizer, [ForecastTool(decoder, windows)], seed=0,
                                           **rcfg.engine_kwargs()))
    grpo = GRPOTrainer(policy, engine, samples, StockR1Scorer(thresholds, gcfg.rewards, gcfg.reward_components),
                       gcfg, work / "grpo")
    setup["grpo_setup"] = time.monotonic() - t0
    kl = gcfg.loss.beta != 0

    def grpo_step(_: int) -> dict[str, Any]:
        m = grpo.train_step()["scalars"]
        rolls = engine.last
        prompt = float(np.mean([r.prompt_len for r in rolls]))
        new = float(np.mean([len(r.token_ids) - r.prompt_len for r in rolls]))
        flops = cm.grpo_step_flops(arch, ad, len(rolls), round(prompt), round(new), gcfg.num_iterations, kl)["model"]
        gen = float(sum(r.n_generated for r in rolls))
        return {"tokens": float(sum(len(r.token_ids) for r in rolls)), "model_flops": flops, "rows": len(rolls),
                "prompt_tokens_mean": prompt, "gen_tokens": gen, "rollout_s": float(m["time/rollout_s"]),
                "gen_tokens_per_s": gen / max(float(m["time/rollout_s"]), 1e-9), "loss": float(m["loss"])}

    s["grpo"] = run_phase("grpo", args.grpo_steps, budget_end, grpo_step, meter, rec, peak)
    s["grpo"].update(backend=rcfg.backend, queries=args.queries, group=args.group, new_tokens=args.new_tokens, kl_reference=kl,
                     num_iterations=gcfg.num_iterations, micro_batch=gcfg.micro_batch)
    rec.write()
