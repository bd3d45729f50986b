"""`stockr1 bench decode_profile`: where a decode step of the reference rollout backend spends its time.

    stockr1 bench decode_profile --device cuda --scale 4b --out $OUT/accelerator      # on a lent GPU (~3 min)
    stockr1 bench decode_profile --device cpu --scale tiny --rows 4 --new-tokens 4    # the same path on CPU

The GPU check (``benchmarks.gpu_check.command``) measured u-GRPO generation far above its bandwidth bound. This
command asks why, on the policy the check builds (random init, the recipe's architecture at full depth and
width, LoRA on the recipe's targets, bf16 weights under bf16 autocast as in the trainer): it runs
``llm.hf_backend.HFBackend`` phases (the rollout engine's own decode loop) on random prompts, with

- ``--rows`` rows at once (e.g. the recipe's 64 and 8), the LoRA adapter on, then off (peft's
  ``disable_adapter``: what the unmerged adapter modules cost a step);
- one ``torch.profiler`` pass over a few steps: device kernels launched per step, and host (CPU) and
  device time per step. A step whose host time is far above its device time is bound by Python and
  launches, not by the chip.

It writes ``decode_profile.json`` under ``--out``; ``stockr1 bench cost_model`` shows it beside the check.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from benchmarks.gpu_check.env import read_yaml
from benchmarks.gpu_check.phase import CONFIGS, SCALES, TINY_POLICY

TOKENIZER = Path(__file__).resolve().parents[1] / "release" / "tiny" / "sft" / "policy" / "tokenizer"


def build_policy(scale: str, device: str):
    """The GPU check's policy: the recipe's architecture at full depth, random weights, built on ``device``."""
    from llm.arch import qwen3_config
    from llm.policy import Policy, PolicyConfig

    sc = SCALES[scale]
    pol = dict(read_yaml(CONFIGS / sc.sft_config)["policy"])
    dtype = "bfloat16" if device == "cuda" else "float32"
    if sc.tiny:
        pol.update(TINY_POLICY)
    else:
        pol["random_init_layers"] = int(qwen3_config(pol["name_or_path"]).num_hidden_layers)
    pol.update(tokenizer_path=str(TOKENIZER), dtype=dtype)
    torch.manual_seed(0)
    with torch.device(device):
        policy = Policy(PolicyConfig.from_dict(pol))
    return policy.eval()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_phase(policy, rows: int, prompt: int, new: int, device: str, adapter: bool) -> dict[str, float]:
    """One prefill + ``new`` decode steps of ``rows`` random prompts through HFBackend (greedy, no stop
    token, so every row runs ``new`` steps); seconds for the prefill and per decode step."""
    from llm.generation import PhaseRequest
    from llm.hf_backend import HFBackend
    from llm.sampling import TokenSampler

    g = torch.Generator().manual_seed(rows)
    vocab = len(policy.tokenizer)
    reqs = [PhaseRequest(tuple(torch.randint(10, vocab, (prompt,), generator=g).tolist()), None, new, frozenset())
            for _ in range(rows)]
    backend = HFBackend(policy, policy.tokenizer.pad_token_id or 0, TokenSampler(0.0, 1.0, []))
    off = policy.model.disable_adapter() if (not adapter and getattr(policy, "is_lora", False)) else nullcontext()
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else nullcontext()
    with torch.no_grad(), amp, off:
        prefill_only = [PhaseRequest(r.token_ids, None, 1, frozenset()) for r in reqs]
        backend.generate_phase(prefill_only)  # warm-up (kernels, allocator)
        _sync(device)
        t0 = time.perf_counter()
        backend.generate_phase(prefill_only)
        _sync(device)
        t1 = time.perf_counter()
        backend.generate_phase(reqs)
        _sync(device)
        t2 = time.perf_counter()
    prefill_s = t1 - t0
    return {"rows": rows, "prompt": prompt, "new": new, "adapter": adapter, "prefill_s": prefill_s,
            "decode_step_s": max(t2 - t1 - prefill_s, 0.0) / max(new - 1, 1)}


def profile_steps(policy, rows: int, prompt: int, steps: int, device: str) -> dict[str, Any]:
    """torch.profiler over one phase of ``steps`` decode steps: kernels, host and device time per step."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    time_phase(policy, rows, prompt, 2, device, True)  # warm-up outside the profile
    with profile(activities=acts) as prof:
        t0 = time.perf_counter()
        time_phase(policy, rows, prompt, steps, device, True)
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    dev_attr = "self_device_time_total" if hasattr(events[0], "self_device_time_total") else "self_cuda_time_total"
    kernels = sum(e.count for e in events if getattr(e, dev_attr, 0) > 0 and e.device_type.name != "CPU") \
        if device == "cuda" else 0
    device_us = sum(getattr(e, dev_attr, 0) for e in events) if device == "cuda" else 0.0
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    # the profiled call runs 3 prefills (warm-up, timed, and the decode phase's own) and `steps` - 1 decode forwards
    return {"rows": rows, "steps": steps, "wall_s": wall, "kernels": int(kernels), "device_s": device_us / 1e6,
            "top_host_ops": [{"op": e.key, "calls": int(e.count), "self_cpu_s": e.self_cpu_time_total / 1e6}
                             for e in top]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 bench decode_profile", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--scale", default="4b", choices=sorted(SCALES))
    ap.add_argument("--rows", type=int, nargs="+", default=[64, 8])
    ap.add_argument("--prompt", type=int, default=760, help="prompt tokens a row (the check's GRPO prompts: ~760)")
    ap.add_argument("--new-tokens", type=int, default=48, help="decode steps timed per phase")
    ap.add_argument("--profile-steps", type=int, default=8)
    ap.add_argument("--out", type=Path, default=Path("results/accelerator"))
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("stockr1 bench decode_profile: --device cuda but torch.cuda.is_available() is False")
    if a.device == "cpu":
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    t0 = time.perf_counter()
    policy = build_policy(a.scale, a.device)
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
                           "scale": a.scale, "torch": torch.__version__, "build_s": time.perf_counter() - t0,
                           "phases": []}
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "decode_profile.json"
    for rows in a.rows:
        for adapter in (True, False):
            out["phases"].append(time_phase(policy, rows, a.prompt, a.new_tokens, a.device, adapter))
            print(json.dumps(out["phases"][-1]), flush=True)
            path.write_text(json.dumps(out, indent=1))  # what finished survives a timeout
    try:
        out["profile"] = profile_steps(policy, a.rows[0], a.prompt, a.profile_steps, a.device)
    except Exception as e:  # noqa: BLE001 - the timed phases above are the result; the profile is extra
        out["profile"] = {"error": f"{type(e).__name__}: {e}"}
    out["total_s"] = time.perf_counter() - t0
    path.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out["profile"].items() if k != "top_host_ops"}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
