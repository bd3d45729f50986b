"""The action-conditioned decoder p_φ(y | H_ts, e_ψ(a)) (Stock-R1 §3.3).

One ``TSEncoder`` (built with ``cond_dim > 0``) plus the action encoder e_ψ. The history representation
``hidden`` / ``h_ts`` is the encoder's own and does not see the action (the LLM receives the same
``h_ts`` tokens with or without an action); z_a = e_ψ(a) enters through the encoder's FiLM hook on the
aggregated state that feeds every distributional head: h ← h ⊙ (1 + γ(z_a)) + β(z_a).

Why FiLM rather than an extra action token: (1) the heads read one pooled state, so FiLM reaches μ, σ
and both quantile heads directly, which is what an action must move (direction shifts μ, volatility
scales σ and the quantiles); an extra token would only act through attention, would have to be routed
into the last-patch pool, and would change ``hidden``/``h_ts`` that the LLM also consumes; (2) FiLM is
zero-initialised, so a decoder built from a pretrained encoder starts as exactly that encoder and the
no-action forecast is unchanged at step 0; (3) it costs one small MLP, no extra attention length.

Plus a residual action head (``ActionHead``): zero-initialised linear maps from z_a to offsets of μ
and of the quantiles (in units of the train std of each channel) and to a log-scale of σ, added to the
FiLM-conditioned outputs. Reason (measured): the encoder's μ head is near zero after pre-training
(daily mean returns are almost unpredictable from history), so a FiLM-only path sits at a saddle - the
action can move μ only once the μ head's weights grow, which needs a state that already carries the
action. A FiLM-only tiny decoder trained 280 steps moved the 10-day mean log return between "up" and
"down" requests by 6e-4. The residual head gets the gradient of each output directly; FiLM keeps
the history x action interactions (e.g. "high volatility" relative to this window's own volatility).
Both start at zero, so the decoder still starts as the pretrained encoder.

"No action" is the all-missing action (every field at its missing index), trained by action dropout,
so the same network forecasts with and without an action through one code path.

Persistence: ``save_pretrained(dir)`` / ``ActionConditionedDecoder.from_pretrained(dir)`` write and read
the project's one artefact form (``stockr1.artifact``: ``config.json`` with both configs,
``tool_samples``, the ``observation`` layout of the tool's text and the action thresholds g was fitted with, when the decoder has them;
``model.safetensors`` with the weights and the fitted normaliser; the weights' SHA-256 is checked on
load). ``stockr1 decoder`` writes this directory (``OUT/decoder/``); ``load(path)`` also reads the
single ``.pt`` files of earlier releases. The Lightning checkpoints beside it are resume state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from forecast_action.derive import ActionThresholds
from forecast_action.encoder import ActionBatch, ActionEncoder, ActionEncoderConfig, featurize
from forecast_action.render import COMPACT, FULL, STYLES
from forecast_action.schema import ForecastAction
from stockr1.artifact import WEIGHTS_FILE, load_strict, load_weights, read_config, save_artifact
from stockr1.data.returns import observed_moments
from stockr1.types import HIGH, LOW, Forecast, TrainWindows, Windows, require_train
from ts_encoder.config import TSEncoderConfig
from ts_encoder.model import GAUSSIAN_CHANNELS, TSEncoder, TSOutput
from ts_encoder.sampling import to_forecast
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

FILE_FORMAT = "stockr1.action_decoder"
# Single .pt files (read only): 0 the unversioned {ts_cfg, act_cfg, state_dict}; 1 + format/version;
# 2 + tool_samples (the number of sample paths the forecast tool draws, one value for SFT, RL and eval).
LEGACY_FILE_VERSION = 2
# The save_pretrained directory (config.json + model.safetensors, stockr1.artifact): version 3.
FORMAT_VERSION = 3
DEFAULT_TOOL_SAMPLES = 16


class ActionHead(nn.Module):
    """z_a [B, cond_dim] -> offsets applied to a ``TSOutput`` (zero-initialised: identity at start)."""

    def __init__(self, cond_dim: int, horizon: int) -> None:
        super().__init__()
        self.s = horizon
        self.net = nn.Linear(cond_dim, 3 * horizon * 2 + 2 * horizon)  # dmu [3,S], dlogsig [3,S], dq_h, dq_l
        nn.init.zeros_(self.net.weight)
        nn.init.zeros_(self.net.bias)

    def forward(self, out: TSOutput, z: Tensor, x_scale: Tensor) -> TSOutput:
        """x_scale: [5] train std per input channel (the unit of the μ / quantile offsets)."""
        b, s = z.shape[0], self.s
        d = self.net(z)
        dmu, dlogsig = d[:, : 3 * s].view(b, 3, s), d[:, 3 * s : 6 * s].view(b, 3, s)
        dqh, dql = d[:, 6 * s : 7 * s], d[:, 7 * s :]
        sc = x_scale[list(GAUSSIAN_CHANNELS)][None, :, None]
        return replace(out, mu=out.mu + sc * dmu, sigma=out.sigma * torch.exp(dlogsig.clamp(-5.0, 5.0)),
                       q_high=out.q_high + x_scale[HIGH] * dqh, q_low=out.q_low + x_scale[LOW] * dql)


def concat_forecasts(parts: Sequence[Forecast]) -> Forecast:
    """Stack Forecasts of consecutive window batches along N."""
    unc = [p.uncertainty if p.uncertainty is not None else np.full(len(p.close), np.nan) for p in parts]
    return Forecast(
        close=np.concatenate([p.close for p in parts]),
        close_samples=np.concatenate([p.close_samples for p in parts]),
        high=np.concatenate([p.high for p in parts]),
        low=np.concatenate([p.low for p in parts]),
        volume=np.concatenate([p.volume for p in parts]),
        uncertainty=np.concatenate(unc),
    )


class ActionConditionedDecoder(nn.Module):
    """``forward(x [B, 5, L], actions: ActionBatch, channels [B, 5] bool | None) -> TSOutput``;
    ``forecast(windows, actions) -> Forecast``. ``channels`` (False = absent, e.g. close-only stocks)
    goes to the encoder and comes back on ``TSOutput.channels`` (``ts_encoder.model``)."""

    def __init__(self, ts_cfg: TSEncoderConfig, act_cfg: ActionEncoderConfig | None = None,
                 encoder: TSEncoder | None = None, normalizer: UncertaintyNormalizer | None = None,
                 tool_samples: int = DEFAULT_TOOL_SAMPLES, thresholds: ActionThresholds | None = None,
                 observation: str = COMPACT) -> None:
        """``encoder`` / ``normalizer``: share existing modules (the Lightning module passes its own).
        ``tool_samples``: sample paths per forecast-tool call, saved with the decoder so SFT traces, RL
        rollouts and evaluation render the same observation (``llm.tools.ForecastTool``).
        ``thresholds``: the train-fitted g the decoder was trained against (saved with it; None when
        the decoder was built elsewhere, e.g. inside an SFT run, which keeps its own thresholds.json).
        ``observation``: the layout of the tool's ``<forecast_ts>`` text (``forecast_action.render.STYLES``),
        saved with the decoder so a policy reads the layout it was trained on; decoders saved without it
        render ``full`` (the layout of every run before it existed, release/tiny included)."""
        super().__init__()
        if observation not in STYLES:
            raise ValueError(f"observation must be one of {STYLES}, got {observation!r}")
        self.observation = observation
        self.thresholds = thresholds
        if int(tool_samples) < 2:
            raise ValueError(f"tool_samples must be >= 2 (the tool renders a 90% interval), got {tool_samples}")
        self.tool_samples = int(tool_samples)
        act_cfg = act_cfg or ActionEncoderConfig()
        self.ts_cfg = replace(ts_cfg, cond_dim=act_cfg.cond_dim)
        self.act_cfg = act_cfg
        if encoder is not None and encoder.cfg != self.ts_cfg:
            raise ValueError(f"shared encoder has config {encoder.cfg}, expected {self.ts_cfg}")
        self.encoder = encoder if encoder is not None else TSEncoder(self.ts_cfg)
        self.action_encoder = ActionEncoder(act_cfg)
        self.action_head = ActionHead(act_cfg.cond_dim, self.ts_cfg.horizon)
        self.normalizer = normalizer if normalizer is not None else UncertaintyNormalizer()

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``directory/`` = config.json (both configs, tool_samples) + model.safetensors (weights
        and the fitted uncertainty normaliser, a buffer), each atomically (``stockr1.artifact``)."""
        meta = {"ts_cfg": self.ts_cfg.to_dict(), "act_cfg": asdict(self.act_cfg), "tool_samples": self.tool_samples,
                "observation": self.observation,
                "uncertainty_fitted": bool(self.normalizer.fitted),
                "thresholds": self.thresholds.to_dict() if self.thresholds is not None else None}
        return save_artifact(directory, FILE_FORMAT, FORMAT_VERSION, meta, self.state_dict())

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> ActionConditionedDecoder:
        """The decoder ``save_pretrained`` wrote, in eval mode; FileNotFoundError / ValueError naming
        the file when it is missing, corrupt (SHA-256), of another format, or when its configs and
        weights do not fit each other."""
        meta = read_config(directory, FILE_FORMAT, FORMAT_VERSION, what="action decoder")
        dec = cls._from_configs(meta, f"{directory}")
        load_strict(dec, load_weights(directory, meta), f"{Path(directory) / meta.get('weights', WEIGHTS_FILE)}")
        return dec.eval()

    @classmethod
    def _from_configs(cls, meta: dict, source: str) -> ActionConditionedDecoder:
        try:
            ts, act = TSEncoderConfig(**meta["ts_cfg"]), ActionEncoderConfig(**meta["act_cfg"])
        except (KeyError, TypeError, ValueError) as e:  # missing / unknown / invalid config fields
            raise ValueError(f"cannot load a decoder from {source}: invalid config: {e}") from e
        if ts.cond_dim != act.cond_dim:
            raise ValueError(f"cannot load a decoder from {source}: config mismatch: "
                             f"ts_cfg.cond_dim={ts.cond_dim} but act_cfg.cond_dim={act.cond_dim}")
        try:
            th = ActionThresholds.from_dict(meta["thresholds"]) if meta.get("thresholds") else None
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"cannot load a decoder from {source}: invalid thresholds: {e}") from e
        return cls(ts, act, tool_samples=int(meta.get("tool_samples", DEFAULT_TOOL_SAMPLES)), thresholds=th,
                   observation=meta.get("observation", FULL))

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu") -> ActionConditionedDecoder:
        """A ``save_pretrained`` directory, or a single ``.pt`` file of the earlier formats (read only:
        ``{format, version <= 2, ts_cfg, act_cfg, tool_samples, state_dict}``, version 0 without format)."""
        if Path(path).is_dir():
            return cls.from_pretrained(path)

        def bad(why: str) -> ValueError:
            return ValueError(f"cannot load a decoder from {path}: {why}")

        if not Path(path).exists():
            raise FileNotFoundError(f"decoder {path} does not exist (a save_pretrained directory or a .pt file)")
        try:
            ck = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as e:  # any failure to deserialise (truncated zip, bad pickle, I/O) = unusable file
            raise bad(f"{type(e).__name__}: {e}") from e
        if not isinstance(ck, dict) or not {"ts_cfg", "act_cfg", "state_dict"} <= set(ck):
            keys = sorted(ck)[:8] if isinstance(ck, dict) else type(ck).__name__
            hint = " (a Lightning checkpoint: `stockr1 decoder --export CKPT --out DIR` writes its saved form)" \
                if isinstance(ck, dict) and "pytorch-lightning_version" in ck else ""
            raise bad(f"not an action-decoder file, expected keys ts_cfg/act_cfg/state_dict, got {keys}{hint}")
        version = ck.get("version", 0)
        if ck.get("format", FILE_FORMAT) != FILE_FORMAT or not isinstance(version, int) or version > LEGACY_FILE_VERSION:
            raise bad(f"format {ck.get('format')!r} version {version!r}; this code reads {FILE_FORMAT!r} "
                      f"files up to version {LEGACY_FILE_VERSION}")
        dec = cls._from_configs(ck, str(path))
        try:
            dec.load_state_dict(ck["state_dict"])
        except (RuntimeError, TypeError) as e:  # missing / unexpected keys or shapes that do not match the configs
            raise bad(f"weights do not match the stored configs: {e}") from e
        return dec.eval()

    def load_encoder_state(self, state: dict[str, Tensor]) -> None:
        """Initialise from an unconditioned encoder's state dict (FiLM keeps its identity init)."""
        missing, unexpected = self.encoder.load_state_dict(state, strict=False)
        bad = [k for k in missing if not k.startswith("film.")]
        if bad or unexpected:
            raise ValueError(f"encoder state does not fit: missing {bad}, unexpected {list(unexpected)}")

    def forward(self, x: Tensor, actions: ActionBatch, channels: Tensor | None = None) -> TSOutput:
        if len(actions) != x.shape[0]:
            raise ValueError(f"{len(actions)} actions for a batch of {x.shape[0]} windows")
        z = self.action_encoder(actions)
        return self.action_head(self.encoder(x, z, channels), z, self.encoder.x_scale)

    def no_action(self, start: np.ndarray) -> ActionBatch:
        """The all-missing action batch for len(start) windows (what "no action" means here)."""
        return featurize([None] * len(start), start).to(next(self.parameters()).device)

    @torch.no_grad()
    def no_action_uncertainty(self, windows: Windows, batch_size: int = 1024) -> Tensor:
        """[N] raw U of the no-action forecast (the uncertainty the LLM sees before it acts)."""
        was_training = self.training
        self.eval()
        dev = next(self.parameters()).device
        u = []
        for lo in range(0, len(windows), batch_size):
            w = windows.select(np.arange(lo, min(len(windows), lo + batch_size)))
            x = torch.as_tensor(w.x, dtype=torch.float32, device=dev)
            ch = torch.as_tensor(w.channels, device=dev)
            u.append(raw_uncertainty(self(x, self.no_action(w.last_close), ch), self.ts_cfg.u_channels).cpu())
        self.train(was_training)
        return torch.cat(u)

    def fit_input_stats(self, train: TrainWindows) -> None:
        """Input scaling of a fresh decoder: per-channel mean / std of ``train_only(windows).x``.

        Used where a decoder is built rather than loaded (SFT prepare, GRPO without an SFT run); a
        decoder trained by ``forecast_action.train`` carries the datamodule's train statistics. Each
        channel's over the windows that observe it (``observed_moments``)."""
        train = require_train(train, "fit_input_stats")
        x = train.x
        if not train.channels.all():
            mean, std = observed_moments(x.astype(np.float64), train.channels)
            self.encoder.set_input_stats(torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32))
            return
        self.encoder.set_input_stats(torch.as_tensor(x.mean((0, 2))), torch.as_tensor(x.std((0, 2))))

    def fit_uncertainty(self, train: TrainWindows, max_windows: int = 4096) -> None:
        """Fit the uncertainty normaliser on (at most ``max_windows`` evenly spaced) TRAIN windows.

        The one place the decoder's normaliser is fitted. Called by the stage that owns the decoder's
        weights when they are final (decoder training, the decoder preparation of SFT, the end of joint
        SFT); never by RL or a benchmark, so the tool's text is a function of the saved decoder only.
        Raises TypeError unless ``train`` is ``train_only(windows)``."""
        train = require_train(train, "fit_uncertainty")
        n = len(train)
        idx = np.unique(np.linspace(0, n - 1, min(n, max_windows)).round().astype(int))
        self.normalizer.fit(self.no_action_uncertainty(train.select(idx)))

    @torch.no_grad()
    def forecast(
        self,
        windows: Windows,
        actions: Sequence[ForecastAction | None] | None = None,
        n_samples: int = 100,
        generator: torch.Generator | None = None,
        batch_size: int = 1024,
    ) -> Forecast:
        """Forecast every window conditioned on its action (None, or a None entry = no action)."""
        n = len(windows)
        actions = list(actions) if actions is not None else [None] * n
        if len(actions) != n:
            raise ValueError(f"{len(actions)} actions for {n} windows")
        was_training = self.training
        self.eval()
        dev = next(self.parameters()).device
        parts = []
        for lo in range(0, n, batch_size):
            w = windows.select(np.arange(lo, min(n, lo + batch_size)))
            batch = featurize(actions[lo : lo + batch_size], w.last_close).to(dev)
            out = self(torch.as_tensor(w.x, dtype=torch.float32, device=dev), batch, torch.as_tensor(w.channels, device=dev))
            parts.append(to_forecast(out, w.hist[:, -1, :], n_samples, self.normalizer, generator, self.ts_cfg.u_channels))
        self.train(was_training)
        return concat_forecasts(parts)
