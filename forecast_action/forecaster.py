"""``Forecaster``: forecast the next trading days of any OHLCV frame, the way Chronos-2's
``predict_df`` and TimesFM's pipelines answer (a long frame: one row per series and future day).

Why a separate class: the training stack (``TSForecastModule`` + ``Windows``) needs ``horizon``
future rows after every decision day, so the newest forecast it can make starts ``horizon`` days
before the last row. Here the input window is the last ``lookback + 1`` rows only (the extra row is
the previous close the first log return needs) and the forecast is dated on the trading days
after the last row (``stockr1.data.calendar``: the exchange's calendar, else weekdays; the ``calendar``
column says which). The features are the training ones: ``inference_window`` composes the same
``stockr1.data`` functions as ``build_windows`` (as-of-t corporate-action adjustment, then the
log-return channels); the model's own buffers hold the training-split input scaling.

Saved form (``save_pretrained(dir)``), loadable in a fresh process with no Lightning state:
    config.json         format, version, encoder config, lookback / horizon, decoder file name
    model.safetensors   ``model.*`` (TSEncoder incl. the x_loc / x_scale input stats) and
                        ``normalizer.*`` (the fitted uncertainty normaliser's knots) tensors
    decoder/            optional: the action-conditioned decoder's own save_pretrained directory

A saved ``ts_encoder.ensemble.EncoderEnsemble`` directory (format ``stockr1.ts_ensemble``: K encoders +
a validation-fitted spread calibration, what ``bench forecast_search --save`` writes) loads too
(``from_pretrained`` / ``load`` recognise it): forecasts without an action are then the calibrated mixture's,
``encoder`` / ``normalizer`` are member 0's (the window shape, and what a decoder starts from) and
``save_pretrained`` writes the ensemble's own form.

Layering: the forecaster lives in ``forecast_action`` because it can carry the action-conditioned decoder
(which wraps a ``TSEncoder``); without a decoder it runs the TS encoder alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.parser import parse_action
from forecast_action.schema import ForecastAction
from stockr1.artifact import CONFIG_FILE, WEIGHTS_FILE, load_strict, load_weights, read_config, save_artifact
from stockr1.data.adjust import action_log_factors, window_prices
from stockr1.data.calendar import AUTO, TradingCalendar, calendars_for
from stockr1.data.quality import check_frames
from stockr1.data.returns import log_returns
from stockr1.data.sources.frames import normalize_frame, present_channels
from stockr1.types import CHANNELS, CLOSE, Forecast, Windows
from ts_encoder.config import TSEncoderConfig
from ts_encoder.ensemble import EncoderEnsemble, is_ensemble
from ts_encoder.model import TSEncoder, TSOutput
from ts_encoder.sampling import forecast_windows, to_forecast
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

FILE_FORMAT = "stockr1.forecaster"
FORMAT_VERSION = 2  # 1: decoder.pt beside the weights; 2: + sha256 of the weights, the decoder in its own directory
DECODER_DIR = "decoder"
DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.1, 0.5, 0.9, 0.95)
DEFAULT_TICKER = "series"


# ------------------------------------------------------------------ data -> model input
def as_frames(data: pd.DataFrame | Mapping[str, pd.DataFrame], ticker: str = DEFAULT_TICKER,
              jump_policy: str = "error") -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """Normalised, quality-checked frames per ticker and the counts of repairs made.

    ``data``: one frame (split by its ``ticker`` / ``symbol`` column if it has one, else named
    ``ticker``) or a dict of frames. Any column case and order, a date column or a date index, Close
    required and Open/High/Low/Volume optional (an absent one is masked: the forecast's high / low /
    volume are then NaN; ``stockr1.data.sources.frames.normalize_frame``); the checks and repairs are the training data's
    (``stockr1.data.quality``): NaN / non-positive prices and conflicting duplicate dates are errors
    naming the ticker and date, identical duplicates are dropped, rows are sorted by date.
    """
    if isinstance(data, pd.DataFrame):
        key = next((c for c in data.columns if str(c).strip().lower() in ("ticker", "symbol")), None)
        raw = {str(k): g.drop(columns=[key]) for k, g in data.groupby(key, sort=True)} if key else {ticker: data}
    elif isinstance(data, Mapping):
        raw = {str(k): v for k, v in data.items()}
    else:
        raise TypeError(f"data must be a DataFrame or a dict of DataFrames, got {type(data).__name__}")
    if not raw:
        raise ValueError("no series to forecast (empty data)")
    for name, frame in raw.items():
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{name}: expected a DataFrame, got {type(frame).__name__}")
    frames = {name: normalize_frame(frame, name) for name, frame in raw.items()}
    frames, report = check_frames(frames, jump_policy=jump_policy)
    return frames, report.counts()


def inference_window(frame: pd.DataFrame, lookback: int) -> tuple[np.ndarray, np.ndarray]:
    """The model input for the decision day t = the last row, with no future rows.

    frame: normalised OHLCV (+ optional dividends / splits) with >= lookback + 1 rows.
    Returns x [5, L] float32 (log-return channels of rows T-L..T-1) and hist [L, 5] float64 (OHLCV
    adjusted as of t; its last row is the as-traded decision-day bar). Same functions, same row
    offsets as ``stockr1.data.windows.build_windows`` (tested equal to its window at the same t).
    """
    raw = frame[list(CHANNELS)].to_numpy(dtype=np.float64)
    log_f, log_fv = action_log_factors(frame)
    rows = np.arange(len(frame) - lookback - 1, len(frame))[None]  # [1, L+1]: rows t-L..t, t at column L
    prices = window_prices(raw, log_f, log_fv, rows, lookback)  # [1, L+1, 5]
    x = log_returns(prices).transpose(0, 2, 1)[0]  # [5, L]
    return x.astype(np.float32), prices[0, 1:]


def _windows_of(frames: dict[str, pd.DataFrame], lookback: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [N, 5, L], the decision-day OHLCV [N, 5] and the observed channels [N, 5] bool of every ticker
    (in ``frames`` order); an absent channel is NaN in x and in the OHLCV."""
    xs, lasts, chans = [], [], []
    for name, frame in frames.items():
        if len(frame) < lookback + 1:
            raise ValueError(f"{name}: {len(frame)} rows (after quality repairs), the model needs at least "
                             f"{lookback + 1} (lookback {lookback} + the previous close)")
        x, hist = inference_window(frame, lookback)
        ch = present_channels(frame)
        if not np.isfinite(x[ch]).all():
            raise ValueError(f"{name}: non-finite log returns in the last {lookback + 1} rows "
                             f"({frame.index[-lookback - 1].date()}..{frame.index[-1].date()})")
        xs.append(x)
        lasts.append(hist[-1])
        chans.append(ch)
    return np.stack(xs), np.stack(lasts), np.stack(chans)


def quantile_columns(levels: Sequence[float]) -> dict[str, float]:
    """{column name: level} in increasing level, e.g. {"q0.05": 0.05, ...}; levels must be in (0, 1)."""
    lv = sorted({float(q) for q in levels})
    if not lv or any(not 0.0 < q < 1.0 for q in lv):
        raise ValueError(f"quantile levels must be in (0, 1), got {list(levels)}")
    cols = {f"q{q:g}": q for q in lv}
    if len(cols) != len(lv):
        raise ValueError(f"quantile levels {lv} give duplicate column names {list(cols)}")
    return cols


def parse_action_text(text: str) -> ForecastAction:
    """A JSON (or any ``forecast_action.parser`` form) action -> ForecastAction; ValueError carrying
    the parser's messages when anything in it is unusable (a user's typo must not be dropped silently)."""

    res = parse_action(text)
    if res.action is None or res.errors:
        raise ValueError("invalid action: " + "; ".join(e.message for e in res.errors))
    return res.action


# ------------------------------------------------------------------ loading helpers
def _split_state(state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """``model.*`` / ``normalizer.*`` keys (the TSForecastModule layout) -> two state dicts."""
    model = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    norm = {k[len("normalizer."):]: v for k, v in state.items() if k.startswith("normalizer.")}
    return model, norm


def _build(cfg: TSEncoderConfig, state: Mapping[str, Tensor], source: str) -> tuple[TSEncoder, UncertaintyNormalizer]:
    """Encoder + normaliser from a flat state dict, with the normaliser's knot count taken from it."""
    model_state, norm_state = _split_state(state)
    encoder = TSEncoder(cfg)
    load_strict(encoder, model_state, source)
    knots = norm_state.get("knots")
    normalizer = UncertaintyNormalizer(knots.numel() if knots is not None and knots.numel() >= 2 else 101)
    load_strict(normalizer, norm_state, source)
    return encoder, normalizer


def _load_decoder(decoder: ActionConditionedDecoder | str | Path | None) -> ActionConditionedDecoder | None:
    if decoder is None or not isinstance(decoder, (str, Path)):
        return decoder

    return ActionConditionedDecoder.load(decoder)


# ------------------------------------------------------------------ the forecaster
class Forecaster:
    """Pretrained TS encoder (+ optional action-conditioned decoder) -> forecasts of user frames.

    Without an action the encoder forecasts; with an action the decoder does (its own weights and
    uncertainty normaliser), so an action without a decoder is an error.
    """

    def __init__(self, encoder: TSEncoder, normalizer: UncertaintyNormalizer | None = None,
                 decoder: ActionConditionedDecoder | None = None, ensemble: EncoderEnsemble | None = None) -> None:
        """``ensemble``: forecast (without an action) with this mixture instead; ``encoder`` must be its member 0."""
        if ensemble is not None and encoder is not ensemble.members[0]:
            raise ValueError("Forecaster(encoder, ensemble=...): encoder must be the ensemble's member 0")
        self.encoder = encoder.eval()
        self.ensemble = ensemble
        self.normalizer = normalizer if normalizer is not None else UncertaintyNormalizer()
        self.decoder = decoder.eval() if decoder is not None else None
        if decoder is not None:
            self._check_decoder(decoder)

    def _check_decoder(self, decoder: ActionConditionedDecoder) -> None:
        """The decoder must read the same window and forecast the same horizon as the encoder."""
        enc, dec = self.encoder.cfg, decoder.ts_cfg
        bad = [f"{k}: decoder {getattr(dec, k)} vs encoder {getattr(enc, k)}"
               for k in ("lookback", "horizon", "n_vars") if getattr(dec, k) != getattr(enc, k)]
        if bad:
            raise ValueError(f"decoder does not fit the encoder: {'; '.join(bad)}")

    @property
    def cfg(self) -> TSEncoderConfig:
        return self.encoder.cfg

    @property
    def lookback(self) -> int:
        return self.cfg.lookback

    @property
    def horizon(self) -> int:
        return self.cfg.horizon

    def to(self, device: str | torch.device) -> Forecaster:
        self.encoder.to(device)
        self.normalizer.to(device)
        if self.ensemble is not None:
            self.ensemble.to(device)
        if self.decoder is not None:
            self.decoder.to(device)
        return self

    # -------------------------------------------------------------- construction
    @classmethod
    def from_checkpoint(cls, ckpt: str | Path, decoder: ActionConditionedDecoder | str | Path | None = None,
                        ) -> Forecaster:
        """From a Lightning ``.ckpt`` of ``stockr1 ts fit`` (read with ``weights_only=True``: no
        Lightning, no pickled classes) and optionally a decoder ``.pt`` (``ActionConditionedDecoder.load``)."""
        path = Path(ckpt)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        try:
            ck = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any deserialisation failure = unusable file; name it
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise ValueError(f"cannot read checkpoint {path} (not a torch checkpoint?): {type(e).__name__}: {first}") from e
        if not isinstance(ck, dict) or "state_dict" not in ck or "encoder" not in ck.get("hyper_parameters", {}):
            raise ValueError(f"{path} is not a TS-encoder checkpoint of `stockr1 ts fit` "
                             "(expected hyper_parameters.encoder and state_dict)")
        cfg = TSEncoderConfig.from_any(ck["hyper_parameters"]["encoder"])
        encoder, normalizer = _build(cfg, ck["state_dict"], str(path))
        return cls(encoder, normalizer, _load_decoder(decoder))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> Forecaster:
        """From a directory ``save_pretrained`` wrote (``stockr1.artifact``: safetensors + JSON, the
        weights' SHA-256 checked), or a saved ``EncoderEnsemble``; needs no Lightning and no training state."""
        d = Path(directory)
        if is_ensemble(d):
            ens = EncoderEnsemble.from_pretrained(d)
            return cls(ens.members[0], ens.normalizers[0], ensemble=ens)
        meta = _read_config(d)
        cfg = TSEncoderConfig.from_any(meta["encoder"])
        if (meta.get("lookback"), meta.get("horizon")) != (cfg.lookback, cfg.horizon):
            raise ValueError(f"{d / CONFIG_FILE}: lookback/horizon {meta.get('lookback')}/{meta.get('horizon')} "
                             f"disagree with the encoder config {cfg.lookback}/{cfg.horizon}")
        encoder, normalizer = _build(cfg, load_weights(d, meta), str(d / meta.get("weights", WEIGHTS_FILE)))
        decoder = _load_decoder(d / meta["decoder"]) if meta.get("decoder") else None
        return cls(encoder, normalizer, decoder)

    @classmethod
    def load(cls, path: str | Path, decoder: ActionConditionedDecoder | str | Path | None = None) -> Forecaster:
        """A ``save_pretrained`` directory or a Lightning ``.ckpt`` (what ``--checkpoint`` accepts)."""
        p = Path(path)
        if p.is_dir():
            out = cls.from_pretrained(p)
            if decoder is not None:
                out = cls(out.encoder, out.normalizer, _load_decoder(decoder), out.ensemble)
            return out
        return cls.from_checkpoint(p, decoder)

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write config.json + model.safetensors (+ the decoder's own directory); returns the dir. An
        ensemble forecaster writes the ensemble's form (which has no place for a decoder)."""
        d = Path(directory)
        if self.ensemble is not None:
            if self.decoder is not None:
                raise ValueError("save_pretrained: an ensemble forecaster with a decoder cannot be saved in one "
                                 "directory; save the ensemble and the decoder (decoder.save_pretrained) apart")
            return self.ensemble.save_pretrained(d)
        state = {f"model.{k}": v for k, v in self.encoder.state_dict().items()}
        state |= {f"normalizer.{k}": v for k, v in self.normalizer.state_dict().items()}
        if self.decoder is not None:
            self.decoder.save_pretrained(d / DECODER_DIR)
        elif (d / DECODER_DIR).is_dir():
            shutil.rmtree(d / DECODER_DIR)  # a stale decoder from an earlier save would mislead
        meta = {"encoder": self.cfg.to_dict(), "lookback": self.lookback, "horizon": self.horizon,
                "channels": list(CHANNELS), "decoder": DECODER_DIR if self.decoder is not None else None,
                "uncertainty_fitted": bool(self.normalizer.fitted)}
        return save_artifact(d, FILE_FORMAT, FORMAT_VERSION, meta, state)

    # -------------------------------------------------------------- inference
    def forecast_windows(self, windows: Windows, n_samples: int = 100, seed: int | None = 0,
                         batch_size: int = 1024) -> Forecast:
        """The encoder's price-space forecast of prepared ``Windows`` (benchmarks), identical to
        ``TSForecastModule.forecast`` of the checkpoint this was exported from (an ensemble: its
        calibrated mixture, ``EncoderEnsemble.forecast_windows``)."""
        if self.ensemble is not None:
            return self.ensemble.forecast_windows(windows, n_samples, seed, batch_size)
        norm = self.normalizer if bool(self.normalizer.fitted) else None
        return forecast_windows(self.encoder, windows, n_samples, norm, batch_size=batch_size, seed=seed)

    @torch.no_grad()
    def predict(
        self,
        data: pd.DataFrame | Mapping[str, pd.DataFrame],
        horizon: int = 10,
        quantile_levels: Sequence[float] = DEFAULT_QUANTILES,
        action: ForecastAction | str | None = None,
        n_samples: int = 1000,
        seed: int = 0,
        ticker: str = DEFAULT_TICKER,
        jump_policy: str = "error",
        exchange: str | Mapping[str, str] = AUTO,
    ) -> pd.DataFrame:
        """Forecast the ``horizon`` trading days after each series' last row.

        Returns a long frame sorted by ticker then horizon, one row per (ticker, future day):
            ticker, date, horizon (1..h), mean (close on the mean log-return path, C_t·exp(Σμ)),
            q<level> (close quantiles, increasing in level), volume (point forecast),
            high_q0.95, low_q0.05 (quantiles of the day's high / low; these three are NaN for a series
            without that column, e.g. a Date + Close CSV), uncertainty (U normalised to
            [0, 1] by the training-split CDF; NaN if the checkpoint has no fitted normaliser),
            uncertainty_raw (U = Σ σ² over the model's full horizon, i ∈ {O, C, V}),
            calendar (what ``date`` counts: the exchange's MIC, or "weekdays (<why>)").
        ``exchange`` (one spec or {ticker: spec}): an ISO MIC, ``auto`` (inferred from each series' own
        dates, ``stockr1.data.calendar.calendar_for``) or ``weekdays``; it changes the dates only.
        Close quantiles are taken over ``n_samples`` sampled close paths (``to_forecast``, the paths
        every metric and the forecast tool use) drawn from a generator seeded with ``seed``, so the
        same call gives the same frame. ``action`` (ForecastAction or its JSON) needs the decoder and
        is applied to every series. ``frame.attrs["repairs"]`` counts the data-quality repairs.
        """
        if not isinstance(horizon, (int, np.integer)) or not 1 <= horizon <= self.horizon:
            raise ValueError(f"horizon must be an integer in 1..{self.horizon} (the model's horizon), got {horizon}")
        cols = quantile_columns(quantile_levels)
        act = self._resolve_action(action)
        frames, repairs = as_frames(data, ticker, jump_policy)
        calendars = calendars_for(frames, exchange)  # a bad MIC fails before any model work
        x, last, channels = _windows_of(frames, self.lookback)
        forecast, u_raw = self._forecast(x, last, act, n_samples, seed, channels)
        out = _long_frame(frames, forecast, u_raw, int(horizon), cols, calendars)
        out.attrs["repairs"] = repairs
        return out

    def _resolve_action(self, action: ForecastAction | str | None) -> ForecastAction | None:
        if action is None:
            return None
        if self.decoder is None:
            raise ValueError("an action needs the action-conditioned decoder; load one with decoder=... "
                             "(CLI: --decoder FILE)")
        if isinstance(action, str):
            return parse_action_text(action)
        from forecast_action.schema import ForecastAction

        if not isinstance(action, ForecastAction):
            raise TypeError(f"action must be a ForecastAction or a JSON string, got {type(action).__name__}")
        return action

    def _forecast(self, x: np.ndarray, last: np.ndarray, action: ForecastAction | None, n_samples: int,
                  seed: int, channels: np.ndarray | None = None) -> tuple[Forecast, np.ndarray]:
        """x [N, 5, L], last [N, 5], channels [N, 5] bool (None: all observed) -> (Forecast over the
        model's full horizon, raw U [N])."""
        if action is None and self.ensemble is not None:
            return self.ensemble.forecast_x(x, last, n_samples, torch.Generator().manual_seed(int(seed)), channels)
        dev = next(self.encoder.parameters()).device
        xt = torch.as_tensor(x, dtype=torch.float32, device=dev)
        ch = None if channels is None else torch.as_tensor(channels, device=dev)
        out, normalizer = self._outputs(xt, last, action, ch)
        gen = torch.Generator().manual_seed(int(seed))
        norm = normalizer if bool(normalizer.fitted) else None
        u_ch = self.encoder.cfg.u_channels
        return to_forecast(out, last, n_samples, norm, gen, u_ch), raw_uncertainty(out, u_ch).double().cpu().numpy()

    def _outputs(self, x: Tensor, last: np.ndarray, action: ForecastAction | None, channels: Tensor | None = None,
                 ) -> tuple[TSOutput, UncertaintyNormalizer]:
        """Encoder outputs (no action) or decoder outputs conditioned on ``action`` for every row."""
        if action is None:
            return self.encoder(x, None, channels), self.normalizer
        from forecast_action.encoder import featurize

        batch = featurize([action] * len(x), last[:, CLOSE]).to(x.device)
        return self.decoder(x, batch, channels), self.decoder.normalizer


def _read_config(d: Path) -> dict[str, Any]:
    meta = read_config(d, FILE_FORMAT, FORMAT_VERSION, what="forecaster")
    if "encoder" not in meta:
        raise ValueError(f"{d / CONFIG_FILE}: no encoder config")
    return meta


def _long_frame(frames: dict[str, pd.DataFrame], fc: Forecast, u_raw: np.ndarray, horizon: int,
                cols: dict[str, float], calendars: dict[str, TradingCalendar]) -> pd.DataFrame:
    """Forecast arrays [N, S(, M)] -> the long frame of ``Forecaster.predict`` (first ``horizon`` steps)."""
    h = horizon
    q = np.quantile(fc.close_samples[:, :, :h], list(cols.values()), axis=1)  # [Q, N, h], monotone in level
    unc = fc.uncertainty if fc.uncertainty is not None else np.full(len(frames), np.nan)
    parts = []
    for i, (name, frame) in enumerate(frames.items()):
        cal = calendars[name]
        part = {"ticker": name, "date": cal.days_after(frame.index[-1], h), "horizon": np.arange(1, h + 1),
                "mean": fc.close[i, :h]}
        part |= {c: q[j, i] for j, c in enumerate(cols)}
        part |= {"volume": fc.volume[i, :h], "high_q0.95": fc.high[i, :h], "low_q0.05": fc.low[i, :h],
                 "uncertainty": float(unc[i]), "uncertainty_raw": float(u_raw[i]), "calendar": cal.label}
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True)
