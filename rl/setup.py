"""u-GRPO from the SFT checkpoint, as a library (``stockr1 grpo`` is ``rl.cli``): config, setup, run.

Wiring (each piece is the shared one, so GRPO sees exactly what SFT and the QA benchmark see):
data (``llm.build.load_data``) -> QA items (the SFT run's ``qa.jsonl``, else ``llm.qa.generator``;
train split only) -> action thresholds g (the SFT run's ``thresholds.json``, else fit on train
windows) -> policy + decoder from ``sft.run_dir`` (``policy/``,
``decoder/``), else the tiny policy / fresh decoder of the config -> prompts
(``llm.qa.prompt``; K ``<ts>`` slots filled with the decoder encoder's ``h_ts``) and U_q (the
decoder's normalised no-action uncertainty; the normaliser is the saved decoder's, never refit here) ->
``RolloutEngine`` with the ``ForecastTool`` -> ``GRPOTrainer``.

Outputs under ``<out>/<run>/``: ``last.ckpt`` (``--resume`` continues from it; README, Resume), ``metrics.jsonl``,
``samples.jsonl``, ``wandb/`` (offline), and at the end ``policy/``, ``decoder/``, ``summary.json``.

``run_grpo(config_dict_or_path, ...)`` is the public entry for the pipeline and the ablation
benchmark (e.g. ``{"train": {"uncertainty": {"enabled": False}}}`` for GRPO with w = 1,
``{"train": {"reward_components": ["r_ans", "r_prec", "r_cons"]}}`` for "w/o R_act").
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from forecast_action.build import build_decoder, load_decoder, save_decoder
from forecast_action.derive import ActionThresholds, actions_from_windows
from llm.build import load_data
from llm.policy import Policy, PolicyConfig
from llm.qa.core import QAItem
from llm.qa.dataset import load_items
from llm.qa.generator import QAConfig, QAGenerator
from llm.qa.prompt import SYSTEM_PROMPT, user_message
from llm.rollout import RolloutEngine
from llm.special_tokens import ts_placeholders
from llm.tokenizer import chat_prompt
from llm.tools import ForecastTool
from rl.logging import RunLogger
from rl.probe import answer_contexts, answer_logodds, probe_rewards
from rl.run_config import GRPORunConfig, RolloutConfig
from rl.soft_tokens import SoftTokenSource
from rl.trainer import GRPOSample, GRPOTrainConfig, GRPOTrainer, StockR1Scorer, make_fabric
from stockr1.config import config_from_dict, deep_update, load_yaml
from stockr1.distributed import precision_autocast
from stockr1.resume import last_checkpoint, start_or_resume
from stockr1.types import CLOSE, VOLUME, train_only


def load_config(config: str | Path | Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict:
    """The GRPO config (a YAML path or a mapping) with ``overrides`` merged in, checked against
    ``GRPORunConfig`` before any work: a misspelled section or key is an error naming it (and the file)."""
    if isinstance(config, Mapping):
        cfg = dict(config)
    else:
        cfg = load_yaml(config)
    cfg = deep_update(cfg, overrides or {})
    try:
        GRPORunConfig.from_dict(cfg)
    except ValueError as e:
        raise ValueError(f"{config if not isinstance(config, Mapping) else 'GRPO config'}: {e}") from e
    return cfg


def load_models(cfg: Mapping[str, Any], sft_dir: Path | None):
    """(policy, decoder): from the SFT run when it has them, else built from the config."""
    torch.manual_seed(int(cfg.get("seed", 0)))
    if sft_dir is not None and (sft_dir / "policy" / "policy_config.json").exists():
        policy = Policy.load(sft_dir / "policy")
    else:
        policy = Policy(PolicyConfig.from_dict(cfg.get("policy", {})))
    if sft_dir is not None and (sft_dir / "decoder").exists():
        decoder = load_decoder(sft_dir / "decoder")
    else:
        decoder = build_decoder(cfg.get("decoder", {}))
    return policy, decoder.eval()


def prepare_fresh_decoder(decoder, windows) -> None:
    """A decoder built from the config (no SFT run): input scaling and U normaliser from train only,
    the preparation SFT would have done; a loaded decoder is used as saved."""
    if bool(decoder.normalizer.fitted):
        return
    train = train_only(windows)
    decoder.fit_input_stats(train)
    decoder.fit_uncertainty(train)


@torch.no_grad()
def query_uncertainty(decoder, windows, idx: np.ndarray, batch: int = 256) -> np.ndarray:
    """U_q [n]: the decoder's normalised uncertainty of the no-action forecast, the number the tool
    prints before the policy acts. Reads the decoder's fitted normaliser and never fits it
    (``ActionConditionedDecoder.fit_uncertainty`` is called only where the decoder is prepared);
    ValueError when it is unfitted."""
    if not bool(decoder.normalizer.fitted):
        raise ValueError("the decoder's uncertainty normaliser is not fitted: prepare the decoder first "
                         "(llm.sft prepare / forecast_action training call fit_uncertainty on train)")
    u = []
    for i in range(0, len(idx), batch):
        u.append(decoder.normalizer(decoder.no_action_uncertainty(windows.select(idx[i:i + batch]))))
    return torch.cat(u).double().cpu().numpy()


def build_samples(items, windows, thresholds, decoder, tokenizer,
                  max_context_chars: int | None = None) -> list[GRPOSample]:
    """One GRPOSample per QA item: the shared prompt (as SFT and the QA benchmark build it), reward
    columns, U_q, and the soft tokens' source (computed per batch: ``rl.soft_tokens``)."""
    idx = np.array([it.window for it in items], dtype=int)
    u = query_uncertainty(decoder, windows, idx)
    targets = actions_from_windows(windows.select(idx), thresholds)
    ph = ts_placeholders(decoder.ts_cfg.n_tokens)
    source = SoftTokenSource(decoder, windows)
    ctx = windows.context
    out = []
    for j, it in enumerate(items):
        w = it.window
        user = user_message(it, str(ctx[w]) if len(ctx) else "", ph, max_context_chars)
        prompt = chat_prompt(tokenizer, user, SYSTEM_PROMPT)
        cols = {"answer": it.answer, "answer_type": it.answer_type, "tolerance": it.tolerance,
                "choices": tuple(it.choices), "target_action": targets[j],
                "true_close": windows.future[w, :, CLOSE], "true_volume": windows.future[w, :, VOLUME],
                "start_close": float(windows.last_close[w])}
        out.append(GRPOSample(prompt, int(w), cols, None, float(u[j]), ts_source=source))
    return out


@dataclass
class GRPOSetup:
    """Everything a GRPO run (or a reward probe of one) is built from, by ``build_setup``."""

    cfg: dict[str, Any]
    train_cfg: GRPOTrainConfig
    sft: Path | None
    windows: Any
    thresholds: Any
    samples: list[GRPOSample]
    policy: Any
    decoder: Any
    rollout: dict[str, Any]

    def engine(self, policy=None, decoder=None, **over):
        """A rollout engine over ``policy`` (default: the setup's) with the run's rollout settings (its
        ``rollout.backend``: hf or vllm) and the frozen tool of ``decoder`` (default: the setup's)."""
        policy = policy or self.policy
        tool = ForecastTool(decoder or self.decoder, self.windows)
        rollout = config_from_dict(RolloutConfig, {**self.rollout, **over}, "grpo.rollout")
        return RolloutEngine(policy, policy.tokenizer, [tool], **rollout.engine_kwargs())


def train_config(cfg: Mapping[str, Any], max_steps: int | None = None) -> GRPOTrainConfig:
    """``cfg['train']`` as a validated ``GRPOTrainConfig`` (dr_grpo's length from the rollout budget)."""
    tcfg = dict(cfg.get("train", {}))
    if max_steps is not None:
        tcfg["max_steps"] = max_steps
    loss = dict(tcfg.get("loss", {}))
    if loss.get("loss_type") == "dr_grpo" and loss.get("max_completion_length") is None:
        # Dr. GRPO's constant normaliser: the rollout token budget
        tcfg["loss"] = {**loss, "max_completion_length": int(cfg.get("rollout", {}).get("max_new_tokens", 512))}
    return GRPOTrainConfig.from_dict(tcfg)


def select_train_queries(items: list[QAItem], max_q: int | None, seed: int = 0,
                         balance_yes_no: bool = False) -> list[QAItem]:
    """The train items GRPO trains on, in their file order: ``max_q`` of them picked by a seeded permutation
    (None: all). ``balance_yes_no``: only yes/no items, ``max_q / 2`` with gold Yes and as many with gold No
    (each half the first of its gold in the permutation), so that one answer prior shared by every query earns
    R_ans nothing and only answers learnt per query raise it (results/grpo_check: the prior is what moved)."""
    order = np.random.default_rng(seed).permutation(len(items))
    if not balance_yes_no:
        return items if not max_q else [items[i] for i in sorted(order[: int(max_q)])]
    if not max_q or int(max_q) % 2:
        raise ValueError(f"qa.balance_yes_no needs an even qa.max_train_queries (half per gold), got {max_q}")
    half, picked = int(max_q) // 2, []
    for gold in ("Yes", "No"):
        idx = [int(i) for i in order if items[i].answer_type == "yes_no" and items[i].answer == gold][:half]
        if len(idx) < half:
            raise ValueError(f"qa.balance_yes_no: the train split holds {len(idx)} yes/no items with gold {gold}, "
                             f"fewer than the {half} that qa.max_train_queries {max_q} needs")
        picked += idx
    return [items[i] for i in sorted(picked)]


def build_setup(cfg: Mapping[str, Any], sft: Path | None, max_steps: int | None = None) -> GRPOSetup:
    """Data -> train items (the SFT run's, train split only) -> thresholds -> policy + decoder ->
    GRPO samples, exactly as a run trains on them."""
    cfg = dict(cfg)
    GRPORunConfig.from_dict(cfg)  # callers that pass a mapping (benchmarks) get the same checks
    train_cfg = train_config(cfg, max_steps)
    windows, context_fn = load_data(cfg.get("data", {}))
    qa = dict(cfg.get("qa", {}))
    max_q, balance = qa.pop("max_train_queries", None), bool(qa.pop("balance_yes_no", False))
    if sft is not None and (sft / "qa.jsonl").exists():  # the SFT run's own items and thresholds
        items = load_items(sft / "qa.jsonl")
    else:
        items, _ = QAGenerator(windows, context_fn).generate(QAConfig(**qa))
    train_items = select_train_queries([it for it in items if it.split == "train"], max_q, qa.get("seed", 0), balance)
    th_file = sft / "thresholds.json" if sft is not None else None
    thresholds = ActionThresholds.load(th_file) if th_file and th_file.exists() else ActionThresholds.fit(train_only(windows))
    policy, decoder = load_models(cfg, sft)
    prepare_fresh_decoder(decoder, windows)
    if decoder.thresholds is None:  # the g of this run's rewards is the g a trained decoder's control loss bins with
        decoder.thresholds = thresholds
    samples = build_samples(train_items, windows, thresholds, decoder, policy.tokenizer, cfg.get("max_context_chars"))
    rollout = dict(cfg.get("rollout", {}))
    return GRPOSetup(cfg, train_cfg, sft, windows, thresholds, samples, policy, decoder, rollout)


def sft_dir_of(cfg: Mapping[str, Any], sft_dir: str | Path | None) -> Path | None:
    """The SFT run GRPO starts from (``--sft`` over ``sft.run_dir``), None when neither names one.
    A named directory that holds no finished SFT run is an error: training on from a random policy
    would exit 0 and look like a result."""
    path = Path(sft_dir) if sft_dir else (Path(cfg["sft"]["run_dir"]) if (cfg.get("sft") or {}).get("run_dir") else None)
    if path is not None and not (path / "policy" / "policy_config.json").exists():
        raise FileNotFoundError(f"SFT run {path} has no policy/ (not a finished `stockr1 sft` run); train it with "
                                "`stockr1 sft --config configs/sft/tiny.yaml` or set sft.run_dir: null to start GRPO "
                                "from the config's policy")
    return path


def build_trainer(cfg: Mapping[str, Any], sft: Path | None, out: str | Path, fabric=None,
                  logger: RunLogger | None = None, max_steps: int | None = None) -> tuple[GRPOTrainer, GRPOSetup]:
    """The trainer a run of ``cfg`` trains with, at step 0 and not yet fitted (``run_grpo`` fits it; the
    credit diagnostic of ``rl.credit`` takes its first step's batch and gradients), and its setup."""
    st = build_setup(cfg, sft, max_steps)
    train_cfg = st.train_cfg
    scorer = StockR1Scorer(st.thresholds, train_cfg.rewards, train_cfg.reward_components)
    trainer = GRPOTrainer(st.policy, st.engine(), st.samples, scorer, train_cfg, out, fabric=fabric, logger=logger,
                          decoder=st.decoder if train_cfg.lambda_ts > 0 else None,
                          windows=st.windows if train_cfg.lambda_ts > 0 else None)
    return trainer, st


def run_grpo(config: str | Path | Mapping[str, Any], run: str | None = None, max_steps: int | None = None,
             out_root: str | Path = "checkpoints/grpo", resume: bool = False, sft_dir: str | Path | None = None,
             overrides: Mapping[str, Any] | None = None, use_wandb: bool = True,
             overwrite: bool = False) -> dict[str, Any]:
    """Train u-GRPO as configured; returns the summary (also written to ``summary.json``). ``resume``:
    continue from the run dir's last complete ``last.ckpt``; ``overwrite``: delete the run dir first; with
    neither, a run dir that holds a checkpoint is refused (``stockr1.resume.start_or_resume``)."""
    cfg = load_config(config, overrides)
    run = run or cfg.get("run", "grpo")
    out = Path(out_root) / run
    sft = sft_dir_of(cfg, sft_dir)
    # before the launch: every rank decides the same, and no rank writes before all have (launch is a rendezvous)
    start_or_resume(out, last_checkpoint(out / "last.ckpt"), resume, overwrite, "stockr1 grpo")
    fabric = make_fabric(train_config(cfg, max_steps))  # before any work: under DDP every rank runs what follows
    wb = dict(cfg.get("wandb", {}))
    logger = RunLogger(out, project=wb.get("project", "stockr1-grpo"), group=wb.get("group", run), name=run,
                       config=cfg, use_wandb=use_wandb) if fabric.is_global_zero else None
    trainer, st = build_trainer(cfg, sft, out, fabric, logger, max_steps)
    train_cfg, policy, decoder, windows = st.train_cfg, st.policy, st.decoder, st.windows
    history = trainer.fit(resume=resume)
    if logger is not None:
        logger.finish()
    summary: dict[str, Any] = {"run": run, "out_dir": str(out), "steps": trainer.step, "sft_dir": str(sft) if sft else None,
                               "world_size": fabric.world_size, "rank": fabric.global_rank,
                               "n_train_queries": len(st.samples), "warnings": logger.warnings if logger else [],
                               "final": {k: v for k, v in (history[-1] if history else {}).items()
                                         if not (isinstance(v, float) and math.isnan(v))}}
    if trainer.fabric.is_global_zero:
        policy.save(out / "policy")
        src = sft / "decoder" if sft is not None else None
        if train_cfg.lambda_ts == 0 and src is not None and src.exists():
            shutil.copytree(src, out / "decoder", dirs_exist_ok=True)  # the frozen tool: the SFT files, byte for byte
        else:  # RL trained the decoder (or built it): U normaliser refit for its final weights, on train
            if train_cfg.lambda_ts > 0:
                decoder.fit_uncertainty(train_only(windows))
            save_decoder(decoder, out / "decoder")
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary


def probe_run(config: str | Path | Mapping[str, Any], run_dir: str | Path | None, sft_dir: str | Path | None,
              group_size: int, seed: int, overrides: Mapping[str, Any] | None = None,
              max_batch_rows: int | None = 16) -> dict[str, Any]:
    """``rl.probe.probe_rewards`` of the policy in ``run_dir`` (None: the start policy, that of ``sft_dir`` or,
    without one, the config's) on the training queries the GRPO config draws, with the run's rollout settings."""
    cfg = load_config(config, overrides)
    st = build_setup(cfg, None if sft_dir is None else Path(sft_dir))
    policy, decoder = st.policy, st.decoder
    if run_dir is not None:
        policy = Policy.load(Path(run_dir) / "policy")
        decoder = load_decoder(Path(run_dir) / "decoder")
    engine = st.engine(policy.eval(), decoder, max_batch_rows=max_batch_rows)
    with precision_autocast(st.train_cfg.precision, policy.device):  # sampled as the run samples
        return probe_rewards(engine, st.samples, st.thresholds, group_size, seed, st.train_cfg.rewards)


def answer_contexts_run(config: str | Path | Mapping[str, Any], sft_dir: str | Path | None, group_size: int,
                        seed: int, overrides: Mapping[str, Any] | None = None,
                        max_batch_rows: int | None = 16) -> list[dict[str, Any]]:
    """``rl.probe.answer_contexts`` of the start policy on the training queries the GRPO config draws."""
    st = build_setup(load_config(config, overrides), None if sft_dir is None else Path(sft_dir))
    engine = st.engine(st.policy.eval(), st.decoder, max_batch_rows=max_batch_rows)
    with precision_autocast(st.train_cfg.precision, st.policy.device):
        return answer_contexts(engine, st.samples, group_size, seed)


def answer_logodds_run(config: str | Path | Mapping[str, Any], run_dir: str | Path | None,
                       sft_dir: str | Path | None, contexts: list[dict[str, Any]],
                       overrides: Mapping[str, Any] | None = None) -> list[float]:
    """``rl.probe.answer_logodds`` of the policy in ``run_dir`` (None: the start) on fixed ``contexts``."""
    st = build_setup(load_config(config, overrides), None if sft_dir is None else Path(sft_dir))
    policy = st.policy if run_dir is None else Policy.load(Path(run_dir) / "policy")
    with precision_autocast(st.train_cfg.precision, policy.device):
        return answer_logodds(policy.eval(), st.samples, contexts)
