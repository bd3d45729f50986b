"""``EncoderEnsemble``: K trained TS encoders as one forecaster (the mixture of their predictive
distributions) plus an optional spread calibration fitted on the validation split.

Why: seeds of the tiny encoder disagree on the spread of the close more than on its mean, and the
average of their distributions is a better forecast than any one of them (a mixture's CRPS is at
most the members' mean CRPS). The calibration (``ts_encoder.calibration``) corrects what all members
get wrong together - the fat tails of index returns - and is fitted once, on validation windows,
then saved with the members: it is never refitted on the data it is scored on.

Saved form (``save_pretrained``; ``stockr1.artifact``: safetensors + JSON, SHA-256 checked):
    config.json         format ``stockr1.ts_ensemble``, the members' encoder configs and sources,
                        the calibration's kind and what it was fitted on
    model.safetensors   ``member{k}.model.*`` (TSEncoder, incl. input stats), ``member{k}.normalizer.*``
                        (uncertainty normaliser) and ``calibration.*`` (levels, knots, fitted flag)
``bench forecast --checkpoint DIR``, ``bench forecast_search``, ``bench backtest`` and ``stockr1 forecast``
read it (``forecast_action.forecaster.Forecaster.load`` recognises the format).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stockr1.artifact import CONFIG_FILE, load_strict, load_weights, read_config, save_artifact
from stockr1.types import CLOSE, Forecast, Windows
from ts_encoder.calibration import SpreadCalibration
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import TSEncoder, TSOutput
from ts_encoder.sampling import mixture_forecast
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

FILE_FORMAT = "stockr1.ts_ensemble"
FORMAT_VERSION = 1
_C = 1  # row of the close in mu / sigma


def is_ensemble(path: str | Path) -> bool:
    """Is ``path`` a directory holding a saved ``EncoderEnsemble``?"""
    cfg = Path(path) / CONFIG_FILE
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text()).get("format") == FILE_FORMAT
    except (OSError, json.JSONDecodeError):
        return False


class EncoderEnsemble:
    """Members (TSEncoder + its uncertainty normaliser) and one ``SpreadCalibration``."""

    def __init__(self, members: Sequence[TSEncoder], normalizers: Sequence[UncertaintyNormalizer] | None = None,
                 calibration: SpreadCalibration | None = None, sources: Sequence[str] | None = None,
                 calibration_info: dict[str, Any] | None = None) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        first = members[0].cfg
        bad = [f"member {i}: {k} {getattr(m.cfg, k)} vs {getattr(first, k)}" for i, m in enumerate(members)
               for k in ("lookback", "horizon", "n_vars") if getattr(m.cfg, k) != getattr(first, k)]
        if bad:
            raise ValueError(f"ensemble members disagree: {'; '.join(bad)}")
        self.members = [m.eval() for m in members]
        self.normalizers = list(normalizers) if normalizers is not None else [UncertaintyNormalizer() for _ in members]
        if len(self.normalizers) != len(self.members):
            raise ValueError(f"{len(self.normalizers)} normalizers for {len(self.members)} members")
        self.calibration = calibration if calibration is not None else SpreadCalibration(first.horizon)
        self.sources = list(sources) if sources is not None else [""] * len(members)
        self.calibration_info = dict(calibration_info or {"kind": "none"})

    @property
    def cfg(self) -> TSEncoderConfig:
        return self.members[0].cfg

    # -------------------------------------------------------------- inference
    @torch.no_grad()
    def outputs(self, windows: Windows, batch_size: int = 1024) -> list[TSOutput]:
        """Each member's (mu, sigma, q_high, q_low) for every window; members are causal, so a window's
        output depends on its own past only (x = days <= t)."""
        return self.outputs_x(windows.x, batch_size, windows.channels)

    @torch.no_grad()
    def outputs_x(self, x: np.ndarray | torch.Tensor, batch_size: int = 1024,
                  channels: np.ndarray | None = None) -> list[TSOutput]:
        """x [N, 5, L] (the log-return inputs of N windows), channels [N, 5] bool observed (None: all)
        -> each member's outputs (no hidden states)."""
        cfg = self.cfg
        if tuple(x.shape[1:]) != (cfg.n_vars, cfg.lookback):
            raise ValueError(f"windows.x is {tuple(x.shape[1:])}, this ensemble expects ({cfg.n_vars}, {cfg.lookback})")
        outs = []
        for model in self.members:
            dev = next(model.parameters()).device
            parts = []
            for start in range(0, len(x), batch_size):
                ch = None if channels is None else torch.as_tensor(channels[start:start + batch_size], device=dev)
                o = model(torch.as_tensor(x[start:start + batch_size], dtype=torch.float32, device=dev), None, ch)
                parts.append({"mu": o.mu.cpu(), "sigma": o.sigma.cpu(), "q_high": o.q_high.cpu(), "q_low": o.q_low.cpu()})
            cat = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
            empty = cat["mu"].new_zeros(0)
            outs.append(TSOutput(**cat, hidden=empty, h_ts=empty, state=empty,
                                 channels=None if channels is None else torch.as_tensor(channels)))
        return outs

    def forecast_x(self, x: np.ndarray | torch.Tensor, last_ohlcv: np.ndarray, n_samples: int,
                   generator: torch.Generator | None, channels: np.ndarray | None = None) -> tuple[Forecast, np.ndarray]:
        """x [N, 5, L], last_ohlcv [N, 5], channels [N, 5] (None: all observed) -> (the calibrated
        mixture's forecast, the members' mean raw uncertainty U [N]): what ``Forecaster.predict`` needs."""
        outs = self.outputs_x(x, channels=channels)
        u_raw = np.mean([raw_uncertainty(o, self.cfg.u_channels).double().numpy() for o in outs], 0)
        return mixture_forecast(outs, last_ohlcv, n_samples, self.calibration, self._uncertainty(outs), generator), u_raw

    def to(self, device: str | torch.device) -> EncoderEnsemble:
        for m, n in zip(self.members, self.normalizers, strict=True):
            m.to(device)
            n.to(device)
        return self

    def _uncertainty(self, outs: list[TSOutput]) -> np.ndarray | None:
        """[N] the members' mean normalised uncertainty, or None unless every normaliser is fitted."""
        if not all(bool(n.fitted) for n in self.normalizers):
            return None
        return np.mean([n(raw_uncertainty(o, self.cfg.u_channels).to(n.knots.device)).double().cpu().numpy()
                        for n, o in zip(self.normalizers, outs, strict=True)], 0)

    def forecast_windows(self, windows: Windows, n_samples: int = 100, seed: int | None = 0,
                         batch_size: int = 1024) -> Forecast:
        """The calibrated mixture's price-space forecast of ``windows`` (``mixture_forecast``)."""
        outs = self.outputs(windows, batch_size)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        return mixture_forecast(outs, windows.hist[:, -1, :], n_samples, self.calibration, self._uncertainty(outs), gen)

    def residuals(self, windows: Windows, outs: list[TSOutput] | None = None) -> np.ndarray:
        """[N, S] standardised residual of the true cumulative close log return under the mixture's
        moments: ``(y - mean_k m_k) / sqrt(mean_k sd_k² + var_k m_k)`` (the calibration's input)."""
        outs = self.outputs(windows) if outs is None else outs
        mean = torch.stack([o.mu[:, _C].double().cumsum(-1) for o in outs])  # [K, N, S]
        var = torch.stack([o.sigma[:, _C].double().pow(2).cumsum(-1) for o in outs])
        m = mean.mean(0)
        sd = (var.mean(0) + mean.var(0, unbiased=False)).sqrt()
        y = np.log(windows.future[:, :, CLOSE].astype(np.float64) / windows.last_close.astype(np.float64)[:, None])
        return ((torch.as_tensor(y) - m) / sd).numpy()

    def fit_calibration(self, windows: Windows, kind: str, fitted_on: str = "") -> EncoderEnsemble:
        """Fit the calibration on ``windows`` (the VALIDATION split: never the windows it will be scored on)."""
        self.calibration = SpreadCalibration(self.cfg.horizon).fit(self.residuals(windows), kind)
        self.calibration_info = {"kind": kind, "fitted_on": fitted_on, "n_windows": len(windows)}
        return self

    # -------------------------------------------------------------- saved form
    def save_pretrained(self, directory: str | Path) -> Path:
        state: dict[str, torch.Tensor] = {}
        for i, (m, n) in enumerate(zip(self.members, self.normalizers, strict=True)):
            state |= {f"member{i}.model.{k}": v for k, v in m.state_dict().items()}
            state |= {f"member{i}.normalizer.{k}": v for k, v in n.state_dict().items()}
        state |= {f"calibration.{k}": v for k, v in self.calibration.state_dict().items()}
        meta = {"lookback": self.cfg.lookback, "horizon": self.cfg.horizon,
                "members": [{"encoder": m.cfg.to_dict(), "source": s} for m, s in zip(self.members, self.sources, strict=True)],
                "calibration": self.calibration_info,
                "calibration_multipliers": [round(float(c), 4) for c in self.calibration.multipliers()]}
        return save_artifact(directory, FILE_FORMAT, FORMAT_VERSION, meta, state)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> EncoderEnsemble:
        d = Path(directory)
        meta = read_config(d, FILE_FORMAT, FORMAT_VERSION, what="TS encoder ensemble")
        state = load_weights(d, meta)
        members, normalizers = [], []
        for i, spec in enumerate(meta.get("members", [])):
            enc = TSEncoder(TSEncoderConfig.from_any(spec["encoder"]))
            load_strict(enc, _prefixed(state, f"member{i}.model."), str(d))
            knots = state.get(f"member{i}.normalizer.knots")
            norm = UncertaintyNormalizer(knots.numel() if knots is not None else 101)
            load_strict(norm, _prefixed(state, f"member{i}.normalizer."), str(d))
            members.append(enc)
            normalizers.append(norm)
        calibration = SpreadCalibration(int(meta["horizon"]))
        load_strict(calibration, _prefixed(state, "calibration."), str(d))
        return cls(members, normalizers, calibration, [s.get("source", "") for s in meta["members"]],
                   meta.get("calibration"))


def _prefixed(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
