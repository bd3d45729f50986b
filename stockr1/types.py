"""Shared types: the contract between the data layer, the models, the rewards and the benchmarks.

Conventions
- Channels are always in the order ``CHANNELS = (open, high, low, close, volume)``.
- ``N`` windows, lookback ``L`` (default 90), horizon ``S`` (default 10), ``M`` sample paths.
- A window's decision time ``t`` is the last day of its history. Everything in ``x``, ``hist`` and
  ``context`` is stamped at or before ``t``; ``y`` and ``future`` are labels and are never an input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CHANNELS: tuple[str, ...] = ("open", "high", "low", "close", "volume")
OPEN, HIGH, LOW, CLOSE, VOLUME = range(5)
SPLITS: tuple[str, ...] = ("train", "val", "test")
# The price frames of ``Windows.frame`` (stockr1.data.price_frame): as traded on t | 100 = the close of t
AS_OF_T, REBASED = "as_of_t", "rebased"
PRICE_FRAMES: tuple[str, ...] = (AS_OF_T, REBASED)


@dataclass(frozen=True)
class Windows:
    """N point-in-time samples.

    ticker:  [N] str
    date:    [N] datetime64[ns], decision day t (last day of the history)
    x:       [N, 5, L] float32 log-return channels for days t-L+1..t
             (r^N = ln(N_d / C_{d-1}) for O,H,L,C; r^V = ln((V_d+1)/(V_{d-1}+1)))
    y:       [N, 5, S] float32 the same channels for days t+1..t+S (label only)
    hist:    [N, L, 5] float64 raw OHLCV for days t-L+1..t, adjusted as of t
    future:  [N, S, 5] float64 raw OHLCV for days t+1..t+S, on the same adjustment basis as hist
    split:   [N] str in SPLITS
    context: [N] str, the serialized text context T_t ("" when the source has none)
    frame:   [N] str, the price frame of hist/future (``stockr1.data.price_frame``): "as_of_t" (prices as
             traded on t) or "rebased" (100 = the close of t, for back-adjusted sources); every price
             a prompt, action or trajectory of the window shows is in it. Empty = all "as_of_t".
    channels: [N, 5] bool, True where the channel is observed (default: all True). A series may lack
             open/high/low/volume (close-only stocks beside OHLCV indices; close is always observed);
             an absent channel holds NaN in x, y, hist and future - never zeros, never imputed - so a
             consumer that ignores this mask fails loudly instead of learning from made-up numbers
    """

    ticker: np.ndarray
    date: np.ndarray
    x: np.ndarray
    y: np.ndarray
    hist: np.ndarray
    future: np.ndarray
    split: np.ndarray
    context: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    channels: np.ndarray | None = None
    frame: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))

    def __post_init__(self) -> None:
        n = len(self)
        ch = np.ones((n, len(CHANNELS)), dtype=bool) if self.channels is None else np.asarray(self.channels)
        if ch.shape != (n, len(CHANNELS)) or ch.dtype != bool:
            raise ValueError(f"Windows.channels must be bool [N={n}, {len(CHANNELS)}], got {ch.dtype} {ch.shape}")
        if n and not ch[:, CLOSE].all():
            raise ValueError("Windows.channels: the close is required in every window")
        object.__setattr__(self, "channels", ch)
        if len(self.frame) == 0:  # constructors that predate the price frame: every price as traded on t
            object.__setattr__(self, "frame", np.full(n, AS_OF_T, dtype=object))
        elif len(self.frame) != n:
            raise ValueError(f"Windows.frame has {len(self.frame)} entries for {n} windows")

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def last_close(self) -> np.ndarray:
        """[N] close at the decision day t."""
        return self.hist[:, -1, CLOSE]

    @property
    def last_volume(self) -> np.ndarray:
        """[N] volume at the decision day t."""
        return self.hist[:, -1, VOLUME]

    def select(self, mask_or_index: np.ndarray) -> Windows:
        """A subset (boolean mask or integer index), same order."""
        idx = np.asarray(mask_or_index)
        ctx = self.context[idx] if len(self.context) == len(self) else self.context
        return Windows(
            ticker=self.ticker[idx],
            date=self.date[idx],
            x=self.x[idx],
            y=self.y[idx],
            hist=self.hist[idx],
            future=self.future[idx],
            split=self.split[idx],
            context=ctx,
            frame=self.frame[idx],
            channels=self.channels[idx],
        )

    def of_tickers(self, tickers: list[str] | tuple[str, ...], where: str = "tickers") -> Windows:
        """The windows of ``tickers`` (same order); ValueError naming ``where`` and any ticker with none."""
        missing = sorted(set(tickers) - set(np.asarray(self.ticker).astype(str).tolist()))
        if missing:
            raise ValueError(f"{where}: no windows for {missing}; the data has {sorted(set(self.ticker.tolist()))}")
        return self.select(np.isin(np.asarray(self.ticker).astype(str), list(tickers)))

    def split_of(self, name: str) -> Windows:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")
        return self.select(self.split == name)


@dataclass(frozen=True)
class TrainWindows(Windows):
    """Windows whose every row is in the train split: the only argument a fitted statistic accepts.

    Why a type and not a filter inside each fit: a fit that filtered would silently accept whatever a
    call site handed it, so a call site that handed it val/test (or relabelled rows) could not be told
    apart from a correct one. Here every fit (action-bin tertiles, input scalers, the TS module's and
    the decoder's uncertainty normalisers, Trading-R1 label thresholds) calls ``require_train`` and
    raises on anything that is not a ``TrainWindows``; the one way to get one is ``train_only``, and
    its constructor refuses a row of another split. Grep ``train_only(`` to see every call site."""

    def __post_init__(self) -> None:
        super().__post_init__()
        bad = sorted(set(np.asarray(self.split).tolist()) - {SPLITS[0]})
        if bad:
            raise ValueError(f"TrainWindows holds train rows only, got rows of {bad}")


def train_only(windows: Windows) -> TrainWindows:
    """The train rows of ``windows`` (same order) as a ``TrainWindows``: what every fit receives."""
    if isinstance(windows, TrainWindows):
        return windows
    t = windows.split_of(SPLITS[0])
    return TrainWindows(ticker=t.ticker, date=t.date, x=t.x, y=t.y, hist=t.hist, future=t.future,
                        split=t.split, context=t.context, frame=t.frame, channels=t.channels)


def require_train(windows: object, fit: str) -> TrainWindows:
    """``windows`` if it is a ``TrainWindows``; else TypeError naming the ``fit`` that was handed it.

    Called first by every fitted statistic, so a call site that passes a plain ``Windows`` (which
    may hold val/test rows) fails loudly instead of fitting on more than train."""
    if not isinstance(windows, TrainWindows):
        raise TypeError(f"{fit} fits on the train split only: pass train_only(windows), got {type(windows).__name__}")
    return windows


@dataclass(frozen=True)
class Forecast:
    """A predictive distribution of the next S days for N windows, in price space.

    Every forecaster (our encoder, the action-conditioned decoder, each baseline) returns one, so
    every benchmark and reward scores them with the same code in ``stockr1.metrics``.

    close:         [N, S] point forecast (mean path) of the close
    close_samples: [N, M, S] sampled close paths; CRPS and the close intervals use these
    high:          [N, S] forecast of the 0.95 quantile of the high
    low:           [N, S] forecast of the 0.05 quantile of the low
    volume:        [N, S] point forecast of the volume
    uncertainty:   [N] normalised uncertainty in [0, 1] (NaN where the model has none)
    high / low / volume are NaN in the rows whose window lacks that channel (``Windows.channels``).
    """

    close: np.ndarray
    close_samples: np.ndarray
    high: np.ndarray
    low: np.ndarray
    volume: np.ndarray
    uncertainty: np.ndarray | None = None

    def __post_init__(self) -> None:
        n, s = self.close.shape
        if self.close_samples.ndim != 3 or self.close_samples.shape[0] != n or self.close_samples.shape[2] != s:
            raise ValueError(f"close_samples must be [N={n}, M, S={s}], got {self.close_samples.shape}")
        for name in ("high", "low", "volume"):
            if getattr(self, name).shape != (n, s):
                raise ValueError(f"{name} must be [N={n}, S={s}], got {getattr(self, name).shape}")
