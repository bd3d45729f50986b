"""``stockr1 ts fit|validate|test|predict --config configs/ts_encoder/tiny.yaml`` (Lightning CLI).

W&B is offline unless the user set ``WANDB_MODE`` (tests set it to ``disabled``). Resume an
interrupted run with ``--ckpt_path last``. Logger (WandbLogger) and callbacks (ModelCheckpoint: best on
``val/loss`` + last) are set in each config file (configs/ts_encoder/*.yaml), not hidden here.
"""

from __future__ import annotations

import os
import sys

from lightning.pytorch.cli import LightningCLI

from ts_encoder.datamodule import WindowDataModule
from ts_encoder.module import TSForecastModule


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("WANDB_MODE", "offline")
    LightningCLI(
        TSForecastModule,
        WindowDataModule,
        args=sys.argv[1:] if argv is None else argv,
        save_config_kwargs={"overwrite": True},
        seed_everything_default=0,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
