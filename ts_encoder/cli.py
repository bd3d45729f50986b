"""``stockr1 ts fit|validate|test|predict --config configs/ts_encoder/tiny.yaml`` (Lightning CLI).

W&B is offline unless the user set ``WANDB_MODE`` (tests set it to ``disabled``). Resume an
interrupted run with ``--ckpt_path last``. Logger (WandbLogger) and callbacks (ModelCheckpoint: best on
``val/loss`` + last) are set in each config file (configs/ts_encoder/*.yaml), not hidden here.

Two silent wrong states are refused here, before any work:
- ``fit`` into a checkpoint directory that already holds checkpoints (Lightning would write
  ``best-v1.ckpt`` beside a stale ``best.ckpt`` that every doc points to): resume with ``--ckpt_path``,
  or pass ``--overwrite true`` to delete the old checkpoints and their export first;
- ``validate|test|predict --ckpt_path X`` where X was trained with another architecture than the
  config's (Lightning would load it only if the shapes happened to fit): the mismatching keys are named.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from ts_encoder.datamodule import WindowDataModule
from ts_encoder.module import TSForecastModule


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
        parser.add_argument("--overwrite", type=bool, default=False,
                            help="fit: delete the checkpoints already in the ModelCheckpoint dirpaths and start over")

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        super().parse_arguments(parser, args)
        # Lightning then replaces the model section by the checkpoint's hyperparameters
        # (LightningCLI._parse_ckpt_path), so the config as written is kept for the check below.
        sub = self.config.get("subcommand")
        model = self.config[sub].get("model") if sub else None
        self._configured_model = model.as_dict() if hasattr(model, "as_dict") else dict(model or {})

    def _ckpt_path(self) -> str | None:
        return self.config[self.subcommand].get("ckpt_path")

    def before_fit(self) -> None:
        if self._ckpt_path() is not None:
            return  # resuming: the directory is supposed to hold the run
        dirs = sorted({Path(cb.dirpath) for cb in self.trainer.callbacks
                       if isinstance(cb, ModelCheckpoint) and cb.dirpath is not None})
        stale = [p for d in dirs for p in sorted(d.glob("*.ckpt"))] if dirs else []
        if not stale:
            return
        if not self.config[self.subcommand].get("overwrite"):
            names = ", ".join(str(p) for p in stale[:3]) + (" …" if len(stale) > 3 else "")
            raise ValueError(f"{names} already exist: resume with --ckpt_path {dirs[0] / 'last.ckpt'}, start over with "
                             "--overwrite true, or set another dirpath in the config's ModelCheckpoint callbacks")
        for p in stale:
            p.unlink()
        for d in dirs:
            shutil.rmtree(d / "pretrained", ignore_errors=True)

    def _check_architecture(self) -> None:
        ckpt = self._ckpt_path()
        if ckpt is None or ckpt in ("best", "last", "hpc"):
            return  # Lightning resolves these names from this config's own callbacks
        if not Path(ckpt).is_file():
            raise ValueError(f"--ckpt_path {ckpt}: no such checkpoint file")
        saved = torch.load(ckpt, map_location="cpu", weights_only=False).get("hyper_parameters", {})
        wanted = self._configured_model
        diffs = [d for key in ("encoder", "loss_weights") for d in _differences(saved.get(key), wanted.get(key), key)]
        if diffs:
            raise ValueError(f"--ckpt_path {ckpt} does not match the config's model ({'; '.join(diffs[:4])}"
                             f"{' …' if len(diffs) > 4 else ''}): pass the config it was trained with")

    before_validate = before_test = before_predict = _check_architecture


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("WANDB_MODE", "offline")
    TSCLI(
        TSForecastModule,
        WindowDataModule,
        args=sys.argv[1:] if argv is None else argv,
        save_config_kwargs={"overwrite": True},
        seed_everything_default=0,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
