"""The cost model against the 4B SFT smoke (``stockr1 sft --config configs/sft/qwen3-4b.yaml --smoke``):
its measured parameter counts (exact) and peak memory (rough) beside the model's prediction for 2 layers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.accelerator import cost_model as cm

SMOKE_CONFIG = "configs/sft/qwen3-4b.yaml"
ROOT = Path(__file__).resolve().parents[2]
# what the smoke process holds besides the policy: imports, data, decoder, traces, tokenizer (no policy)
_BASELINE = """
import json, sys, resource
from pathlib import Path
import yaml
from llm.build import load_data, local_tokenizer
from llm.sft import prepare
from llm.smoke import SMOKE, prepared_decoder, smoke_data
cfg, work = yaml.safe_load(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
cfg = {**cfg, "data": smoke_data(cfg)[0]}  # the data the smoke itself used (the sample when the dataset is not built)
windows, _ = load_data(cfg["data"])
dec = prepared_decoder(cfg, windows, work / "decoder_init")
scfg = {**cfg, "qa": {"n_train": SMOKE.n_queries, "n_val": 0, "n_test": 0, "seed": 0}, "traces": {"drop_trivial": False},
        "max_context_chars": SMOKE.max_context_chars, "decoder": {"checkpoint": str(dec)}, "prepare_from": None}
windows, items, decoder, traces = prepare(scfg, work)
local_tokenizer(traces, SMOKE.tokenizer_vocab, work / "tokenizer")
print(json.dumps({"baseline_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def run_smoke(out: Path) -> Path:
    """Run the smoke into ``out`` and, in a second process, the same preparation without the policy
    (``baseline.json``: the peak RSS that is not the training state)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "stockr1.cli", "sft", "--config", SMOKE_CONFIG, "--smoke", "--out", str(out)],
                   check=True, cwd=ROOT)
    return baseline(out)


def baseline(out: Path) -> Path:
    """``out/baseline.json``: the peak RSS of the smoke's preparation without the policy (a new process)."""
    base = out / "baseline"
    res = subprocess.run([sys.executable, "-c", _BASELINE, SMOKE_CONFIG, str(base)], check=True, cwd=ROOT,
                         capture_output=True, text=True)
    (out / "baseline.json").write_text(res.stdout.strip().splitlines()[-1])
    return out


def smoke_batch(smoke_dir: Path) -> tuple[int, int]:
    """(tokens, logit positions) of the smoke's one-trace batch: the shortest trace, encoded as SFT does."""
    from llm.sft import encode_trace
    from llm.tokenizer import load_tokenizer
    from llm.traces import load_traces

    tok = load_tokenizer(smoke_dir / "tokenizer")
    enc = [encode_trace(tok, t) for t in load_traces(smoke_dir / "traces.jsonl")]
    ids, w = min(enc, key=lambda e: len(e[0]))
    first = next(i for i, x in enumerate(w) if x > 0)
    return len(ids), len(ids) - first


def decoder_params(config: str) -> int:
    """Parameters of the fresh decoder of a forecast_action config (path relative to the repo)."""
    from llm.smoke import fresh_decoder  # lazy: torch only when parameters are counted

    return sum(p.numel() for p in fresh_decoder({"config": str(ROOT / config)}).parameters())


def compare(smoke_dir: Path) -> dict[str, Any]:
    """Measured (smoke.json) against predicted (cost model, the smoke's shapes, fp32, checkpointing)."""
    from benchmarks.gpu_check.env import read_yaml
    from llm.arch import QWEN3_ARCHS

    s = json.loads((smoke_dir / "smoke.json").read_text())
    cfg = read_yaml(ROOT / SMOKE_CONFIG)
    arch = cm.Arch.from_config(QWEN3_ARCHS[s["name_or_path"]]).with_(layers=int(s["layers"]),
                                                                    vocab=int(s["embedding_rows"]))
    ad = cm.Adapter(lora_r=int(cfg["policy"]["lora_r"]), d_ts=int(s["d_ts"]))
    pc = cm.param_counts(arch, ad)
    tokens, kept = smoke_batch(smoke_dir)
    wb = 4 if s["dtype"] == "float32" else 2
    mem = cm.training_memory(arch, ad, tokens, kept, weight_bytes=wb, act_bytes=wb, logit_bytes=12 if wb == 4 else 10,
                             checkpointing=bool(cfg["policy"].get("gradient_checkpointing")))
    dec = decoder_params(cfg["decoder"]["config"])
    mem["decoder"] = dec * 12  # its gradients + AdamW states; its weights are in the baseline
    mem["total"] = sum(v for k, v in mem.items() if k != "total")
    base = smoke_dir / "baseline.json"
    baseline = json.loads(base.read_text())["baseline_rss_gib"] if base.exists() else 0.0
    return {"measured_total": s["params_total"], "measured_trainable": s["params_trainable"],
            "predicted_total": pc["total"], "predicted_trainable": pc["trainable"],
            "total_equal": s["params_total"] == pc["total"], "trainable_equal": s["params_trainable"] == pc["trainable"],
            "tokens": tokens, "kept": kept, "smoke_tokens": s["tokens"], "measured_gib": s["peak_memory_gib"],
            "memory_kind": s["peak_memory_kind"], "predicted_gib": mem["total"] / cm.GIB, "baseline_gib": baseline,
            "predicted_parts_gib": {k: v / cm.GIB for k, v in mem.items() if k != "total"}}
