"""``stockr1 sft --config configs/sft/qwen3-4b.yaml --smoke`` (and ``stockr1 grpo ... --smoke``).

Why: a real-scale config could fail only on the GPU box, after the weights were fetched (a decoder file
nothing writes, a projector or decoder of the wrong width, a LoRA target the model lacks). The smoke
builds the config's real architecture at full width and full vocabulary with random weights and the
layer count cut to ``SMOKE.layers`` (``PolicyConfig.random_init_layers``; ``llm.arch``), LoRA as
configured, the offline tokenizer trained on this run's text, a handful of QA items, short contexts,
batch 1, and runs ONE step through the trainer the real run uses (``SFTTrainer.train_step`` /
``GRPOTrainer.train_step``). bf16-mixed where CUDA has bf16, else fp32 (32-true). It prints one line
with seconds per step and peak memory (CUDA max allocated during the step, or the process's peak RSS on
CPU) and writes ``smoke.json`` into ``--out`` (default: a temporary directory, removed afterwards).

The data: the config's ``data`` section; a ``source: dataset`` whose directory is not built (the 4B/8B
configs read ``data/sp500``, written by ``stockr1 data build --source yfinance``, which needs the
network) is replaced by the offline sample with the same window shape, and the printed line says so.

The decoder: the configured file when it exists, else a fresh one with the configured architecture
(``decoder.config``, the ``forecast_action.train`` config that writes the file) whose input scaling and
U normaliser are fitted on a few train windows. Quality numbers mean nothing; shapes, memory and the
code path are the point.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from forecast_action.build import build_decoder, load_decoder
from forecast_action.decoder import ActionConditionedDecoder
from llm.build import load_data, local_tokenizer
from llm.policy import Policy, PolicyConfig
from llm.sft import JointSFT, SFTTrainer, TrainConfig, from_dict, prepare, sft_data
from stockr1.config import load_yaml
from stockr1.data.config import DataConfig
from stockr1.types import train_only


@dataclass(frozen=True)
class Smoke:
    """What a smoke run cuts (everything else is the config's)."""

    layers: int = 2  # transformer layers of the random-init policy
    n_queries: int = 4  # QA train items: SFT traces / GRPO queries
    max_context_chars: int = 120  # short prompts
    tokenizer_vocab: int = 1000
    group_size: int = 2  # GRPO rollouts per query (the minimum for a group advantage)
    max_new_tokens: int = 8  # GRPO rollout budget
    normalizer_windows: int = 64  # train windows for a fresh decoder's U normaliser


SMOKE = Smoke()


@dataclass(frozen=True)
class Device:
    accelerator: str  # cuda | cpu
    precision: str  # Fabric precision
    dtype: str  # policy weights


def device_settings(config_dtype: str) -> Device:
    """bf16-mixed with the config's dtype where CUDA supports bf16; fp32 everywhere else (a bf16 model
    on CPU runs slow kernels and no bf16-mixed autocast)."""
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return Device("cuda", "bf16-mixed", config_dtype)
    if torch.cuda.is_available():
        return Device("cuda", "32-true", "float32")
    return Device("cpu", "32-true", "float32")


@contextmanager
def work_dir(out: str | Path | None) -> Iterator[Path]:
    """``out`` (created) or a temporary directory removed at the end."""
    if out is not None:
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="stockr1-smoke-") as d:
        yield Path(d)


def peak_memory_gib(accelerator: str) -> tuple[float, str]:
    """(GiB, what was measured): CUDA max allocated since the last reset, or the process's peak RSS."""
    if accelerator == "cuda":
        return torch.cuda.max_memory_allocated() / 2**30, "cuda max allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**30 if sys.platform == "darwin" else 2**20), "cpu peak rss"


def timed_step(step: Callable[[], Any], accelerator: str) -> tuple[Any, float]:
    """(step(), seconds), synchronised on CUDA; the CUDA peak counter is reset first so the peak is the step's."""
    if accelerator == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out = step()
    if accelerator == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


# ----------------------------------------------------------------------------------- the pieces
def smoke_data(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(data section to run on, what it is for the printed line): the config's, or the sample in place of
    a dataset that is not built (see module docstring)."""
    data = dict(cfg.get("data") or {})
    if data.get("source") == "dataset" and data.get("path") and not (Path(data["path"]) / "manifest.json").exists():
        keep = {k: data[k] for k in ("lookback", "horizon") if k in data}
        return {"source": "sample", **keep}, f"sample (dataset {data['path']} not built)"
    return data, DataConfig.from_dict(data).describe()


def fresh_decoder(dcfg: Mapping[str, Any]) -> nn.Module:
    """A decoder with the configured architecture and random weights: ``decoder.config``'s ``model`` and
    ``action`` sections when named (the file ``forecast_action.train`` reads), else ``decoder.ts`` /
    ``decoder.action`` as ``forecast_action.build.build_decoder`` reads them."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(dcfg.get("seed", 0)))
        if not dcfg.get("config"):
            return build_decoder({k: v for k, v in dcfg.items() if k != "checkpoint"})
        from forecast_action.train import ActionTrainConfig

        spec = ActionTrainConfig.from_yaml(dcfg["config"])
        return ActionConditionedDecoder(spec.model, spec.action, tool_samples=spec.train.tool_samples)


def prepared_decoder(cfg: Mapping[str, Any], windows, out: Path) -> Path:
    """The run's decoder saved to ``out``: the configured checkpoint when it exists, else ``fresh_decoder``
    with input scaling from train and its U normaliser fitted on ``SMOKE.normalizer_windows`` train
    windows (``ActionConditionedDecoder.fit_uncertainty``)."""
    dcfg = dict(cfg.get("decoder", {}))
    if dcfg.get("checkpoint") and Path(dcfg["checkpoint"]).exists():
        decoder = load_decoder(dcfg["checkpoint"])
    else:
        decoder = fresh_decoder(dcfg)
        train = train_only(windows)
        decoder.fit_input_stats(train)
        decoder.fit_uncertainty(train, max_windows=SMOKE.normalizer_windows)
    decoder.save_pretrained(out)
    return out


def policy_section(cfg: Mapping[str, Any], tokenizer_path: Path, dev: Device) -> dict[str, Any]:
    """The config's policy with random weights, ``SMOKE.layers`` layers, the local tokenizer and ``dev``'s dtype."""
    pol = dict(cfg.get("policy", {}))
    if pol.get("name_or_path", "tiny") == "tiny":
        raise ValueError("--smoke is for real-scale configs (policy.name_or_path names a Qwen3 model); "
                         "a tiny config runs as it is")
    return {**pol, "random_init_layers": SMOKE.layers, "tokenizer_path": str(tokenizer_path), "dtype": dev.dtype}


def model_facts(policy) -> dict[str, Any]:
    """Shapes of the built policy: what the smoke is meant to check."""
    base = policy.model
    qcfg = base.config.get_text_config()
    lora = [n for n, m in base.named_modules() if hasattr(m, "lora_A") and len(getattr(m, "lora_A", {}))]
    return {"name_or_path": policy.cfg.name_or_path, "hidden": int(qcfg.hidden_size),
            "layers": int(qcfg.num_hidden_layers), "embedding_rows": int(base.get_input_embeddings().weight.shape[0]),
            "lora_modules": len(lora), "lora_targets": sorted({n.rsplit(".", 1)[-1] for n in lora}),
            "trainable_token_params": sum(p.numel() for n, p in policy.named_parameters()
                                          if p.requires_grad and "trainable_tokens" in n),
            "params_total": sum(p.numel() for p in policy.parameters()),
            "params_trainable": sum(p.numel() for p in policy.parameters() if p.requires_grad),
            "d_ts": policy.cfg.d_ts}


def report(stage: str, config: str | Path, facts: dict[str, Any], out: Path) -> dict[str, Any]:
    """Print the one summary line and write ``out/smoke.json``."""
    line = (f"smoke {stage} {config}: {facts['name_or_path']} hidden {facts['hidden']}, {facts['layers']} layers, "
            f"{facts['embedding_rows']} embedding rows, LoRA on {facts['lora_modules']} modules, "
            f"{facts['tokens']} tokens, {facts['precision']} on {facts['accelerator']}: "
            f"{facts['sec_per_step']:.2f} s/step, peak memory {facts['peak_memory_gib']:.2f} GiB "
            f"({facts['peak_memory_kind']}), data: {facts['data']}")
    print(line, flush=True)
    (out / "smoke.json").write_text(json.dumps({**facts, "line": line}, indent=1, default=str))
    return facts


# ----------------------------------------------------------------------------------- the two stages
def sft_smoke(config: str | Path, out: str | Path | None = None) -> dict[str, Any]:
    """One ``SFTTrainer.train_step`` of the config at full width (see module docstring)."""
    cfg = load_yaml(config)
    data, data_note = smoke_data(cfg)
    cfg = {**cfg, "data": data}
    dev = device_settings(str(cfg.get("policy", {}).get("dtype", "float32")))
    with work_dir(out) as work:
        windows, _ = load_data(cfg["data"])
        dec_file = prepared_decoder(cfg, windows, work / "decoder_init")  # prepare() reuses it as is
        scfg = {**cfg, "qa": {"n_train": SMOKE.n_queries, "n_val": 0, "n_test": 0, "seed": 0},
                "traces": {"drop_trivial": False}, "max_context_chars": SMOKE.max_context_chars,
                "decoder": {"checkpoint": str(dec_file)}, "prepare_from": None}
        windows, items, decoder, traces = prepare(scfg, work)
        tok = local_tokenizer(traces, SMOKE.tokenizer_vocab, work / "tokenizer")
        policy = Policy(PolicyConfig.from_dict(policy_section(cfg, tok, dev)))
        tcfg = from_dict(TrainConfig, {**cfg.get("train", {}), "batch_size": 1, "max_steps": 1,
                                       "accelerator": dev.accelerator, "precision": dev.precision})
        data = sft_data(traces, items, windows, policy.tokenizer, tcfg)
        trainer = SFTTrainer(JointSFT(policy, decoder, tcfg.lambda_ts), tcfg, work)
        shortest = min(range(len(data)), key=lambda i: len(data.enc[i][0]))
        batch = data.batch([shortest])
        loss, sec = timed_step(lambda: trainer.train_step(batch), dev.accelerator)
        gib, kind = peak_memory_gib(dev.accelerator)
        facts = {**model_facts(policy), **dataclasses.asdict(dev), "tokens": int(batch.input_ids.numel()),
                 "decoder_d_llm": int(decoder.ts_cfg.d_llm), "sec_per_step": sec, "peak_memory_gib": gib,
                 "peak_memory_kind": kind, "l_sft": float(loss.sft), "l_ts": float(loss.ts),
                 "l_ts_weighted": float(loss.ts_weighted), **trainer.grad_norms, "data": data_note}
        return report("sft", config, facts, work)
