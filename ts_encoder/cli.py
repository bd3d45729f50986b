"""``stockr1 ts fit|validate|test|predict --config configs/ts_encoder/tiny.yaml`` (Lightning CLI).

W&B is offline unless the user set ``WANDB_MODE`` (tests set it to ``disabled``). Logger (WandbLogger)
and callbacks (ModelCheckpoint: best on ``val/loss`` + last) are set in each config file
(configs/ts_encoder/*.yaml), not hidden here; two are always added (``ts_encoder.resume``): ``ExactResume``
and the atomic checkpoint writer ``AtomicCheckpointIO``.

Resume, as every training command (README, "Resume"): ``fit --resume`` continues from the last complete
``last.ckpt`` in the config's ModelCheckpoint dirpath (a fresh start when there is none), bit-identical to
the uninterrupted fit on CPU, mid-epoch included; ``--ckpt_path last`` means the same file (Lightning's own
lookup would take the newest file with "last" in its name, a torn staging file included).

Two silent wrong states are refused here, before any work:
- ``fit`` into a checkpoint directory that already holds checkpoints (Lightning would write
  ``best-v1.ckpt`` beside a stale ``best.ckpt`` that every doc points to): resume with ``--ckpt_path``,
  or pass ``--overwrite true`` to delete the old checkpoints and their export first;
- ``validate|test|predict --ckpt_path X`` where X was trained with another architecture than the
  config's (Lightning would load it only if the shapes happened to fit): the mismatching keys are named,
  before the Trainer is built.

Bad arguments or config keys raise ValueError (``stockr1`` prints one line, exit 2) instead of
jsonargparse's 70-line usage; ``--help`` is unchanged.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from jsonargparse import ArgumentError
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from stockr1.progress import silence_known_noise
from stockr1.resume import last_checkpoint
from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.datamodule import WindowDataModule
from ts_encoder.module import TSForecastModule
from ts_encoder.resume import AtomicCheckpointIO, ExactResume

SUBCOMMANDS = ("fit", "validate", "test", "predict")


def _differences(saved: Any, wanted: Any, path: str = "") -> list[str]:
    """Key paths where two nested plain dicts disagree, as ``path: saved != wanted``."""
    if isinstance(saved, dict) and isinstance(wanted, dict):
        out: list[str] = []
        for key in sorted(set(saved) | set(wanted)):
            out += _differences(saved.get(key), wanted.get(key), f"{path}.{key}" if path else str(key))
        return out
    return [] if saved == wanted else [f"{path}: checkpoint {saved!r} != config {wanted!r}"]


class TSCLI(LightningCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument("--resume", type=bool, nargs="?", const=True, default=False,
                            help="fit: continue from the last complete last.ckpt in the ModelCheckpoint dirpath")
        parser.add_argument("--overwrite", type=bool, nargs="?", const=True, default=False,
                            help="fit: delete the checkpoints already in the ModelCheckpoint dirpaths and start over")

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        super().parse_arguments(parser, args)
        # Lightning then replaces the model section by the checkpoint's hyperparameters
        # (LightningCLI._parse_ckpt_path), so the config as written is kept for the check below.
        sub = self.config.get("subcommand")
        model = self.config[sub].get("model") if sub else None
        self._configured_model = model.as_dict() if hasattr(model, "as_dict") else dict(model or {})
        if sub in ("validate", "test", "predict"):
            self._check_architecture(sub)  # here, before the Trainer's start-up lines, so the error stands alone

    def after_instantiate_classes(self) -> None:
        # W&B looks for a git repository from its save_dir and warns when that directory does not exist yet.
        for lg in self.trainer.loggers:
            if lg.save_dir:
                Path(lg.save_dir).mkdir(parents=True, exist_ok=True)

    def after_fit(self) -> None:
        if self.trainer.is_global_zero:
            dirs = sorted({str(cb.dirpath) for cb in self.trainer.callbacks
                           if isinstance(cb, ModelCheckpoint) and cb.dirpath is not None})
            logs = sorted({str(Path(lg.log_dir).resolve()) for lg in self.trainer.loggers if getattr(lg, "log_dir", None)})
            print(f"wrote checkpoints to {', '.join(dirs) or '-'}; logs to {', '.join(logs) or '-'}", flush=True)

    def before_fit(self) -> None:
        cfg = self.config["fit"]
        dirs = sorted({Path(cb.dirpath) for cb in self.trainer.callbacks
                       if isinstance(cb, ModelCheckpoint) and cb.dirpath is not None})
        if cfg.get("resume") and cfg.get("overwrite"):
            raise ValueError("--resume continues the run in the checkpoint dirpath, --overwrite deletes it; pass one")
        if cfg.get("resume") or cfg.get("ckpt_path") == "last":
            if cfg.get("ckpt_path") not in (None, "last"):
                raise ValueError(f"--resume takes the last checkpoint in {', '.join(map(str, dirs))}; drop --ckpt_path")
            found = [p for d in dirs if (p := last_checkpoint(d / "last.ckpt")) is not None]
            self.config_init["fit"]["ckpt_path"] = str(found[0]) if found else None
            print(f"resuming from {found[0]}" if found else f"nothing to resume in {', '.join(map(str, dirs))}: "
                  "fresh start", flush=True)
            if found:
                return
        elif cfg.get("ckpt_path") is not None:
            return  # resuming from a given file: the directory is supposed to hold the run
        stale = [p for d in dirs for p in sorted(d.glob("*.ckpt"))] if dirs else []
        if not stale:
            return
        if not cfg.get("overwrite"):
            names = ", ".join(str(p) for p in stale[:3]) + (" …" if len(stale) > 3 else "")
            raise ValueError(f"{names} already exist: continue that run with --resume, start over with --overwrite, "
                             "or set another dirpath in the config's ModelCheckpoint callbacks")
        for p in stale:
            p.unlink()
        for d in dirs:
            shutil.rmtree(d / "pretrained", ignore_errors=True)

    def _check_architecture(self, sub: str) -> None:
        ckpt = self.config[sub].get("ckpt_path")
        if ckpt is None or ckpt in ("best", "last", "hpc"):
            return  # Lightning resolves these names from this config's own callbacks
        if not Path(ckpt).is_file():
            raise ValueError(f"--ckpt_path {ckpt}: no such checkpoint file")
        saved = dict(torch.load(ckpt, map_location="cpu", weights_only=False, mmap=True).get("hyper_parameters", {}))
        wanted = dict(self._configured_model)
        for side in (saved, wanted):  # fields added since a checkpoint was written count at their defaults
            if isinstance(side.get("encoder"), dict):
                side["encoder"] = TSEncoderConfig.from_any(side["encoder"]).to_dict()
            if isinstance(side.get("loss_weights"), dict):
                side["loss_weights"] = LossWeights.from_any(side["loss_weights"]).to_dict()
        diffs = [d for key in ("encoder", "loss_weights") for d in _differences(saved.get(key), wanted.get(key), key)]
        if diffs:
            raise ValueError(f"--ckpt_path {ckpt} does not match the config's model ({'; '.join(diffs[:4])}"
                             f"{' …' if len(diffs) > 4 else ''}): pass the config it was trained with")


def _one_line(message: str) -> str:
    """jsonargparse's multi-line type errors as one line: the key, the reason and the given value."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    return "; ".join(lines if len(lines) <= 3 else [*lines[:2], lines[-1]]).replace(":;", ":")


def main(argv: list[str] | None = None) -> int:
    """Bad arguments or config keys raise ValueError (one line from ``stockr1``); ``--help`` is Lightning's."""
    os.environ.setdefault("WANDB_MODE", "offline")
    silence_known_noise()
    args = sys.argv[1:] if argv is None else list(argv)
    # LightningCLI reads the command line itself (passing args= while sys.argv holds ours makes it warn);
    # ours is `stockr1 ts <args>`, so it gets exactly that, restored afterwards.
    saved_argv, sys.argv = sys.argv, ["stockr1 ts", *args]
    no_exit = {"exit_on_error": False}  # errors raise, so the caller prints one line instead of the usage
    try:
        TSCLI(TSForecastModule, WindowDataModule, save_config_kwargs={"overwrite": True}, seed_everything_default=0,
              parser_kwargs={**no_exit, **{sub: dict(no_exit) for sub in SUBCOMMANDS}},
              trainer_defaults={"callbacks": [ExactResume()],
                                "plugins": [{"class_path": f"{AtomicCheckpointIO.__module__}.AtomicCheckpointIO"}]})
    except ArgumentError as e:
        sub = next((a for a in args if a in SUBCOMMANDS), "")
        raise ValueError(f"{_one_line(str(e))} (options: stockr1 ts {sub} --help)".replace("  ", " ")) from e
    finally:
        sys.argv = saved_argv
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
