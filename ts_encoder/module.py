"""``TSForecastModule``: Lightning pre-training of the TS encoder on L_TS (Stock-R1 §3.2, App. C.2).

Everything needed to rebuild the model lives in the checkpoint: the architecture and loss weights
as plain-dict hyper-parameters, and as buffers in the state dict the input standardisation
(``model.x_loc / x_scale``, fitted on the training split in ``setup``) and the uncertainty
normaliser (refitted on training-split windows at the start of every validation epoch, so each
saved checkpoint carries the normaliser of its own weights). ``load_from_checkpoint(path)`` needs
no other argument.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from stockr1.types import Forecast, TrainWindows, Windows, require_train
from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.loss import ts_loss
from ts_encoder.model import TSEncoder, TSOutput
from ts_encoder.sampling import forecast_windows, to_forecast
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

_Z95 = 1.6448536269514722


def _channels_of(batch: dict[str, Tensor]) -> dict[str, Tensor]:
    """{"channels": [B, 5]} when the batch carries the observed-channel mask, else {} (older callers)."""
    return {"channels": batch["channels"]} if "channels" in batch else {}


class TSForecastModule(L.LightningModule):
    def __init__(
        self,
        encoder: TSEncoderConfig | None = None,
        loss_weights: LossWeights | None = None,
        lr: float = 1e-4,
        weight_decay: float = 0.01,
        warmup_steps: int = 1000,
        min_lr_ratio: float = 0.0,
        normalizer_fit_windows: int = 4096,
        val_samples: int = 100,
        fan_chart_windows: int = 4,
    ) -> None:
        """encoder / loss_weights also accept plain dicts (that is how the checkpoint stores them)."""
        super().__init__()
        cfg = TSEncoderConfig.from_any(encoder)
        weights = LossWeights.from_any(loss_weights)
        self.save_hyperparameters({
            "encoder": cfg.to_dict(), "loss_weights": weights.to_dict(), "lr": lr, "weight_decay": weight_decay,
            "warmup_steps": warmup_steps, "min_lr_ratio": min_lr_ratio,
            "normalizer_fit_windows": normalizer_fit_windows, "val_samples": val_samples,
            "fan_chart_windows": fan_chart_windows,
        })
        self.cfg, self.weights = cfg, weights
        self.model = TSEncoder(cfg)
        self.normalizer = UncertaintyNormalizer()
        self._val_outputs: list[dict[str, Tensor]] = []

    def forward(self, x: Tensor, cond: Tensor | None = None, channels: Tensor | None = None) -> TSOutput:
        return self.model(x, cond, channels)

    # ---------------------------------------------------------------- training
    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if stage == "fit" and dm is not None and hasattr(dm, "input_stats"):
            self.model.set_input_stats(*dm.input_stats())

    def _step(self, batch: dict[str, Tensor], split: str) -> tuple[Tensor, TSOutput]:
        out = self.model(batch["x"], channels=batch.get("channels"))
        loss, parts = ts_loss(out, batch["y"], self.weights)
        bs = batch["x"].shape[0]
        on_step = split == "train"
        self.log(f"{split}/loss", loss, prog_bar=True, on_step=on_step, on_epoch=True, batch_size=bs, sync_dist=not on_step)
        for name, value in parts.items():
            self.log(f"{split}/{name}", value, on_step=False, on_epoch=True, batch_size=bs, sync_dist=not on_step)
        return loss, out

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self._step(batch, "train")[0]

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        _, out = self._step(batch, "val")
        self._log_diagnostics(out, batch["y"], "val")
        self._val_outputs.append({"mu": out.mu, "sigma": out.sigma, "q_high": out.q_high,
                                  "q_low": out.q_low, "idx": batch["idx"], **_channels_of(batch)})

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        _, out = self._step(batch, "test")
        self._log_diagnostics(out, batch["y"], "test")

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        out = self.model(batch["x"], channels=batch.get("channels"))
        return {"mu": out.mu, "sigma": out.sigma, "q_high": out.q_high, "q_low": out.q_low,
                "uncertainty": self._normalised_uncertainty(out), "idx": batch["idx"], **_channels_of(batch)}

    def _log_diagnostics(self, out: TSOutput, y: Tensor, split: str) -> None:
        """Daily-return calibration, computed in return space (the price-space metrics are
        stockr1.metrics.forecast's): coverage of μ ± 1.645σ for the close, of q_high / q_low, and
        close-return RMSE of the mean vs the random walk (zero). The high / low coverages are over the
        rows that observe those channels (weighted by their count; not logged for a batch with none)."""
        r_c = y[:, 3]
        mu_c, sd_c = out.mu[:, 1], out.sigma[:, 1]
        b = y.shape[0]
        obs = out.channels if out.channels is not None else torch.ones(b, 5, dtype=torch.bool, device=y.device)
        diag = {  # name -> (value, rows it is over)
            "diag_cov90_close_ret": (((r_c - mu_c).abs() <= _Z95 * sd_c).float().mean(), b),
            "diag_cov_high95_ret": ((y[:, 1] <= out.q_high).float()[obs[:, 1]].mean(), int(obs[:, 1].sum())),
            "diag_cov_low05_ret": ((y[:, 2] <= out.q_low).float()[obs[:, 2]].mean(), int(obs[:, 2].sum())),
            "diag_mse_close_ret": ((r_c - mu_c).pow(2).mean(), b),
            "diag_mse_close_ret_rw": (r_c.pow(2).mean(), b),
        }
        for name, (value, n) in diag.items():
            if n:
                self.log(f"{split}/{name}", value, on_epoch=True, batch_size=n, sync_dist=True)

    # ------------------------------------------------------- validation epoch
    def on_validation_epoch_start(self) -> None:
        self._val_outputs = []
        dm = getattr(self.trainer, "datamodule", None)
        if self.trainer.state.fn == "fit" and dm is not None and getattr(dm, "windows", None):
            self.fit_normalizer(dm.windows["train"])

    @torch.no_grad()
    def fit_normalizer(self, train: TrainWindows) -> None:
        """Fit the uncertainty normaliser on (evenly spaced) training-split windows; TypeError unless
        ``train`` is ``train_only(windows)`` (the datamodule's ``windows["train"]`` is one)."""
        train = require_train(train, "fit_normalizer")
        n = len(train)
        idx = np.unique(np.linspace(0, n - 1, min(n, self.hparams.normalizer_fit_windows)).round().astype(int))
        was_training = self.training
        self.eval()
        u = [raw_uncertainty(self.model(torch.as_tensor(train.x[chunk], device=self.device),
                                        channels=torch.as_tensor(train.channels[chunk], device=self.device)),
                             self.model.cfg.u_channels)
             for chunk in np.array_split(idx, max(1, len(idx) // 1024))]
        self.normalizer.fit(torch.cat(u))
        self.train(was_training)

    def on_validation_epoch_end(self) -> None:
        dm = getattr(self.trainer, "datamodule", None)
        if not self._val_outputs or dm is None or not getattr(dm, "windows", None):
            return
        cat = {k: torch.cat([o[k] for o in self._val_outputs]) for k in self._val_outputs[0]}
        self._val_outputs = []
        windows = dm.windows["val"].select(cat["idx"].cpu().numpy())
        forecast = self._forecast_from(cat, windows, self.hparams.val_samples, seed=0)
        try:  # written by the METRICS engineer; optional so the encoder trains without it
            from stockr1.metrics.forecast import forecast_metrics
        except ImportError:
            forecast_metrics = None
        if forecast_metrics is not None:
            metrics = {f"val/{k}": float(v) for k, v in forecast_metrics(forecast, windows).items()
                       if np.isfinite(v)}
            self.log_dict(metrics, sync_dist=True)
        if self.hparams.fan_chart_windows > 0 and not self.trainer.sanity_checking:
            from ts_encoder.plots import log_fan_chart

            log_fan_chart(self.trainer, forecast, windows, self.hparams.fan_chart_windows, self.current_epoch)

    def _forecast_from(self, cat: dict[str, Tensor], windows: Windows, n_samples: int, seed: int) -> Forecast:
        out = TSOutput(mu=cat["mu"], sigma=cat["sigma"], q_high=cat["q_high"], q_low=cat["q_low"],
                       hidden=cat["mu"].new_zeros(0), h_ts=cat["mu"].new_zeros(0), state=cat["mu"].new_zeros(0),
                       channels=cat.get("channels"))
        gen = torch.Generator().manual_seed(seed)
        return to_forecast(out, windows.hist[:, -1, :], n_samples, self._fitted_normalizer(), gen,
                           self.model.cfg.u_channels)

    def _fitted_normalizer(self) -> UncertaintyNormalizer | None:
        return self.normalizer if bool(self.normalizer.fitted) else None

    def _normalised_uncertainty(self, out: TSOutput) -> Tensor:
        u = raw_uncertainty(out, self.model.cfg.u_channels)
        return self.normalizer(u) if bool(self.normalizer.fitted) else torch.full_like(u, float("nan"))

    # ------------------------------------------------------------ inference
    @torch.no_grad()
    def forecast(self, windows: Windows, n_samples: int = 100, cond: Tensor | None = None,
                 batch_size: int = 1024, seed: int | None = 0) -> Forecast:
        """Price-space forecast of every window (eval mode, no dropout); ``seed`` fixes the sample
        paths (None: torch's global RNG). cond: optional [N, cond_dim] FiLM conditioning."""
        return forecast_windows(self.model, windows, n_samples, self._fitted_normalizer(), cond, batch_size, seed)

    # ----------------------------------------------------------- optimiser
    def configure_optimizers(self) -> dict[str, Any]:
        """AdamW; weight decay on matrices only (nanoGPT), linear warmup then cosine to min_lr_ratio."""
        hp = self.hparams
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=hp.lr)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = min(hp.warmup_steps, total // 2)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return hp.min_lr_ratio + (1 - hp.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
