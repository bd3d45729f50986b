"""`stockr1 curriculum`: Trading-R1's three-stage easy-to-hard curriculum (Table 1, §3.3).

Stages structure -> claims -> decision; each is an SFT warm start on format-teacher theses
(``prompt.template_thesis`` at that stage) followed by RFT (GRPO) with that stage's reward heads,
and each stage starts from the previous stage's checkpoint. The config (YAML) is the sequence; this
module is the runner. Training itself is delegated to a ``Backend``
(``backend.SharedStackBackend``: text SFT + the shared ``rl.trainer.GRPOTrainer``), so the
curriculum logic is testable without a model. A finished stage writes
``<out>/<stage>/DONE`` with its checkpoint path (atomically, last); ``--resume`` skips the finished stages
and continues the one that was running from its SFT's ``state.pt`` or its RFT's ``last.ckpt``, so the
curriculum ends with the weights of an uninterrupted run, bit for bit on CPU, whatever stage boundary or
checkpoint the kill fell at (``tests/test_trading_r1_backend.py``).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from rl.methods.trading_r1.labels import labels_for_windows
from rl.methods.trading_r1.prompt import PromptConfig, build_prompt, snapshot_blocks, template_thesis
from rl.methods.trading_r1.stages import StageConfig, stage_reward
from stockr1.config import YamlConfig, config_from_dict, parse_config_args, print_config
from stockr1.outdir import atomic_write
from stockr1.resume import last_checkpoint, start_or_resume

STAGE_TARGET = {"structure": 1, "claims": 2, "decision": 3}


@dataclass(frozen=True)
class CurriculumConfig(YamlConfig):
    """configs/methods/trading_r1/*.yaml: ``CurriculumConfig.from_yaml(path)``, strict (keys, stages, each
    stage's sft / rft, and ``policy_overrides`` through ``PolicyConfig``)."""

    name: str
    policy: str
    out: str
    stages: tuple[StageConfig, ...]
    n_train: int = 64
    policy_overrides: Mapping[str, Any] = field(default_factory=dict)  # PolicyConfig fields for a fresh policy

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CurriculumConfig:
        from llm.policy import PolicyConfig

        d = dict(d or {})
        raw = d.pop("stages", None)
        if not isinstance(raw, list):
            raise ValueError(f"curriculum.stages must list the stages structure, claims, decision, got {raw!r}")
        stages = tuple(StageConfig.from_dict(s, f"curriculum.stages[{i}]") for i, s in enumerate(raw))
        if [s.name for s in stages] != list(STAGE_TARGET):
            raise ValueError(f"Trading-R1 stages must be {', '.join(STAGE_TARGET)} in order")
        cfg = config_from_dict(cls, {**d, "stages": stages}, "curriculum")
        if cfg.n_train < 1:
            raise ValueError(f"curriculum.n_train must be >= 1, got {cfg.n_train}")
        try:
            PolicyConfig.from_dict({"name_or_path": cfg.policy, "soft_tokens": False, **cfg.policy_overrides})
        except ValueError as e:
            raise ValueError(f"curriculum.policy_overrides: {e}") from e
        return cfg


def excess_returns(frames: dict[str, pd.DataFrame], ticker: str, dates: Sequence, horizon: int = 10,
                   benchmark: str | None = None) -> np.ndarray:
    """[N] H-day log return of ``ticker`` after each date minus the benchmark's (NaN past the end)."""
    def fwd(t: str) -> pd.Series:
        c = np.log(frames[t]["close"])
        return c.shift(-horizon) - c

    e = fwd(ticker)
    if benchmark is not None and benchmark != ticker:
        e = e - fwd(benchmark).reindex(e.index)
    return e.reindex(pd.DatetimeIndex(dates)).to_numpy(dtype=float)


def build_examples(store, windows, frames, n: int, benchmark: str | None = None,
                   prompt_cfg: PromptConfig = PromptConfig(), seed: int = 0) -> list[dict[str, Any]]:
    """``n`` train-split examples: prompt, label, excess_return and the three stage targets."""
    labels = labels_for_windows(windows, frames)
    ok = np.flatnonzero((windows.split == "train") & (labels >= 0))
    pick = np.sort(np.random.default_rng(seed).choice(ok, size=min(n, len(ok)), replace=False))
    out = []
    for i in pick:
        tk, t = str(windows.ticker[i]), pd.Timestamp(windows.date[i])
        blocks = snapshot_blocks(store, tk, t, prompt_cfg)
        out.append({
            "ticker": tk, "date": str(t.date()), "label": int(labels[i]),
            "excess_return": float(excess_returns(frames, tk, [t], benchmark=benchmark)[0]),
            "prompt": build_prompt(store, tk, t, prompt_cfg),
            **{f"target_{s}": template_thesis(blocks, int(labels[i]), k) for s, k in STAGE_TARGET.items()},
        })
    return out


class Backend(Protocol):
    """The shared stack's trainers: each returns the path of the checkpoint it wrote."""

    def sft(self, examples: list[dict[str, Any]], target: str, init: str, stage: StageConfig, out: Path) -> str: ...

    def rft(self, examples: list[dict[str, Any]], reward: Callable, init: str, stage: StageConfig, out: Path) -> str: ...


def run_curriculum(cfg: CurriculumConfig, examples: list[dict[str, Any]], backend: Backend) -> list[dict[str, Any]]:
    """SFT -> RFT per stage, chaining checkpoints; finished stages (DONE marker) are skipped."""
    ckpt, log = cfg.policy, []
    for stage in cfg.stages:
        out = Path(cfg.out) / stage.name
        done = out / "DONE"
        if done.exists():
            ckpt = json.loads(done.read_text())["checkpoint"]
            log.append({"stage": stage.name, "skipped": True, "checkpoint": ckpt})
            continue
        out.mkdir(parents=True, exist_ok=True)
        sft_ckpt = backend.sft(examples, f"target_{stage.name}", ckpt, stage, out / "sft")
        reward = stage_reward(stage.rewards)
        targets = reward([e["prompt"] for e in examples], [e[f"target_{stage.name}"] for e in examples],
                         label=[e["label"] for e in examples], excess_return=[e["excess_return"] for e in examples])
        ckpt = backend.rft(examples, reward, sft_ckpt, stage, out / "rft")
        entry = {"stage": stage.name, "sft": sft_ckpt, "checkpoint": ckpt,
                 "target_reward_mean": float(np.mean([t for t in targets if t is not None]))}
        atomic_write(done, lambda p, e=entry: p.write_text(json.dumps(e)))  # the stage's commit marker, written last
        log.append(entry)
    return log


def saved_state(cfg: CurriculumConfig) -> Path | None:
    """The latest resume state in ``cfg.out``: a stage's DONE marker, SFT ``state.pt`` or RFT ``last.ckpt``."""
    found = [p for st in cfg.stages for p in (Path(cfg.out) / st.name / "sft" / "state.pt",
                                              Path(cfg.out) / st.name / "rft" / "last.ckpt",
                                              Path(cfg.out) / st.name / "DONE") if last_checkpoint(p) is not None]
    return found[-1] if found else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 curriculum", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/methods/trading_r1/curriculum.yaml")
    ap.add_argument("--out", default=None, help="override the config's out dir")
    ap.add_argument("--resume", action="store_true", help="continue the curriculum in the out dir (README, Resume)")
    ap.add_argument("--overwrite", action="store_true", help="delete the out dir and start over")
    ap.add_argument("--dry-run", action="store_true", help="build the stage datasets and score the targets only")
    a, over = parse_config_args(ap, argv)
    cfg = CurriculumConfig.from_yaml(a.config, {**over, **({"out": a.out} if a.out else {})})
    if a.print_config:
        print_config(cfg)
        return 0
    if not a.dry_run:
        start_or_resume(cfg.out, saved_state(cfg), a.resume, a.overwrite, "stockr1 curriculum")
    from rl.methods.trading_r1.labels import sample_label_windows
    from stockr1.data import load_source
    from stockr1.data.context import sample_store

    frames = load_source("sample")
    examples = build_examples(sample_store(frames), sample_label_windows(), frames, cfg.n_train, benchmark="SP500")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "examples.jsonl").write_text("\n".join(json.dumps(e) for e in examples))
    if a.dry_run:
        for stage in cfg.stages:
            r = stage_reward(stage.rewards)([e["prompt"] for e in examples], [e[f"target_{stage.name}"] for e in examples],
                                            label=[e["label"] for e in examples],
                                            excess_return=[e["excess_return"] for e in examples])
            print(f"{stage.name}: {len(examples)} examples, mean reward of SFT targets {np.nanmean(np.array(r, float)):.3f}")
        return 0
    from rl.methods.trading_r1.backend import SharedStackBackend

    torch_threads = int(os.environ.get("STOCKR1_THREADS", "2"))
    import torch

    torch.set_num_threads(torch_threads)
    backend = SharedStackBackend(cfg.policy_overrides)
    log = run_curriculum(cfg, examples, backend)
    (out / "curriculum_log.json").write_text(json.dumps({"stages": log, "training": backend.history}, indent=1))
    print(json.dumps(log, indent=1))
    return 0
