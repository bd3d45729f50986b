"""`stockr1 bench accelerator`: a short check of the project's real training paths on one device.

    stockr1 bench accelerator --out results/accelerator --device cuda --scale 4b [--steps 2]
    stockr1 bench accelerator --out /tmp/acc --device cpu --scale tiny --steps 1     # what the test runs

Nothing is downloaded: the policy is a RANDOM-INIT Qwen3 with the architecture of
Qwen/Qwen3-4B-Instruct-2507, built from a local ``Qwen3Config`` with the numbers of its config.json
(``QWEN3_4B``: hidden 2560, 36 layers, 32 query / 8 KV heads, head_dim 128, intermediate 9728, vocab
151936, tied embeddings, RMSNorm eps 1e-6, RoPE theta 5e6, 262,144 positions; 4,022,468,096 parameters,
3.6B without the embedding, as the model card states). It is saved with the project's offline tokenizer
(trained in-process on this run's traces, as ``llm.sft.run_sft`` does) and loaded back through
``llm.policy.Policy`` with configs/policy/qwen3-4b-instruct-2507.yaml's settings (LoRA r = 32, alpha = 32
on q/k/v/o/gate/up/down, protocol-token rows, soft tokens, gradient checkpointing, sdpa), except
``name_or_path`` (the local dir), ``d_ts`` (the decoder's ``d_llm``) and ``dtype`` (``--precision``: bf16
by default on cuda, fp32 on cpu). The tokenizer has ~2k ids, the model 151,936 rows: sampled ids past the tokenizer decode to
nothing, so random rollouts never stop early and every generation writes its full token budget.

Parts, each on ``--device`` and each timed over ``--steps`` steps (``*_first_s``: step 1, with CUDA
warm-up; ``*_s``: median of the later steps, or step 1 when there is one):

a. TS encoder: ``ts_encoder.module.TSForecastModule`` + ``WindowDataModule`` on the offline sample
   (``stockr1.data.sample_windows``), Lightning ``Trainer`` with precision bf16-mixed (``--precision bf16``,
   the default on cuda) or 32-true (fp32, the default on cpu), config configs/ts_encoder/small.yaml (4b) or tiny.yaml (tiny): steps/s, final loss.
b. Policy: ``llm.sft.prepare`` (QA items + ``TraceWriter`` traces on the sample, decoder = the TS config
   of (a) conditioned on actions), one ``JointSFT`` / ``SFTTrainer.train_step`` per step (the train
   section of configs/sft/qwen3-4b.yaml or tiny.yaml, warm-up 0 so step 1 runs at the configured lr),
   one ``RolloutEngine`` generation (1 prompt x G = 8 rows, ``--max-new-tokens`` 256), the log-prob
   memory of one GRPO micro-batch with and without ``logits_to_keep``, and one
   ``rl.trainer.GRPOTrainer.train_step`` per step (the train section of configs/grpo/qwen3-4b.yaml or
   tiny.yaml; 1 query x the config's G rollouts). Parameter counts, whether the SFT step moved the trainable
   parameters, and peak device memory per phase (``torch.cuda.max_memory_allocated``) are recorded.

Writes ``metrics.json`` (part -> metric -> value), ``table.md`` and ``run.json`` (device, versions, errors)
under ``--out``, rewritten after each part so a failure later keeps what was measured before it.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import resource
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning
import lightning as L
import numpy as np
import peft
import torch
import transformers
from transformers import AutoModelForCausalLM, Qwen3Config

from forecast_action.derive import ActionThresholds
from llm.logprobs import keep_for_mask, token_logprobs
from llm.policy import Policy, PolicyConfig
from llm.qa.prompt import SYSTEM_PROMPT
from llm.rollout import RolloutEngine
from llm.sft import JointSFT, SFTTrainer, TrainConfig, from_dict, prepare, sft_data
from llm.tokenizer import build_or_load_tokenizer
from llm.tools import ForecastTool
from rl.run_config import RolloutConfig
from rl.setup import build_samples, train_config
from rl.soft_tokens import soft_tokens
from rl.trainer import GRPOTrainer, StockR1Scorer, rollout_batch
from stockr1.config import config_from_dict, load_yaml
from stockr1.data import sample_windows
from ts_encoder.datamodule import WindowDataModule
from ts_encoder.module import TSForecastModule

# Qwen/Qwen3-4B-Instruct-2507 config.json (architecture fields; vocab includes Qwen's padding rows).
QWEN3_4B: dict[str, Any] = dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                                num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0})
# The same architecture at the size of llm.policy's tiny model (vocab: the tokenizer's).
TINY_QWEN3: dict[str, Any] = dict(vocab_size=None, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                  max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
                                  rope_parameters={"rope_type": "default", "rope_theta": 5_000_000.0})
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
POLICY_YAML = CONFIGS / "policy" / "qwen3-4b-instruct-2507.yaml"


@dataclass(frozen=True)
class Scale:
    arch: dict[str, Any]
    ts_config: Path  # TS encoder of part (a) and of the decoder in part (b)
    sft_config: Path
    grpo_config: Path
    qa_train: int = 16  # QA items -> traces for SFT batches and GRPO queries
    tokenizer_vocab: int = 2000


SCALES = {
    "tiny": Scale(TINY_QWEN3, CONFIGS / "ts_encoder/tiny.yaml", CONFIGS / "sft/tiny.yaml", CONFIGS / "grpo/tiny.yaml"),
    "4b": Scale(QWEN3_4B, CONFIGS / "ts_encoder/small.yaml", CONFIGS / "sft/qwen3-4b.yaml",
                CONFIGS / "grpo/qwen3-4b.yaml"),
}


# --------------------------------------------------------------------------------- the model
def qwen3_config(arch: dict[str, Any], vocab_size: int | None = None, **token_ids: int):
    """A transformers ``Qwen3Config`` for ``arch``; ``vocab_size`` fills a ``None`` vocab (tiny)."""
    kw = dict(arch)
    kw["vocab_size"] = kw["vocab_size"] or vocab_size
    return Qwen3Config(**kw, **token_ids)


def qwen3_param_count(cfg) -> int:
    """Parameters of ``Qwen3ForCausalLM(cfg)`` by hand: embedding (+ LM head unless tied) + per layer
    [q, k, v, o projections; q/k RMSNorm over head_dim; gate/up/down; 2 RMSNorms] + final RMSNorm."""
    h, d, i = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    q, kv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    layer = h * q + 2 * h * kv + q * h + 2 * d + 3 * h * i + 2 * h
    emb = cfg.vocab_size * h * (1 if cfg.tie_word_embeddings else 2)
    return emb + cfg.num_hidden_layers * layer + h


def save_random_qwen3(cfg, tokenizer, out_dir: Path, device: str, dtype: torch.dtype, seed: int = 0) -> Path:
    """Initialise ``Qwen3ForCausalLM(cfg)`` on ``device`` (a 4B init on CPU is slow) and save it with
    ``tokenizer`` as an HF model dir that ``from_pretrained`` reads."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    del model
    return out_dir


# --------------------------------------------------------------------------------- measuring
class Meter:
    """Wall time with device sync, and per-phase peak device memory (cuda) / process peak RSS."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def reset(self) -> None:
        if self.cuda:  # free the previous phase's blocks so each peak is this phase's own
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def peak(self, prefix: str) -> dict[str, float]:
        if self.cuda:
            return {f"{prefix}_peak_gpu_gb": torch.cuda.max_memory_allocated() / 2**30}
        return {}

    def time(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        self.sync()
        t0 = time.perf_counter()
        out = fn()
        self.sync()
        return out, time.perf_counter() - t0


def step_times(prefix: str, times: list[float]) -> dict[str, float]:
    later = times[1:] or times
    return {f"{prefix}_first_s": times[0], f"{prefix}_s": statistics.median(later)}


# --------------------------------------------------------------------------------- part (a)
def bench_ts(scale: Scale, device: str, steps: int, bf16: bool, meter: Meter) -> dict[str, float]:
    """A few Lightning training steps of TSForecastModule on the offline sample."""
    spec = load_yaml(scale.ts_config)
    data = spec["data"]
    module = TSForecastModule(**spec["model"])
    dm = WindowDataModule.from_windows(sample_windows(data["lookback"], data["horizon"]),
                                       batch_size=data["batch_size"])

    class Timer(L.Callback):
        def __init__(self):
            self.times, self.losses, self.t0 = [], [], 0.0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            meter.sync()
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            meter.sync()
            self.times.append(time.perf_counter() - self.t0)
            self.losses.append(float(outputs["loss"]))

    timer = Timer()
    meter.reset()
    trainer = L.Trainer(accelerator=device, devices=1, precision="bf16-mixed" if bf16 else "32-true",
                        max_steps=steps, limit_val_batches=0, num_sanity_val_steps=0, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        gradient_clip_val=spec["trainer"].get("gradient_clip_val"), callbacks=[timer])
    trainer.fit(module, dm)
    t = step_times("ts_step", timer.times)
    return {**t, "ts_steps_per_s": 1.0 / t["ts_step_s"], "ts_batch_size": float(data["batch_size"]),
            "ts_params": float(sum(p.numel() for p in module.parameters())), "ts_loss": timer.losses[-1],
            **meter.peak("ts")}


# --------------------------------------------------------------------------------- part (b)
def batch_to(b, device: torch.device):
    """An ``llm.sft.SFTBatch`` with its tensors on ``device``. ``SFTTrainer.train_step`` does not move
    batches (Fabric's module wrapper casts precision, not devices), so on cuda the caller must."""
    return dataclasses.replace(b, **{f: getattr(b, f).to(device) for f in ("input_ids", "attention_mask", "loss_mask",
                                                                          "x", "y")})


def build_policy(scale: Scale, device: str, bf16: bool, work: Path, traces, d_ts: int):
    """Offline tokenizer on the traces -> random Qwen3 saved to ``work/model`` -> ``Policy`` from there."""
    tok = build_or_load_tokenizer([SYSTEM_PROMPT] + [t.user + t.completion for t in traces], scale.tokenizer_vocab,
                                  work / "tokenizer")
    qcfg = qwen3_config(scale.arch, len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    save_random_qwen3(qcfg, tok, work / "model", device, torch.bfloat16 if bf16 else torch.float32)
    pcfg = dataclasses.replace(PolicyConfig.from_yaml(POLICY_YAML), name_or_path=str(work / "model"), d_ts=d_ts,
                               dtype="bfloat16" if bf16 else "float32")
    return Policy(pcfg), qcfg


def bench_policy(scale: Scale, device: str, bf16: bool, steps: int, max_new_tokens: int, work: Path, meter: Meter,
                 record: Callable[[dict[str, float]], None]) -> None:
    """Part (b); ``record`` is called after each phase with that phase's metrics."""
    sft_cfg, grpo_cfg = load_yaml(scale.sft_config), load_yaml(scale.grpo_config)
    ts_model = load_yaml(scale.ts_config)["model"]["encoder"]
    ctx_chars = sft_cfg.get("max_context_chars")
    prep = {"data": sft_cfg["data"], "max_context_chars": ctx_chars,
            "qa": {"n_train": scale.qa_train, "n_val": 0, "n_test": 0, "seed": 0},
            "traces": {**sft_cfg.get("traces", {}), "drop_trivial": False},
            "decoder": {"seed": 0, "warmup_steps": 0, "ts": ts_model, "action": sft_cfg.get("decoder", {}).get("action", {})}}
    windows, items, decoder, traces = prepare(prep, work / "prep")
    thresholds = ActionThresholds.load(work / "prep" / "thresholds.json")
    train_items = [it for it in items if it.split == "train"]
    (policy, qcfg), t_build = meter.time(lambda: build_policy(scale, device, bf16, work, traces, decoder.ts_cfg.d_llm))
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    record({"policy_build_s": t_build, "params_total": float(sum(p.numel() for p in policy.parameters())),
            "params_trainable": float(sum(p.numel() for p in trainable.values())),
            "params_base_formula": float(qwen3_param_count(qcfg)), "n_traces": float(len(traces))})
    # the U_q normaliser was fitted on train by prepare (ActionConditionedDecoder.fit_uncertainty)
    samples = build_samples(train_items, windows, thresholds, decoder, policy.tokenizer, ctx_chars)  # decoder on cpu

    # --- joint SFT steps
    precision = "bf16-mixed" if bf16 else "32-true"
    tcfg = from_dict(TrainConfig, {**sft_cfg["train"], "accelerator": device, "precision": precision,
                                   "max_steps": steps, "warmup_steps": 0})
    data = sft_data(traces, items, windows, policy.tokenizer, tcfg)
    meter.reset()
    trainer = SFTTrainer(JointSFT(policy, decoder, tcfg.lambda_ts), tcfg, work / "sft")
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}  # as placed by Fabric
    before = {n: p.detach().clone() for n, p in trainable.items()}
    bs = min(tcfg.batch_size, len(data))
    times, losses, tokens = [], [], []
    for k in range(steps):
        batch = batch_to(data.batch((np.arange(bs) + k * bs) % len(data)), trainer.fabric.device)
        loss, dt = meter.time(lambda b=batch, tr=trainer: tr.train_step(b))
        times.append(dt)
        losses.append(float(loss.total.detach()))
        tokens.append(float(batch.attention_mask.sum()))
    changed = [n for n, p in trainable.items() if not torch.equal(p.detach(), before[n])]
    lora = [n for n in trainable if "lora_" in n]
    sft = step_times("sft_step", times)
    record({**sft, "sft_loss": losses[-1], "sft_batch": float(bs), "sft_tokens_per_step": tokens[-1],
            "sft_tokens_per_s": tokens[-1] / sft["sft_step_s"],
            "sft_trainable_changed_frac": len(changed) / len(trainable),
            "sft_lora_changed_frac": sum(n in changed for n in lora) / max(1, len(lora)),
            "sft_trainable_max_abs_delta": max(float((p.detach() - before[n]).abs().max()) for n, p in trainable.items()),
            **meter.peak("sft")})
    del trainer, before
    decoder.cpu().eval()  # as in rl.setup: the frozen decoder serves the tool on cpu

    # --- one rollout-engine generation: 1 prompt x G rows, full token budget
    rollout = {**grpo_cfg.get("rollout", {}), "max_new_tokens": max_new_tokens}  # checked as a GRPO run's
    engine = RolloutEngine(policy, policy.tokenizer, [ForecastTool(decoder, windows)], seed=0,
                           **config_from_dict(RolloutConfig, rollout, "grpo.rollout").engine_kwargs())
    g = int(grpo_cfg["train"].get("group_size", 8))
    meter.reset()
    rolls, dt = meter.time(lambda: engine.generate([samples[0].prompt], soft_tokens(samples[:1]),
                                                   [samples[0].sample_ref], num_return_sequences=g))
    n_gen = sum(r.n_generated for r in rolls)
    record({"gen_rows": float(len(rolls)), "gen_prompt_tokens": float(rolls[0].prompt_len),
            "gen_tokens": float(n_gen), "gen_s": dt, "gen_tokens_per_s": n_gen / dt, **meter.peak("gen")})

    # --- log-probs of one GRPO micro-batch: full logits vs logits_to_keep (no grad; side by side)
    mb = int(grpo_cfg["train"].get("micro_batch", 8))
    b = rollout_batch(rolls[:mb], samples[:1], engine.pad_id, policy.device)
    k = keep_for_mask(b["gen"])
    out: dict[str, float] = {"logprob_rows": float(b["ids"].shape[0]), "logprob_seq_len": float(b["ids"].shape[1]),
                             "logprob_keep": float(k)}
    lps = {}
    policy.eval()  # no LoRA dropout: the two computations must see the same function
    for name, keep in (("full", 0), ("keep", k)):
        meter.reset()
        with torch.no_grad():
            lps[name], out[f"logprob_{name}_s"] = meter.time(lambda kp=keep, bb=b: token_logprobs(
                policy, bb["ids"], bb["att"], bb["ts"], temperature=max(engine.temperature, 1e-6),
                banned_token_ids=engine.banned_token_ids, logits_to_keep=kp))
        out.update(meter.peak(f"logprob_{name}"))
    gen = b["gen"].bool()
    out["logprob_keep_max_abs_diff"] = float((lps["full"][gen] - lps["keep"][gen]).abs().max())
    record(out)
    del lps, b

    # --- u-GRPO steps on Fabric
    gcfg = train_config({"rollout": rollout, "train": {**grpo_cfg["train"], "accelerator": device, "devices": 1,
                         "strategy": "auto", "precision": precision, "queries_per_step": 1, "ckpt_every": 10**9}},
                        max_steps=steps)
    meter.reset()
    grpo = GRPOTrainer(policy, engine, samples, StockR1Scorer(thresholds, gcfg.rewards, gcfg.reward_components),
                       gcfg, work / "grpo")
    times, scalars = [], []
    for _ in range(steps):
        m, dt = meter.time(grpo.train_step)
        times.append(dt)
        scalars.append(m["scalars"])
    last = scalars[-1]
    record({**step_times("grpo_step", times), "grpo_loss": float(last["loss"]),
            "grpo_rollouts": float(g * gcfg.queries_per_step), "grpo_gen_tokens_per_rollout": float(last["rollout/gen_tokens"]),
            "grpo_rollout_s": float(last["time/rollout_s"]), **meter.peak("grpo")})


# --------------------------------------------------------------------------------- output
def table(metrics: dict[str, dict[str, float]]) -> str:
    lines = []
    for part, m in metrics.items():
        lines += [f"### {part}", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v:.4g} |" for k, v in m.items()] + [""]
    return "\n".join(lines)


def run_info(device: str, scale: str, steps: int) -> dict[str, Any]:
    info = {"device": device, "scale": scale, "steps": steps, "platform": platform.platform(),
            "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
            "lightning": lightning.__version__, "torch_threads": torch.get_num_threads(), "errors": {}}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench accelerator", description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--scale", choices=tuple(SCALES), default="4b")
    ap.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                    help="bf16: bf16 weights + bf16-mixed Fabric/Lightning; auto: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--steps", type=int, default=2, help="timed steps per part (step 1 includes warm-up)")
    ap.add_argument("--max-new-tokens", type=int, default=256, help="model tokens per generated row")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: 2 on cpu)")
    ap.add_argument("--parts", nargs="+", choices=("ts", "policy"), default=["ts", "policy"])
    ap.add_argument("--work", default=None, help="scratch dir for the saved random model (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch.cuda.is_available() is False")
    for k, v in (("HF_HUB_OFFLINE", "1"), ("WANDB_MODE", "disabled"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(k, v)
    if args.threads or args.device == "cpu":
        torch.set_num_threads(args.threads or 2)
    scale, meter = SCALES[args.scale], Meter(args.device)
    bf16 = args.precision == "bf16" or (args.precision == "auto" and args.device == "cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, dict[str, float]] = {}
    info = {**run_info(args.device, args.scale, args.steps), "bf16": bf16}

    def write() -> None:
        info["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
        (out / "table.md").write_text(table(metrics))
        (out / "run.json").write_text(json.dumps(info, indent=1))

    def record(part: str) -> Callable[[dict[str, float]], None]:
        def add(m: dict[str, float]) -> None:
            metrics.setdefault(part, {}).update({k: float(v) for k, v in m.items()})
            write()
            print(f"[{part}] " + ", ".join(f"{k}={v:.4g}" for k, v in m.items()), flush=True)
        return add

    ts_name = f"ts_encoder-{Path(scale.ts_config).stem}"
    pol_name = f"policy-qwen3-{args.scale}-random"
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for part, name, fn in (
            ("ts", ts_name, lambda: record(ts_name)(bench_ts(scale, args.device, args.steps, bf16, meter))),
            ("policy", pol_name, lambda: bench_policy(scale, args.device, bf16, args.steps, args.max_new_tokens,
                                                      Path(work), meter, record(pol_name))),
        ):
            if part not in args.parts:
                continue
            try:
                fn()
            except Exception as e:  # keep what was measured; the next part still runs
                info["errors"][name] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"
                print(f"[{name}] FAILED: {type(e).__name__}: {e}", flush=True)
                write()
            meter.reset()
    write()
    bad = {f"{p}/{k}": v for p, m in metrics.items() for k, v in m.items() if not math.isfinite(v)}
    print(table(metrics))
    if bad:
        print(f"non-finite metrics: {bad}")
    print(f"wrote {out}")
    return 1 if info["errors"] or bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
