"""`stockr1 bench throughput`: GRPO step time of ``rl.trainer`` vs TRL's ``GRPOTrainer``, and the share
of rollout time spent in the decoder tool.

    stockr1 bench throughput --out results/throughput [--steps 4] [--sft checkpoints/sft/tiny]

Part 1, side by side in one process, same text-only tiny setup: one tiny random Qwen3 saved to a
local dir and loaded by both, the same prompts, G, queries per step, completion budget, sampling
temperature, reward (a TRL-style function both call), AdamW learning rate, no KL (no reference
model), fp32 on CPU with the same thread count, and equal work: end-of-turn tokens are banned in both
(``suppress_tokens`` for TRL, the engine's ``banned_token_ids`` for ours; our stop at ``</answer>`` is off),
so every completion has exactly ``--max-new-tokens`` tokens. Each engine runs ``--warmup`` + ``--steps`` steps and
the rounds alternate (ours, TRL, ours, TRL ...) so machine load hits both alike; the per-step time is
the median over the timed steps of all rounds (wall clock from step start to step end, including
generation, scoring, log-probs, backward and the optimizer step). Generated tokens per step differ
with sampling, so time per generated token is reported too. Target: ratio ours / TRL <= 1.0.

Part 2: rollouts of the Stock-R1 engine with the ``ForecastTool`` (the action-conditioned decoder,
``--sft`` run's ``decoder/`` if present, else the tiny decoder of configs/grpo/tiny.yaml) on QA
prompts of the offline sample. A timing wrapper around the tool measures the decoder's share of
rollout wall time. A random-init policy rarely closes an action block, so the protocol share (every
rollout makes its one call, Stock-R1 §3.3) is also measured: the tool's batched call on those rows
with valid actions, over rollout time plus that call. Target: <= 10%.

Writes ``metrics.json``, ``table.md``, ``run.json`` and a generated ``README.md`` (command, commit, date)
under ``--out``, all at once at the end (refused when ``--out`` holds results, unless ``--overwrite``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from stockr1.outdir import atomic_write, command_line, generated_line, output_dir, refuse_existing

PROMPTS = [f"Question {i}: will the index close higher in ten trading days? Answer Yes or No." for i in range(16)]


def count_e(prompts, completions, **kw) -> list[float]:
    """The shared reward: varies between random completions, so every group has a learning signal."""
    texts = [c if isinstance(c, str) else "".join(m.get("content", "") for m in c) for c in completions]
    return [float(t.count("e")) / 10.0 for t in texts]


def tiny_model_dir(root: Path, hidden: int, layers: int) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from llm.tokenizer import train_tokenizer

    corpus = [p + " The trend looks up <answer>Yes</answer>" for p in PROMPTS] * 4
    tok = train_tokenizer(corpus, 512)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4, max_position_embeddings=512,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def end_ids(model_dir: Path) -> list[int]:
    """Token ids that end a completion (EOS and end-of-text) in the tiny model's tokenizer."""
    from transformers import AutoTokenizer

    from llm.special_tokens import ENDOFTEXT, IM_END

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return sorted({tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(ENDOFTEXT), tok.eos_token_id})


def run_ours(model_dir: Path, a: argparse.Namespace, n_steps: int) -> dict[str, Any]:
    from llm.policy import Policy, PolicyConfig
    from llm.rollout import RolloutEngine
    from llm.tokenizer import chat_prompt
    from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer

    torch.manual_seed(0)
    pol = Policy(PolicyConfig(name_or_path=str(model_dir), lora_r=0, soft_tokens=False))
    # equal work: both engines write exactly max_new_tokens per completion (end-of-turn tokens banned)
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=a.max_new_tokens, temperature=1.0,
                        stop_at_answer=False)
    eng.banned_token_ids = sorted(set(eng.banned_token_ids) | set(eng.eos_ids))
    samples = [GRPOSample(chat_prompt(pol.tokenizer, p), i) for i, p in enumerate(PROMPTS)]
    cfg = GRPOTrainConfig(group_size=a.group, queries_per_step=a.queries, max_steps=n_steps, lr=1e-5,
                          max_grad_norm=1.0, micro_batch=a.group * a.queries, accelerator="cpu",
                          ckpt_every=10**9)  # text-only samples have no U: w = 1, plain GRPO
    marks = [time.perf_counter()]
    with tempfile.TemporaryDirectory() as out:
        tr = GRPOTrainer(pol, eng, samples, FuncScorer({"e": count_e}), cfg, out,
                         on_step=lambda s, m: marks.append(time.perf_counter()))
        marks[0] = time.perf_counter()
        tr.fit()
    steps = [b - a_ for a_, b in zip(marks[:-1], marks[1:], strict=True)]
    return {"step_s": steps, "gen_tokens": [h["rollout/gen_tokens"] * a.group * a.queries for h in tr.history],
            "rollout_s": [h["time/rollout_s"] for h in tr.history]}


def run_trl(model_dir: Path, a: argparse.Namespace, n_steps: int) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class Timer(TrainerCallback):
        def __init__(self):
            self.starts, self.steps = [], []

        def on_step_begin(self, args, state, control, **kw):
            self.starts.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            self.steps.append(time.perf_counter() - self.starts[-1])

    timer = Timer()
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, per_device_train_batch_size=a.group * a.queries, num_generations=a.group,
                          max_completion_length=a.max_new_tokens, max_steps=n_steps, learning_rate=1e-5,
                          max_grad_norm=1.0, beta=0.0, temperature=1.0, loss_type="grpo", use_cpu=True,
                          report_to="none", save_strategy="no", logging_steps=1, bf16=False,
                          gradient_checkpointing=False, seed=0, dataloader_num_workers=0,
                          generation_kwargs={"suppress_tokens": end_ids(model_dir)})
        tok = AutoTokenizer.from_pretrained(str(model_dir))
        ds = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})
        tr = GRPOTrainer(model=str(model_dir), reward_funcs=[count_e], args=args, train_dataset=ds,
                         processing_class=tok, callbacks=[timer])
        tr.train()
    lengths = [h["completions/mean_length"] for h in tr.state.log_history if "completions/mean_length" in h]
    return {"step_s": timer.steps, "gen_tokens": [x * a.group * a.queries for x in lengths]}


class TimedTool:
    """Forwards to a tool and accumulates the wall time of its calls."""

    def __init__(self, tool):
        self.tool, self.name, self.open_tag, self.close_tag = tool, tool.name, tool.open_tag, tool.close_tag
        self.seconds, self.calls = 0.0, 0

    def __call__(self, sample_ref, call_text):
        return self.call_batch([sample_ref], [call_text])[0]

    def call_batch(self, refs, texts):
        t0 = time.perf_counter()
        out = self.tool.call_batch(refs, texts)
        self.seconds += time.perf_counter() - t0
        self.calls += len(refs)
        return out


def decoder_share(a: argparse.Namespace) -> dict[str, Any]:
    from forecast_action.derive import ActionThresholds
    from llm.build import load_data
    from llm.qa.generator import QAConfig, QAGenerator
    from llm.rollout import RolloutEngine
    from llm.tools import ForecastTool
    from rl.setup import build_samples, load_config, load_models
    from rl.soft_tokens import soft_tokens
    from stockr1.types import train_only

    cfg = load_config("configs/grpo/tiny.yaml")
    sft = Path(a.sft) if a.sft else None
    windows, ctx_fn = load_data(cfg["data"])
    items, _ = QAGenerator(windows, ctx_fn).generate(QAConfig(n_train=a.queries, n_val=1, n_test=1, seed=0))
    items = [it for it in items if it.split == "train"][: a.queries]
    th = ActionThresholds.fit(train_only(windows))
    policy, decoder = load_models(cfg, sft)
    samples = build_samples(items, windows, th, decoder, policy.tokenizer)
    tool = TimedTool(ForecastTool(decoder, windows))
    eng = RolloutEngine(policy, policy.tokenizer, [tool], max_new_tokens=a.rollout_tokens, temperature=1.0, seed=0)
    t0 = time.perf_counter()
    rolls = eng.generate([s.prompt for s in samples], soft_tokens(samples),
                         [s.sample_ref for s in samples], num_return_sequences=a.group)
    t_roll = time.perf_counter() - t0
    # the protocol's one call per rollout, batched as the engine batches a phase
    texts = [s.columns["target_action"].to_text() for s in samples for _ in range(a.group)]
    refs = [s.sample_ref for s in samples for _ in range(a.group)]
    t1 = time.perf_counter()
    tool.tool.call_batch(refs, texts)
    t_call = time.perf_counter() - t1
    return {"rollout_s": t_roll, "tool_s_measured": tool.seconds, "tool_calls_measured": tool.calls,
            "share_measured": tool.seconds / t_roll, "rollouts": len(rolls),
            "gen_tokens": sum(r.n_generated for r in rolls), "protocol_call_s": t_call,
            "share_protocol": t_call / (t_roll + t_call), "policy": "sft" if sft and (sft / "policy").exists() else "tiny-random"}


def table_lines(metrics: dict[str, Any], a: dict[str, Any], share: dict[str, Any]) -> list[str]:
    """table.md from the metrics, the run's arguments and the decoder-share measurement."""
    return [
        f"Tiny Qwen3 (hidden {a['hidden']}, {a['layers']} layers), G = {a['group']}, {a['queries']} queries/step, "
        f"{a['max_new_tokens']} tokens per completion, {a['threads']} thread(s), {a['rounds']} alternating rounds x "
        f"{a['steps']} timed steps (+{a['warmup']} warm-up) per engine.",
        "",
        "| engine | median s / step | s / generated token | generated tokens / step |",
        "|---|---|---|---|",
        *(f"| {k} | {v['step_s']:.3f} | {v['s_per_gen_token'] * 1e3:.2f} ms | {v['gen_tokens_per_step']:.0f} |"
          for k, v in metrics.items() if k in ("rl.trainer", "trl.GRPOTrainer")),
        "",
        f"Step-time ratio ours / TRL (medians): **{metrics['ratio']['step_time_ours_over_trl']:.2f}** (target <= 1.0); "
        f"ratio of mean step times {metrics['ratio']['step_time_mean_ours_over_trl']:.2f}; per generated token "
        f"{metrics['ratio']['token_time_ours_over_trl']:.2f}. Rollout (generation with the "
        f"KV cache in `llm.rollout`) is {100 * metrics['rl.trainer']['rollout_share_of_step']:.0f}% of our step.",
        "",
        f"Decoder tool share of rollout time: protocol (one call per rollout) "
        f"**{100 * share['share_protocol']:.1f}%** (target <= 10%); measured with the {share['policy']} policy "
        f"{100 * share['share_measured']:.1f}% ({share['tool_calls_measured']} calls in {share['rollouts']} rollouts).",
    ]


def readme_text(table: list[str], command: str) -> str:
    return "\n".join(["# GRPO step time vs TRL and the decoder tool's share of rollout time (`stockr1 bench throughput`)",
                      "", generated_line(command), "", *table, "",
                      "Files: [metrics.json](metrics.json), [run.json](run.json) (every timed step), [table.md](table.md).", ""])


def report_only(out: Path, command: str) -> Path:
    """README.md and table.md again from the metrics.json and run.json a run saved in ``out``."""
    metrics, run = (json.loads((out / n).read_text()) for n in ("metrics.json", "run.json"))
    table = table_lines(metrics, run["args"], run["decoder"])
    atomic_write(out / "table.md", lambda p: p.write_text("\n".join(table) + "\n"))
    atomic_write(out / "README.md", lambda p: p.write_text(readme_text(table, command)))
    return out / "README.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench throughput", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="results/throughput", help="refused if it holds results, unless --overwrite")
    ap.add_argument("--overwrite", action="store_true", help="replace an --out that holds results")
    ap.add_argument("--report-only", action="store_true", help="rewrite README.md / table.md from --out's saved files")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--queries", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--rollout-tokens", type=int, default=128, help="token budget of the decoder-share rollouts")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sft", default="checkpoints/sft/tiny", help="SFT run dir for the decoder-share part")
    argv = sys.argv[1:] if argv is None else list(argv)
    a = ap.parse_args(argv)
    if a.report_only:
        print(f"wrote {report_only(Path(a.out), command_line('stockr1 bench throughput', argv))}")
        return 0
    refuse_existing(a.out, a.overwrite)  # before any timing
    torch.set_num_threads(a.threads)
    n = a.warmup + a.steps
    ours, trl = {"step_s": [], "tok": [], "rollout_s": []}, {"step_s": [], "tok": []}
    with tempfile.TemporaryDirectory() as d:
        model_dir = tiny_model_dir(Path(d), a.hidden, a.layers)
        for _ in range(a.rounds):
            for res, fn in ((ours, run_ours), (trl, run_trl)):
                r = fn(model_dir, a, n)
                res["step_s"] += r["step_s"][a.warmup :]
                res["tok"] += r["gen_tokens"][a.warmup :]
                if "rollout_s" in r:
                    res["rollout_s"] += r["rollout_s"][a.warmup :]
    share = decoder_share(a)
    med = {k: statistics.median(v["step_s"]) for k, v in (("ours", ours), ("trl", trl))}
    per_tok = {k: sum(v["step_s"]) / max(sum(v["tok"]), 1) for k, v in (("ours", ours), ("trl", trl))}
    metrics = {
        "rl.trainer": {"step_s": med["ours"], "s_per_gen_token": per_tok["ours"],
                       "gen_tokens_per_step": statistics.mean(ours["tok"]),
                       "rollout_share_of_step": sum(ours["rollout_s"]) / sum(ours["step_s"])},
        "trl.GRPOTrainer": {"step_s": med["trl"], "s_per_gen_token": per_tok["trl"],
                            "gen_tokens_per_step": statistics.mean(trl["tok"])},
        "ratio": {"step_time_ours_over_trl": med["ours"] / med["trl"],
                  "step_time_mean_ours_over_trl": statistics.mean(ours["step_s"]) / statistics.mean(trl["step_s"]),
                  "token_time_ours_over_trl": per_tok["ours"] / per_tok["trl"]},
        "decoder_tool": {"share_protocol": share["share_protocol"], "share_measured": share["share_measured"]},
    }
    run = {"args": vars(a), "ours_steps": ours, "trl_steps": trl, "decoder": share,
           "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine()}
    table = table_lines(metrics, vars(a), share)
    with output_dir(a.out, a.overwrite) as out:
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
        (out / "run.json").write_text(json.dumps(run, indent=1))
        (out / "table.md").write_text("\n".join(table) + "\n")
        (out / "README.md").write_text(readme_text(table, command_line("stockr1 bench throughput", argv)))
    print("\n".join(table))
    print(f"wrote {a.out}")
    return 0
