"""Joint SFT (Stock-R1 §3.4): ``L_total = L_SFT + λ_ts · L_TS``.

- ``L_SFT``: next-token loss on tokens the model writes (rationale + action, final reasoning +
  answer + end of turn). Prompt tokens and the tool's ``<forecast_ts>`` observation are masked.
- ``L_TS``: the decoder's training loss (``forecast_action.decoder_loss.DecoderLoss``, the one the
  standalone ``stockr1 decoder`` trains with, set by the config's ``decoder.recipe``): the encoder's
  distribution-aware loss of the action-conditioned decoder conditioned on the target action a* of the
  same window under field dropout, plus the control loss on counterfactual actions.
- The soft tokens ``h_ts`` come from the same decoder's encoder forward, so ``L_SFT`` also reaches
  the encoder and the projector; LoRA (or the full tiny model), projector and decoder train together.

``stockr1 sft --config configs/sft/tiny.yaml`` (``llm.sft_cli``; ``run_sft`` here): builds QA + traces (cached under the run dir),
trains with Lightning Fabric, checkpoints ``checkpoints/sft/<run>/last.ckpt`` every ``ckpt_every``
steps, and finally writes ``policy/`` and ``decoder/``.

Resume (``--resume``): step k's batch is drawn by ``step_rng(seed, k)`` and its dropout / field dropout
by torch seeded with ``step_seed(seed, k, rank)`` (``stockr1.resume``), and the checkpoint holds the
weights, AdamW's state, the LR schedule and the step, so a run killed after any checkpoint and resumed
ends with the weights of the uninterrupted run, bit for bit on CPU (``tests/test_sft_resume.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch import Tensor, nn

from forecast_action.build import build_decoder, load_decoder, save_decoder
from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import ActionThresholds, actions_from_windows
from forecast_action.encoder import featurize
from forecast_action.schema import ForecastAction
from llm.build import build_policy, load_data
from llm.logprobs import keep_for_mask, masked_mean, pad_sequences, token_logprobs
from llm.qa import QAConfig, generate_qa, load_items, save_items
from llm.qa.evaluate import rollout_items
from llm.qa.prompt import SYSTEM_PROMPT
from llm.rollout import encode_segments
from llm.sft_config import SFTRunConfig, TrainConfig
from llm.special_tokens import IM_END, ts_placeholders
from llm.tools import ForecastTool
from llm.traces import PROTOCOL_SPANS, Trace, TraceConfig, TraceWriter, load_traces, save_traces
from stockr1.config import config_from_dict, deep_update, load_yaml
from stockr1.distributed import launch_fabric, shard
from stockr1.outdir import atomic_write
from stockr1.progress import progress
from stockr1.resume import last_checkpoint, seed_step, start_or_resume, step_rng, write_checkpoint
from stockr1.types import train_only

# --- batches ----------------------------------------------------------------------------------


def sft_data(traces: Sequence[Trace], items, windows, tokenizer, cfg: TrainConfig) -> SFTData:
    """``SFTData`` as ``cfg`` asks: its ``max_len``, ``emphasis`` and ``balance`` (the template of each
    trace looked up in ``items``, the run's QA items)."""
    groups = None
    if cfg.balance == "template":
        template = {it.id: it.template for it in items}
        missing = [t.item_id for t in traces if t.item_id not in template]
        if missing:
            raise ValueError(f"train.balance=template: {len(missing)} traces have no QA item, e.g. {missing[0]}")
        groups = [template[t.item_id] for t in traces]
    return SFTData(traces, windows, tokenizer, cfg.max_len, cfg.emphasis, groups)


def encode_trace(tokenizer, trace: Trace, system: str = SYSTEM_PROMPT,
                 emphasis: float = 1.0) -> tuple[list[int], list[float]]:
    """Token ids and loss weights of one trace: 0 = prompt or tool observation, 1 = model-written,
    ``emphasis`` = model-written inside a ``PROTOCOL_SPANS`` match (the recalled instruction and the
    closing answer sentence).

    Segments are tokenized one by one, as the rollout engine does (the tool's observation is inserted
    as its own token run), so SFT and rollouts see the same token boundaries.

    Why emphasis: ~25 of a trace's ~330 model-written tokens carry the protocol (which answer space,
    the answer tag); most of the rest are numbers a small model cannot predict, whose loss dominates
    the mean and its gradient noise.
    """
    from llm.tokenizer import chat_prompt  # lazy: transformers only when a trace is encoded

    ids = tokenizer(chat_prompt(tokenizer, trace.user, system), add_special_tokens=False).input_ids
    seg_ids, seg_mask = encode_segments(tokenizer, trace.segments)
    seg_w = ([float(m) for m in seg_mask] if emphasis == 1.0
             else protocol_weights(tokenizer, trace.segments, emphasis))
    ids = ids + seg_ids + [tokenizer.convert_tokens_to_ids(IM_END)]
    weights = [0.0] * (len(ids) - len(seg_ids) - 1) + seg_w + [1.0]
    return ids, weights


def protocol_weights(tokenizer, segments: Sequence[tuple[str, bool]], emphasis: float) -> list[float]:
    """Per-token weights of ``segments``, tokenized as `encode_segments` does: 0 for tool text,
    ``emphasis`` for model-written tokens that overlap a ``PROTOCOL_SPANS`` match, else 1."""
    out: list[float] = []
    for text, by_model in segments:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [m.span() for m in PROTOCOL_SPANS.finditer(text)] if by_model else []
        out += [0.0 if not by_model else emphasis if any(a < e and s < b for s, e in spans) else 1.0
                for a, b in enc.offset_mapping]
    return out


@dataclass
class SFTBatch:
    """input_ids, attention_mask: [B, T]; loss_mask: [B, T] float loss weights (0 = no loss);
    x: [B, 5, L]; y: [B, 5, S]; start: [B] close at t; actions: the B target actions a*;
    channels: [B, 5] bool observed channels (``Windows.channels``; None = all)."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    x: Tensor
    y: Tensor
    start: np.ndarray
    actions: list
    channels: Tensor | None = None


class SFTData:
    """Encoded traces + their windows. ``sample(rng, n)`` draws trace indices for one batch: uniformly,
    or, given ``groups`` (one key per trace, e.g. its question template), every group equally often."""

    def __init__(self, traces: Sequence[Trace], windows, tokenizer, max_len: int, emphasis: float = 1.0,
                 groups: Sequence[str] | None = None) -> None:
        if groups is not None and len(groups) != len(traces):
            raise ValueError(f"groups has {len(groups)} keys for {len(traces)} traces")

        self.windows, self.pad_id = windows, tokenizer.pad_token_id
        enc = [encode_trace(tokenizer, t, emphasis=emphasis) for t in traces]
        keep = [k for k, (ids, _) in enumerate(enc) if len(ids) <= max_len]
        self.n_too_long = len(traces) - len(keep)
        if not keep:
            raise ValueError(f"no trace fits max_len={max_len}; longest is {max(len(e[0]) for e in enc)} tokens")
        self.enc = [enc[k] for k in keep]
        self.win = np.array([traces[k].window for k in keep])
        self.actions = [ForecastAction(**traces[k].action) for k in keep]
        self.p = None  # draw probabilities; None = uniform
        if groups is not None:
            g = np.array([groups[k] for k in keep])
            keys, inv, counts = np.unique(g, return_inverse=True, return_counts=True)
            self.p = 1.0 / (len(keys) * counts[inv])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``min(n, len(self))`` distinct trace indices."""
        return rng.choice(len(self), size=min(n, len(self)), replace=False, p=self.p)

    def __len__(self) -> int:
        return len(self.enc)

    def batch(self, idx: Sequence[int]) -> SFTBatch:
        ids, att, mask = pad_sequences([self.enc[i][0] for i in idx], self.pad_id, [self.enc[i][1] for i in idx],
                                       mask_dtype=torch.float32)
        w = self.win[list(idx)]
        return SFTBatch(ids, att, mask, torch.as_tensor(self.windows.x[w]), torch.as_tensor(self.windows.y[w]),
                        self.windows.last_close[w], [self.actions[i] for i in idx], torch.as_tensor(self.windows.channels[w]))


# --- the joint model --------------------------------------------------------------------------


@dataclass
class SFTLoss:
    """total = sft + ts_weighted; ts_weighted = lambda_ts * ts (the term as it enters the total); ts is
    the decoder loss (``DecoderLoss``: L_TS, plus the control term when the recipe has one)."""

    total: Tensor
    sft: Tensor
    ts: Tensor
    n_tokens: int
    ts_weighted: Tensor | None = None


def decoder_loss_for(decoder: nn.Module, recipe: DecoderRecipe) -> DecoderLoss:
    """The decoder loss of an SFT run: ``recipe`` with the g the decoder carries (``prepare`` sets the run's)."""
    return DecoderLoss(recipe, decoder.thresholds)


class JointSFT(nn.Module):
    """Policy + action-conditioned decoder, one loss (see module docstring). ``decoder_loss``: the
    decoder's training loss (default: L_TS on the full a*, no control term, for a decoder without g)."""

    def __init__(self, policy: nn.Module, decoder: nn.Module, lambda_ts: float = 0.1,
                 decoder_loss: DecoderLoss | None = None) -> None:
        super().__init__()
        self.policy, self.decoder = policy, decoder
        self.lambda_ts = lambda_ts
        self.decoder_loss = decoder_loss or DecoderLoss(DecoderRecipe(p_none=0.0, control_weight=0.0, field_dropout=False), None)

    def forward(self, b: SFTBatch) -> SFTLoss:
        res = self.decoder_loss(self.decoder, b.x, b.y, featurize(b.actions, b.start).to(b.x.device), channels=b.channels)
        out, l_ts = res.out, res.total  # h_ts does not depend on the action
        # logits only over the span that holds loss tokens: the LM head skips the prompt
        lp = token_logprobs(self.policy, b.input_ids, b.attention_mask, out.h_ts,
                            logits_to_keep=keep_for_mask(b.loss_mask))
        l_sft = -masked_mean(lp, b.loss_mask)
        weighted = self.lambda_ts * l_ts
        return SFTLoss(l_sft + weighted, l_sft.detach(), l_ts.detach(), int((b.loss_mask > 0).sum()),
                       weighted.detach())


def param_groups(model: JointSFT, cfg: TrainConfig) -> list[dict[str, Any]]:
    pol = [p for p in model.policy.parameters() if p.requires_grad]
    dec = [p for p in model.decoder.parameters() if p.requires_grad]
    return [{"params": pol, "lr": cfg.lr}, {"params": dec, "lr": cfg.decoder_lr}]


def lr_lambda(cfg: TrainConfig):
    """Linear warmup then cosine decay to 10% (App. C.2: cosine with warmup)."""

    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        frac = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))

    return f


class SFTTrainer:
    """Fabric loop with resume. ``fit(data)`` runs to ``cfg.max_steps``; state in ``run_dir/last.ckpt``.

    Several devices or nodes (``cfg.devices``, ``num_nodes``, ``strategy``; stockr1/distributed.py):
    every rank draws the same global batch of ``cfg.batch_size`` traces and trains on its shard, DDP
    averages the gradients, rank 0 alone writes checkpoints and metrics. Pass ``fabric`` when it was
    launched before the data were prepared (``run_sft`` does: every rank runs what follows the launch)."""

    def __init__(self, model: JointSFT, cfg: TrainConfig, run_dir: str | Path, logger=None, fabric=None) -> None:
        self.cfg, self.run_dir, self.logger = cfg, Path(run_dir), logger
        self.fabric = fabric if fabric is not None else launch_fabric(cfg)
        if "fsdp" in self.fabric.strategy.__class__.__name__.lower() and cfg.grad_clip_scope == "per_model":
            raise ValueError("train.grad_clip_scope 'per_model' clips whole parameter groups, which FSDP shards; "
                             "use grad_clip_scope 'all' with strategy fsdp")
        shard(range(cfg.batch_size), 0, self.fabric.world_size)  # refuses a batch that does not split evenly
        opt = torch.optim.AdamW(param_groups(model, cfg), weight_decay=cfg.weight_decay)
        self.model, self.opt = self.fabric.setup(model, opt)
        self.sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.grad_norms: dict[str, float] = {}  # pre-clip norms of the last step (logged by fit)

    @property
    def ckpt_path(self) -> Path:
        return self.run_dir / "last.ckpt"

    def state(self) -> dict[str, Any]:
        return {"model": self.model, "optimizer": self.opt, "scheduler": self.sched.state_dict(),
                "step": self.step, "history": self.history}

    def save(self) -> None:
        """``last.ckpt`` through ``stockr1.resume.write_checkpoint``: a kill mid-save keeps the previous one."""
        fab = self.fabric
        write_checkpoint(self.ckpt_path, lambda p: fab.save(p, self.state()),  # every rank; the strategy decides who writes
                         is_writer=fab.is_global_zero, barrier=fab.barrier)

    def maybe_resume(self) -> bool:
        """Load the last complete ``last.ckpt`` (``stockr1.resume.last_checkpoint``); False when there is none."""
        path = last_checkpoint(self.ckpt_path)
        if path is None:
            return False
        st = self.state()
        try:
            rest = self.fabric.load(path, st)
        except Exception as e:  # noqa: BLE001 - an unreadable checkpoint is named, not half-loaded
            raise ValueError(f"cannot resume from {path} (rerun with --overwrite to start over): "
                             f"{type(e).__name__}: {e}") from e
        self.sched.load_state_dict(st["scheduler"] if "scheduler" not in rest else rest["scheduler"])
        self.step, self.history = int(st["step"]), list(st["history"])
        return True

    def train_step(self, batch: SFTBatch) -> SFTLoss:
        self.model.train()
        # Fabric's wrapper handles precision, not placement: move the batch to the model's device
        batch = dataclasses.replace(batch, **{f: self.fabric.to_device(getattr(batch, f))
                                              for f in ("input_ids", "attention_mask", "loss_mask", "x", "y", "channels")})
        loss = self.model(batch)
        self.opt.zero_grad(set_to_none=True)
        self.fabric.backward(loss.total)
        self.grad_norms = self.clip_gradients()
        self.opt.step()
        self.sched.step()
        self.step += 1
        return loss

    def clip_gradients(self) -> dict[str, float]:
        """Clip as ``cfg.grad_clip_scope`` says; the pre-clip norms (``grad_norm``, or ``grad_norm_policy``
        and ``grad_norm_decoder``: the optimiser's two parameter groups, see ``param_groups``)."""
        cfg = self.cfg
        if not cfg.grad_clip:
            return {}
        if cfg.grad_clip_scope == "all":
            return {"grad_norm": float(self.fabric.clip_gradients(self.model, self.opt, max_norm=cfg.grad_clip))}
        self.fabric.strategy.precision.unscale_gradients(self.opt.optimizer)  # fp16 scaler; a no-op otherwise
        return {name: float(torch.nn.utils.clip_grad_norm_(group["params"], cfg.grad_clip, error_if_nonfinite=True))
                for name, group in zip(("grad_norm_policy", "grad_norm_decoder"), self.opt.param_groups, strict=True)}

    def fit(self, data: SFTData, on_snapshot: Callable[[int], None] | None = None) -> list[dict[str, float]]:
        """Train to ``cfg.max_steps``; one JSON line per step (step, loss, l_sft, l_ts, l_ts_weighted =
        lambda_ts * l_ts, lr, sec, and the pre-clip gradient norm(s) ``grad_norm*``) is appended
        to ``run_dir/metrics.jsonl``. Lines past the step this run starts from (written after the last
        checkpoint of an interrupted run, or a torn last line) are dropped first, so a resumed run keeps
        one continuous file; ``sec`` continues from the restored history. ``on_snapshot(step)`` runs on
        rank 0 every ``cfg.snapshot_every`` steps before the last (``run_sft``: a loadable copy of the run)."""
        cfg, fab = self.cfg, self.fabric
        t0 = time.time() - (self.history[-1]["sec"] if self.history else 0.0)
        mpath = self.run_dir / "metrics.jsonl"
        if fab.is_global_zero:
            self._trim_metrics(mpath)
        fab.barrier()
        t_run, first = time.time(), self.step  # this process's rate, for the progress line
        while self.step < cfg.max_steps:
            # step k's batch and its dropout / field-dropout draws are functions of (seed, k, rank) alone, so a
            # run resumed from the checkpoint of step k draws what the uninterrupted run drew (stockr1/resume.py);
            # the batch generator is the same on every rank, the torch seed differs per rank
            idx = shard(data.sample(step_rng(cfg.seed, self.step), cfg.batch_size), fab.global_rank, fab.world_size)
            seed_step(cfg.seed, self.step, fab.global_rank)
            loss = self.train_step(data.batch(idx))
            # the logged losses are the global batch's: means over the ranks' equal shards
            terms = fab.all_reduce(torch.stack([loss.total.detach(), loss.sft, loss.ts, loss.ts_weighted]).float(),
                                   reduce_op="mean")
            rec = {"step": self.step,
                   **dict(zip(("loss", "l_sft", "l_ts", "l_ts_weighted"), map(float, terms), strict=True)),
                   **self.grad_norms, "lr": self.sched.get_last_lr()[0], "sec": time.time() - t0}
            self.history.append(rec)
            if fab.is_global_zero:
                with mpath.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                if self.logger is not None:
                    self.logger.log(rec, step=self.step)
            if self.step % cfg.log_every == 0:
                fab.print(f"step {self.step}: loss {rec['loss']:.4f} (sft {rec['l_sft']:.4f}, ts {rec['l_ts']:.4f}, "
                          f"lambda*ts {rec['l_ts_weighted']:.4f}) | "
                          f"{progress(self.step, cfg.max_steps, time.time() - t_run, self.step - first)}", flush=True)
            if self.step % cfg.ckpt_every == 0 or self.step == cfg.max_steps:
                self.save()
            if (on_snapshot is not None and cfg.snapshot_every and self.step % cfg.snapshot_every == 0
                    and self.step < cfg.max_steps and fab.is_global_zero):
                on_snapshot(self.step)
        return self.history

    def _trim_metrics(self, mpath: Path) -> None:
        """Drop lines past the step this run starts from (and torn lines), atomically."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        kept = []
        for line in (mpath.read_text().splitlines() if mpath.exists() else []):
            try:
                if json.loads(line)["step"] <= self.step:
                    kept.append(line)
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
        atomic_write(mpath, lambda p: p.write_text("".join(f"{line}\n" for line in kept)))  # a kill keeps the old file


def from_dict(cls, d: dict[str, Any]):
    """``cls`` from a config section: unknown keys named, YAML 1.1 numeric strings ("2e-3") coerced."""
    return config_from_dict(cls, d, cls.__name__)


def warmup_decoder(decoder: nn.Module, windows, thresholds, steps: int, batch_size: int = 64, lr: float = 1e-3,
                   seed: int = 0, recipe: DecoderRecipe | None = None) -> list[float]:
    """Fit the decoder alone (``DecoderLoss`` of ``recipe``, default the standalone default, with
    ``thresholds``) on train windows before traces are written, so the executed trajectories in the
    traces come from a decoder that follows its action. Use a pretrained decoder checkpoint instead
    when one exists (``decoder.checkpoint``)."""
    train = train_only(windows)
    actions = actions_from_windows(train, thresholds)
    loss_fn = DecoderLoss(recipe or DecoderRecipe(), thresholds)
    opt = torch.optim.AdamW(decoder.parameters(), lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    losses = []
    decoder.train()
    for _ in range(steps):
        idx = rng.choice(len(train), size=min(batch_size, len(train)), replace=False)
        teacher = featurize([actions[i] for i in idx], train.last_close[idx])
        loss = loss_fn(decoder, torch.as_tensor(train.x[idx]), torch.as_tensor(train.y[idx]), teacher,
                       channels=torch.as_tensor(train.channels[idx])).total
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    decoder.eval()
    return losses


def average_checkpoints(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Write ``out``: the uniform average of the model weights of several ``SFTTrainer`` checkpoints of
    one run (checkpoint averaging, as in LAWA); optimizer, scheduler, step and history are the last
    one's, so resuming from ``out`` continues that schedule. Why: greedy rollouts of a small policy flip
    between parse and miss across checkpoints 250 steps apart while the loss falls smoothly
    (results/sft_recipe); the average of nearby states sits between those flips."""
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    states = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
    keys = set(states[-1]["model"])
    for p, st in zip(paths, states, strict=True):
        if set(st["model"]) != keys:
            raise ValueError(f"{p} holds other parameters than {paths[-1]}: not checkpoints of one run")
    avg = dict(states[-1])
    avg["model"] = {k: (torch.stack([st["model"][k].float() for st in states]).mean(0).to(v.dtype)
                        if torch.is_floating_point(v) else v) for k, v in states[-1]["model"].items()}
    return write_checkpoint(out, lambda p: torch.save(avg, p))


def run_fingerprint(run_dir: str | Path) -> str:
    """Content hash (12 hex) of a finished run's weights: every file under ``policy/`` and ``decoder/``.
    Benchmarks that cache what they built on a run (GRPO runs, evaluations) key the cache on it, so a
    retrained run never silently reuses results of the old one."""
    run_dir = Path(run_dir)
    missing = [str(run_dir / d) for d in ("policy", "decoder") if not (run_dir / d).is_dir()]
    if missing:
        raise FileNotFoundError(f"{run_dir} is not a finished run: missing {missing}")
    files = sorted(p for d in ("policy", "decoder") for p in (run_dir / d).rglob("*") if p.is_file())
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(run_dir)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def prepare(cfg: dict[str, Any], run_dir: Path):
    """Windows, QA items, decoder, thresholds and traces; QA/traces cached in ``run_dir``. ``cfg`` is
    checked against ``SFTRunConfig`` first: a misspelled section or key fails here, naming it."""
    SFTRunConfig.from_dict(cfg)
    windows, context_fn = load_data(cfg.get("data", {}))
    run_dir.mkdir(parents=True, exist_ok=True)
    if cfg.get("prepare_from"):  # share QA, decoder init and traces with another run (ablation arms)
        for name in ("qa.jsonl", "decoder_init", "traces.jsonl", "qa_report.json", "trace_report.json"):
            src = Path(cfg["prepare_from"]) / name
            if src.is_dir() and not (run_dir / name).exists():
                shutil.copytree(src, run_dir / name)
            elif src.exists() and not (run_dir / name).exists():
                shutil.copy(src, run_dir / name)
    qa_path = run_dir / "qa.jsonl"
    if qa_path.exists():
        items = load_items(qa_path)
    else:
        items, rep = generate_qa(windows, from_dict(QAConfig, cfg.get("qa", {})), context_fn)
        save_items(items, qa_path)
        (run_dir / "qa_report.json").write_text(json.dumps(rep.as_dict(), indent=1))
    thresholds = ActionThresholds.fit(train_only(windows))
    thresholds.save(run_dir / "thresholds.json")
    dcfg = cfg.get("decoder", {})
    decoder = build_decoder(dcfg)
    dec_path = run_dir / "decoder_init"
    if dec_path.exists():
        decoder = load_decoder(dec_path)
    elif not dcfg.get("checkpoint"):
        decoder.fit_input_stats(train_only(windows))  # a fresh decoder: input scaling from the train split only
    if not dec_path.exists():
        if int(dcfg.get("warmup_steps", 0)) > 0:
            losses = warmup_decoder(decoder, windows, thresholds, int(dcfg["warmup_steps"]),
                                    recipe=from_dict(DecoderRecipe, dcfg.get("recipe", {})))
            print(f"decoder warm-up: loss {losses[0]:.3f} -> {np.mean(losses[-20:]):.3f}", flush=True)
        # the decoder is prepared: its U normaliser is fitted here, on train, before any trace is written,
        # so the traces' <forecast_ts> carries the same lines as every later rollout (docs/rl.md)
        decoder.fit_uncertainty(train_only(windows))
        decoder.thresholds = thresholds  # the g of this run's traces and rewards travels with the decoder
        save_decoder(decoder, dec_path)
    tr_path = run_dir / "traces.jsonl"
    tcfg = cfg.get("traces", {})
    if tr_path.exists():
        traces = load_traces(tr_path)
    else:
        if "n_samples" in tcfg:
            raise ValueError("traces.n_samples is gone: the tool draws decoder.tool_samples paths in every stage")
        tool = ForecastTool(decoder, windows)
        writer = TraceWriter(windows, tool, thresholds, context_fn=context_fn,
                             ts_placeholder=ts_placeholders(decoder.ts_cfg.n_tokens),
                             cfg=from_dict(TraceConfig, {**tcfg, "max_context_chars": cfg.get("max_context_chars")}))
        traces, rep = writer.write([it for it in items if it.split == "train"])
        save_traces(traces, tr_path)
        (run_dir / "trace_report.json").write_text(json.dumps(rep.as_dict(), indent=1))
    return windows, items, decoder, traces


def _logger(cfg: dict[str, Any], run: str, run_dir: Path):
    wcfg = cfg.get("wandb", {})
    if os.environ.get("WANDB_MODE", wcfg.get("mode", "offline")) == "disabled":
        return None
    import wandb  # lazy: optional and slow to import; only when a run logs to W&B

    return wandb.init(project=wcfg.get("project", "stockr1"), name=f"sft-{run}", dir=str(run_dir), config=cfg,
                      mode=os.environ.get("WANDB_MODE", wcfg.get("mode", "offline")), resume="allow", id=f"sft-{run}")


def load_sft_config(config: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The SFT YAML with ``overrides`` merged in, checked against ``SFTRunConfig`` before any work (a
    typo costs nothing): an error names the file, the key path and the nearest valid key."""
    cfg = deep_update(load_yaml(config), overrides or {})
    try:
        SFTRunConfig.from_dict(cfg)
    except ValueError as e:
        raise ValueError(f"{config}: {e}") from e
    return cfg


@dataclass
class SFTSetup:
    """What a joint SFT run trains, built by ``build_sft``."""

    windows: Any
    items: list
    decoder: nn.Module
    traces: list[Trace]
    policy: Any
    data: SFTData
    trainer: SFTTrainer


def build_sft(cfg: dict[str, Any], run_dir: Path, tcfg: TrainConfig, fabric=None, logger=None) -> SFTSetup:
    """Seed -> data, QA, decoder, traces (``prepare``) -> policy -> encoded traces -> trainer. With
    ``fabric`` (several ranks), rank 0 writes QA, decoder init, traces and tokenizer and the rest read them."""
    torch.manual_seed(tcfg.seed)  # the same initial weights on every rank
    with fabric.rank_zero_first() if fabric is not None else nullcontext():
        windows, items, decoder, traces = prepare(cfg, run_dir)
        policy = build_policy(cfg, traces, run_dir)
    data = sft_data(traces, items, windows, policy.tokenizer, tcfg)
    recipe = from_dict(DecoderRecipe, cfg.get("decoder", {}).get("recipe", {}))
    model = JointSFT(policy, decoder, tcfg.lambda_ts, decoder_loss_for(decoder, recipe))
    trainer = SFTTrainer(model, tcfg, run_dir, logger, fabric=fabric)
    return SFTSetup(windows, items, decoder, traces, policy, data, trainer)


def run_sft(config: str | Path, run: str | None = None, max_steps: int | None = None,
            out_root: str | Path = "checkpoints/sft", overrides: Mapping[str, Any] | None = None,
            resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """The whole stage: data -> traces -> joint training -> policy/ + decoder/. ``resume``: continue from the
    run dir's last complete ``last.ckpt``; ``overwrite``: delete the run dir first; with neither, a run dir
    that holds a checkpoint is refused (``stockr1.resume.start_or_resume``)."""
    cfg = load_sft_config(config, overrides)
    run = run or cfg.get("run", Path(config).stem)
    run_dir = Path(out_root) / run
    tcfg = from_dict(TrainConfig, {**cfg.get("train", {}), **({"max_steps": max_steps} if max_steps else {})})
    # before the launch: every rank decides the same, and no rank writes before all have (launch is a rendezvous)
    start_or_resume(run_dir, last_checkpoint(run_dir / "last.ckpt"), resume, overwrite, "stockr1 sft")
    fabric = launch_fabric(tcfg)  # before any work: with several devices every rank runs what follows
    run_dir.mkdir(parents=True, exist_ok=True)
    logger = _logger(cfg, run, run_dir) if fabric.is_global_zero else None
    s = build_sft(cfg, run_dir, tcfg, fabric, logger)
    windows, items, decoder, policy, data, trainer = s.windows, s.items, s.decoder, s.policy, s.data, s.trainer
    if fabric.is_global_zero:  # the config this run trained with: the file plus any command-line overrides
        (run_dir / "config.yaml").write_text(Path(config).read_text() if not overrides else
                                             yaml.safe_dump(cfg, sort_keys=False))
    resumed = trainer.maybe_resume()
    fabric.print(f"SFT {run}: {len(data)} traces ({data.n_too_long} too long) on {fabric.world_size} rank(s), "
                 f"{'resumed at step ' + str(trainer.step) if resumed else 'fresh start'}", flush=True)

    def summary_at(step: int) -> dict[str, Any]:
        final = next((r for r in reversed(trainer.history) if r["step"] == step), None)
        return {"run": run, "run_dir": str(run_dir), "steps": step, "n_traces": len(data),
                "world_size": fabric.world_size, "rank": fabric.global_rank, "final": final}

    def snapshot(step: int) -> None:  # a candidate for `stockr1 bench select_sft`, loadable as a finished run
        export_run(policy, decoder, windows, run_dir, run_dir / "snapshots" / f"step_{step:05d}", summary_at(step))

    trainer.fit(data, on_snapshot=snapshot)
    summary = summary_at(trainer.step)
    if not fabric.is_global_zero:
        return summary
    export_run(policy, decoder, windows, run_dir, run_dir, None)
    if logger is not None:
        _log_rollouts(logger, policy, decoder, windows, [it for it in items if it.split == "val"][:8],
                      cfg.get("max_context_chars"))
        logger.finish()
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def export_run(policy, decoder: nn.Module, windows, run_dir: Path, out: Path, summary: dict[str, Any] | None) -> Path:
    """Save ``policy/`` and ``decoder/`` under ``out``. Joint SFT moved the decoder's weights, so its U
    normaliser is refit on train for the weights saved, once; from then on that saved decoder is the tool
    of GRPO and of every benchmark, and nothing refits it. A snapshot (``out`` != ``run_dir``) refits a
    copy, so training goes on with the decoder it had, and gets the run's files (config, QA, thresholds)
    and its own ``summary``, so it loads, grades and packs as a finished run does."""
    out.mkdir(parents=True, exist_ok=True)
    policy.save(out / "policy")
    if out != run_dir:
        decoder = copy.deepcopy(decoder)
        for name in ("config.yaml", "qa.jsonl", "thresholds.json", "qa_report.json", "trace_report.json"):
            if (run_dir / name).exists():
                shutil.copy2(run_dir / name, out / name)
    decoder.fit_uncertainty(train_only(windows))
    save_decoder(decoder, out / "decoder")
    if summary is not None:
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return out


def _log_rollouts(logger, policy, decoder, windows, items, max_context_chars: int | None = None) -> None:
    """A W&B table of sample rollouts on validation questions (via the one rollout engine)."""
    import wandb  # lazy: optional and slow to import; only when a run logs to W&B

    rows = rollout_items(policy, decoder, windows, items, max_new_tokens=512, max_context_chars=max_context_chars)
    logger.log({"sample_rollouts": wandb.Table(columns=["question", "answer", "completion"],
                                               data=[[it.question, it.answer, r.completion] for it, r in rows])})
