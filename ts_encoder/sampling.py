"""From the encoder's distributional heads to a price-space ``stockr1.types.Forecast``.

Choices (the paper gives marginals per step and no sampling recipe):
* Close paths: r^C_{t+s} ~ N(μ_s, σ_s²) independently across s (index returns are close to
  serially uncorrelated); C_{t+s} = C_t exp(Σ_{s'≤s} r^C). The point forecast ``close`` is the mean
  log-return path C_t exp(Σ μ), i.e. the median of the sampled price at each step.
* Volume: (V_{t+s} + 1) = (V_t + 1) exp(Σ μ^V) - the inverse of the volume channel definition.
* High / Low: the heads give the τ quantile of r^H = ln(H_{t+s} / C_{t+s-1}), conditional on the
  previous close. The Forecast wants the unconditional quantile of H_{t+s}. With a = E ln C_{t+s-1}
  (mean path) and sd = std ln C_{t+s-1} = sqrt(Σ_{s'<s} σ_C²), treating both the close path and
  the day's excursion as Gaussian pieces with zero median excursion gives
      ln Ĥ = a + sqrt((z_τ sd)² + max(q_H, 0)²) + min(q_H, 0)
  (and symmetrically for the low). At s = 1 (sd = 0) this is exactly C_t exp(q_H).
* Absent channels (``TSOutput.channels``): the high, low or volume of a row that lacks it is NaN.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from stockr1.types import CLOSE, HIGH, LOW, VOLUME, Forecast, Windows
from ts_encoder.calibration import SpreadCalibration
from ts_encoder.model import TSEncoder, TSOutput
from ts_encoder.uncertainty import UncertaintyNormalizer, raw_uncertainty

_Z95 = 1.6448536269514722
_C, _V = 1, 2  # rows of mu / sigma for close and volume


def _absent_to_nan(channels: Tensor | None, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    """high / low / volume [B, S] with the rows that lack that channel set to NaN (channels [B, 5] bool)."""
    if channels is None:
        return arrays
    obs = channels.detach().cpu().numpy()
    col = {"high": HIGH, "low": LOW, "volume": VOLUME}
    return {k: np.where(obs[:, col[k], None], a, np.nan) for k, a in arrays.items()}


def _quantile_path(a: Tensor, sd_prev: Tensor, q: Tensor, upper: bool) -> Tensor:
    spread = _Z95 * sd_prev
    if upper:
        return a + torch.sqrt(spread**2 + q.clamp_min(0) ** 2) + q.clamp_max(0)
    return a - torch.sqrt(spread**2 + q.clamp_max(0) ** 2) + q.clamp_min(0)


@torch.no_grad()
def to_forecast(
    out: TSOutput,
    last_ohlcv: Tensor | np.ndarray,
    n_samples: int = 100,
    normalizer: UncertaintyNormalizer | None = None,
    generator: torch.Generator | None = None,
    u_channels: tuple[int, ...] = (0, 1, 2),
) -> Forecast:
    """out: encoder output for B windows; last_ohlcv: [B, 5] raw OHLCV at the decision day t;
    ``u_channels``: the encoder's ``cfg.u_channels`` (the channels its U sums).

    Returns a Forecast with close [B, S], close_samples [B, n_samples, S], high/low/volume [B, S]
    and uncertainty [B] (normalised when ``normalizer`` is fitted, NaN otherwise).
    """
    mu, sigma = out.mu.detach().double().cpu(), out.sigma.detach().double().cpu()
    b, _, s = mu.shape
    last = torch.as_tensor(np.asarray(last_ohlcv, dtype=np.float64)) if not torch.is_tensor(last_ohlcv) \
        else last_ohlcv.detach().double().cpu()
    if last.shape != (b, 5):
        raise ValueError(f"last_ohlcv must be [B={b}, 5], got {tuple(last.shape)}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    log_c0 = last[:, CLOSE].log()[:, None]  # [B, 1]
    mean_log = log_c0 + mu[:, _C].cumsum(-1)  # [B, S]
    eps = torch.randn(b, n_samples, s, generator=generator, dtype=torch.float64)
    paths = log_c0[:, None] + (mu[:, None, _C] + sigma[:, None, _C] * eps).cumsum(-1)  # [B, M, S]

    a_prev = torch.cat([log_c0, mean_log[:, :-1]], dim=1)  # E ln C_{t+s-1}
    var_prev = torch.cat([torch.zeros(b, 1, dtype=torch.float64), sigma[:, _C].pow(2).cumsum(-1)[:, :-1]], 1)
    sd_prev = var_prev.sqrt()
    high = _quantile_path(a_prev, sd_prev, out.q_high.detach().double().cpu(), upper=True)
    low = _quantile_path(a_prev, sd_prev, out.q_low.detach().double().cpu(), upper=False)
    volume = (last[:, VOLUME, None] + 1.0) * mu[:, _V].cumsum(-1).exp() - 1.0

    if normalizer is not None and bool(normalizer.fitted):
        unc = normalizer(raw_uncertainty(out, u_channels).detach().cpu()).double().numpy()
    else:
        unc = np.full(b, np.nan)
    return Forecast(close=mean_log.exp().numpy(), close_samples=paths.exp().numpy(), uncertainty=unc,
                    **_absent_to_nan(out.channels, high=high.exp().numpy(), low=low.exp().numpy(),
                                     volume=volume.clamp_min(0).numpy()))


@torch.no_grad()
def forecast_windows(model: TSEncoder, windows: Windows, n_samples: int = 100,
                     normalizer: UncertaintyNormalizer | None = None, cond: Tensor | None = None,
                     batch_size: int = 1024, seed: int | None = 0) -> Forecast:
    """Price-space forecast of every window by ``model`` (eval mode, restored after); ``seed`` fixes the
    sample paths (None: torch's global RNG); ``normalizer`` only when fitted; cond: optional
    [N, cond_dim] FiLM conditioning; ``windows.channels`` masks absent channels. What
    ``TSForecastModule.forecast`` and ``Forecaster`` both call."""
    cfg = model.cfg
    if windows.x.shape[1:] != (cfg.n_vars, cfg.lookback):
        raise ValueError(f"windows.x is {windows.x.shape[1:]}, this encoder expects ({cfg.n_vars}, {cfg.lookback})")
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    parts: list[dict[str, Tensor]] = []
    for start in range(0, len(windows), batch_size):
        x = torch.as_tensor(windows.x[start:start + batch_size], dtype=torch.float32, device=dev)
        c = None if cond is None else cond[start:start + batch_size].to(dev)
        ch = torch.as_tensor(windows.channels[start:start + batch_size], device=dev)
        out = model(x, c, ch)
        parts.append({"mu": out.mu, "sigma": out.sigma, "q_high": out.q_high, "q_low": out.q_low, "channels": ch})
    model.train(was_training)
    cat = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    out = TSOutput(**cat, hidden=cat["mu"].new_zeros(0), h_ts=cat["mu"].new_zeros(0), state=cat["mu"].new_zeros(0))
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    return to_forecast(out, windows.hist[:, -1, :], n_samples, normalizer, gen, model.cfg.u_channels)


@torch.no_grad()
def mixture_forecast(
    outs: list[TSOutput],
    last_ohlcv: Tensor | np.ndarray,
    n_samples: int = 100,
    calibration: SpreadCalibration | None = None,
    uncertainty: np.ndarray | None = None,
    generator: torch.Generator | None = None,
) -> Forecast:
    """The equal-weight mixture of K members' predictive distributions, optionally calibrated.

    outs: K encoder outputs for the same B windows (absent channels: ``outs[0].channels``); last_ohlcv [B, 5]. Sample path m comes from member
    ``m % K`` (stratified, so every member has its share of paths whatever the seed); its cumulative
    close log return at step s is ``m_{k,s} + sd_{k,s} · g_s(w_{m,s})`` with ``w = cumsum(σ_k ε) / sd_k``
    the path's standardised Gaussian noise (ε drawn as ``to_forecast`` draws it) and ``g`` the
    calibration (identity when None or unfitted). With K = 1 and no calibration the paths are
    ``to_forecast``'s. Point forecasts average the members in log space: the close is the mean over
    members of their median path ``m_{k,s} + sd_{k,s} · g_s(0)``; high / low quantiles and volume are the
    members' averages (the quantile average of a mixture); ``uncertainty`` [B] is passed through.
    """
    if not outs:
        raise ValueError("a mixture needs at least one member")
    k = len(outs)
    mu = torch.stack([o.mu.detach().double().cpu() for o in outs])  # [K, B, 3, S]
    sigma = torch.stack([o.sigma.detach().double().cpu() for o in outs])
    _, b, _, s = mu.shape
    last = torch.as_tensor(np.asarray(last_ohlcv, dtype=np.float64)) if not torch.is_tensor(last_ohlcv) \
        else last_ohlcv.detach().double().cpu()
    if last.shape != (b, 5):
        raise ValueError(f"last_ohlcv must be [B={b}, 5], got {tuple(last.shape)}")
    if n_samples < k:
        raise ValueError(f"n_samples must be >= the number of members ({k}), got {n_samples}")
    g = calibration if calibration is not None else (lambda w: w)
    log_c0 = last[:, CLOSE].log()[:, None]  # [B, 1]
    mean_cum = mu[:, :, _C].cumsum(-1)  # [K, B, S]
    sd_cum = sigma[:, :, _C].pow(2).cumsum(-1).sqrt()  # [K, B, S]
    member = torch.arange(n_samples) % k  # [M]
    eps = torch.randn(b, n_samples, s, generator=generator, dtype=torch.float64)
    sig_p, mean_p, sd_p = (t[member].transpose(0, 1) for t in (sigma[:, :, _C], mean_cum, sd_cum))  # [B, M, S]
    w = (sig_p * eps).cumsum(-1) / sd_p
    paths = log_c0[:, None] + mean_p + sd_p * g(w)  # [B, M, S]
    median = mean_cum + sd_cum * g(torch.zeros(1, 1, s, dtype=torch.float64))  # [K, B, S]

    a_prev = torch.cat([log_c0[None].expand(k, b, 1), (log_c0 + mean_cum)[:, :, :-1]], dim=2)  # [K, B, S]
    sd_prev = torch.cat([torch.zeros(k, b, 1, dtype=torch.float64), sd_cum[:, :, :-1]], dim=2)
    q_high = torch.stack([o.q_high.detach().double().cpu() for o in outs])
    q_low = torch.stack([o.q_low.detach().double().cpu() for o in outs])
    high = _quantile_path(a_prev, sd_prev, q_high, upper=True).mean(0)
    low = _quantile_path(a_prev, sd_prev, q_low, upper=False).mean(0)
    volume = (last[:, VOLUME, None] + 1.0) * mu[:, :, _V].cumsum(-1).mean(0).exp() - 1.0
    return Forecast(
        close=(log_c0 + median.mean(0)).exp().numpy(),
        close_samples=paths.exp().numpy(),
        uncertainty=np.full(b, np.nan) if uncertainty is None else np.asarray(uncertainty, dtype=np.float64),
        **_absent_to_nan(outs[0].channels, high=high.exp().numpy(), low=low.exp().numpy(),
                         volume=volume.clamp_min(0).numpy()),
    )
