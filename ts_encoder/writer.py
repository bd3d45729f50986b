"""``stockr1 ts predict``: write the price-space forecasts of the predict split to ``forecast.npz``.

    stockr1 ts predict --config configs/ts_encoder/tiny.yaml --ckpt_path checkpoints/ts_encoder/tiny/best.ckpt \
        --trainer.callbacks+=ts_encoder.writer.ForecastWriter --trainer.callbacks.output_dir out/

The file holds the ``stockr1.types.Forecast`` arrays plus ``ticker`` and ``date`` of each window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from ts_encoder.model import TSOutput
from ts_encoder.sampling import to_forecast


class ForecastWriter(BasePredictionWriter):
    def __init__(self, output_dir: str = "runs/ts_encoder/predict", n_samples: int = 100, seed: int = 0) -> None:
        super().__init__(write_interval="epoch")
        self.output_dir, self.n_samples, self.seed = Path(output_dir), n_samples, seed

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        if not predictions:
            return
        keys = ("mu", "sigma", "q_high", "q_low", "idx") + (("channels",) if "channels" in predictions[0] else ())
        cat = {k: torch.cat([p[k] for p in predictions]) for k in keys}
        dm = trainer.datamodule
        windows = dm.windows[dm.hparams.predict_split].select(cat["idx"].cpu().numpy())
        empty = cat["mu"].new_zeros(0)
        out = TSOutput(mu=cat["mu"], sigma=cat["sigma"], q_high=cat["q_high"], q_low=cat["q_low"],
                       hidden=empty, h_ts=empty, state=empty, channels=cat.get("channels"))
        normalizer = pl_module.normalizer if bool(pl_module.normalizer.fitted) else None
        f = to_forecast(out, windows.hist[:, -1, :], self.n_samples, normalizer,
                        torch.Generator().manual_seed(self.seed), pl_module.model.cfg.u_channels)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        name = "forecast.npz" if trainer.world_size == 1 else f"forecast-rank{trainer.global_rank}.npz"
        np.savez_compressed(self.output_dir / name, close=f.close, close_samples=f.close_samples, high=f.high,
                            low=f.low, volume=f.volume, uncertainty=f.uncertainty,
                            ticker=windows.ticker.astype(str), date=windows.date.astype("datetime64[ns]"))
