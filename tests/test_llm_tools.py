"""ForecastTool with the real parser/renderer and a fake decoder: batching, refs, errors; with a real
decoder under the invariance harness: no look-ahead."""

from __future__ import annotations

import numpy as np
import pytest

from llm.special_tokens import FORECAST_TS_CLOSE, FORECAST_TS_OPEN
from llm.tools import ForecastTool, concat_windows, forecast_row
from stockr1.types import Forecast, Windows


def _windows(n: int = 4, s: int = 3) -> Windows:
    hist = np.ones((n, 6, 5))
    hist[:, -1, 3] = 100.0 * (1 + np.arange(n))
    return Windows(ticker=np.array([f"T{i}" for i in range(n)]), date=np.arange(n).astype("datetime64[D]").astype("datetime64[ns]"),
                   x=np.zeros((n, 5, 6), np.float32), y=np.zeros((n, 5, s), np.float32), hist=hist,
                   future=np.ones((n, s, 5)), split=np.array(["test"] * n))


class Decoder:
    """close path = last close * (1 + 0.1 * [direction == 'up']), uncertainty = row / 10."""

    tool_samples = 3

    def __init__(self, fail: bool = False):
        self.fail, self.seen = fail, []

    def forecast(self, windows, actions, n_samples, generator=None):
        if self.fail:
            raise RuntimeError("weights missing")
        self.seen.append((windows.last_close.tolist(), [a.direction if a else None for a in actions], n_samples))
        up = np.array([1.1 if a is not None and a.direction == "up" else 1.0 for a in actions])
        close = (windows.last_close * up)[:, None] * np.ones((1, 3))
        n = len(windows)
        return Forecast(close, np.repeat(close[:, None], 4, 1), close, close, close, np.arange(n) / 10)


def test_batch_call_parses_runs_decoder_per_row_and_renders():
    dec = Decoder()
    tool = ForecastTool(dec, _windows(), n_samples=5)
    res = tool.call_batch([3, 1], ['{"direction": "up"}', "direction: down"])
    assert dec.seen == [([400.0], ["up"], 5), ([200.0], ["down"], 5)]  # one row per call: batch-independent
    a, b = res
    assert a.error is None and a.payload.action.direction == "up" and a.payload.errors == []
    assert a.observation.startswith(f"\n{FORECAST_TS_OPEN}") and a.observation.endswith(f"{FORECAST_TS_CLOSE}\n")
    assert "440.00" in a.observation and "200.00" in b.observation
    assert a.payload.forecast.close.shape == (1, 3) and a.payload.forecast.close[0, 0] == pytest.approx(440.0)
    assert a.payload.uncertainty == 0.0 and b.payload.uncertainty == 0.0  # the fake's U is the row within its call


def test_one_row_windows_refs_and_single_call():
    w = _windows()
    tool = ForecastTool(Decoder(), None, n_samples=2)
    r = tool(w.select([2]), "direction: up")
    assert r.payload.forecast.close[0, 0] == pytest.approx(330.0)
    both = concat_windows([w.select([0]), w.select([3])])
    assert both.last_close.tolist() == [100.0, 400.0]
    with pytest.raises(ValueError, match="without `windows`"):
        tool.call_batch([0], ["direction: up"])


def test_malformed_action_runs_unconditioned_with_error_line():
    dec = Decoder()
    r = ForecastTool(dec, _windows())(0, "the market will do something")
    assert r.payload.action is None and r.payload.errors and "invalid forecast action" in r.error
    assert dec.seen[0][1] == [None] and r.payload.forecast.close[0, 0] == pytest.approx(100.0)
    assert f"{FORECAST_TS_OPEN}\nError: invalid forecast action" in r.observation


def test_decoder_failure_becomes_error_observation():
    (r,) = ForecastTool(Decoder(fail=True), _windows()).call_batch([0], ["direction: up"])
    assert r.payload.forecast is None and r.payload.action.direction == "up"
    assert "RuntimeError: weights missing" in r.error and "weights missing" in r.observation
    assert r.observation.strip().startswith(FORECAST_TS_OPEN)


def test_forecast_row_slices_every_field():
    f = Forecast(np.arange(6.0).reshape(2, 3), np.zeros((2, 4, 3)), np.ones((2, 3)), np.ones((2, 3)),
                 np.ones((2, 3)), np.array([0.1, 0.9]))
    r = forecast_row(f, 1)
    assert r.close.tolist() == [[3.0, 4.0, 5.0]] and r.uncertainty.tolist() == [0.9] and r.close_samples.shape == (1, 4, 3)


class NoisyDecoder:
    """Closes = last close * (1 + noise drawn from the generator it is given, else torch's global RNG)."""

    def forecast(self, windows, actions, n_samples, generator=None):
        import torch

        noise = torch.randn(len(windows), 3, generator=generator, dtype=torch.float64).numpy()
        close = windows.last_close[:, None] * (1 + 0.01 * noise)
        return Forecast(close, np.repeat(close[:, None], 4, 1), close, close, close, None)


def test_seeded_tool_repeats_observations_whatever_the_global_rng():
    import torch

    def observations(seed, global_seed):
        torch.manual_seed(global_seed)
        tool = ForecastTool(NoisyDecoder(), _windows(), n_samples=4, seed=seed)
        return [r.observation for r in tool.call_batch([0, 1], ['{"direction": "up"}'] * 2)]

    assert observations(3, 0) == observations(3, 1)  # the tool's own generator, not the global one
    assert observations(3, 0) != observations(4, 0)
    assert observations(None, 0) != observations(None, 1)  # seed=None: global RNG, as before


def test_observation_is_a_pure_function_of_window_and_action():
    """Same window + same action -> byte-identical text, whatever the batch, the call order or the
    global RNG; another action or another window draws other paths."""
    import torch

    tool = ForecastTool(NoisyDecoder(), _windows(), n_samples=4, seed=0)
    up, down = '{"direction": "up"}', '{"direction": "down"}'
    alone = tool.call_batch([2], [up])[0].observation
    torch.manual_seed(123)
    tool.call_batch([0, 1, 3], [down, up, up])  # advances nothing the next call depends on
    in_batch = tool.call_batch([1, 2, 0], [up, up, down])
    assert in_batch[1].observation == alone
    assert in_batch[0].observation != alone  # another window
    assert tool.call_batch([2], [down])[0].observation != alone  # another action
    assert ForecastTool(NoisyDecoder(), _windows(), n_samples=4, seed=0).call_batch([2], [up])[0].observation == alone


def test_tool_samples_come_from_the_decoder():
    class WithSamples(Decoder):
        tool_samples = 7

    dec = WithSamples()
    ForecastTool(dec, _windows()).call_batch([0], ['{"direction": "up"}'])
    assert dec.seen[0][2] == 7
    with pytest.raises(ValueError, match="tool_samples"):
        ForecastTool(NoisyDecoder(), _windows())


def test_real_tool_never_sees_the_future():
    """ForecastTool with a real (tiny, random) decoder and the real parser/renderer, under the data
    layer's invariance harness: replace every price after t, rebuild the windows, and the tool's
    observation and forecast for each decision day <= t must be byte-identical (by int ref and by a
    one-row Windows), while the labels of those days did change."""
    import torch

    from forecast_action.decoder import ActionConditionedDecoder
    from forecast_action.encoder import ActionEncoderConfig
    from stockr1.data import build_windows, load_source
    from stockr1.data.leakage import perturb_frames
    from stockr1.data.splits import SplitSpec
    from ts_encoder.config import TSEncoderConfig

    kw = {"lookback": 30, "horizon": 5, "split": SplitSpec(val_start="2031-01-01", test_start="2032-01-01")}
    frames = load_source("synthetic", n_tickers=2, n_days=120, seed=1)
    t = frames["SYN00"].index[80]
    base, pert = build_windows(frames, **kw), build_windows(perturb_frames(frames, t), **kw)
    rows = np.flatnonzero(base.date <= t.to_datetime64())[-4:]
    assert (base.date[rows] == pert.date[rows]).all() and not np.allclose(base.future[rows], pert.future[rows])
    torch.manual_seed(0)
    dec = ActionConditionedDecoder(TSEncoderConfig(lookback=30, horizon=5, d_model=16, n_layers=1, n_heads=2,
                                                   ffn_dim=32, d_llm=8, dropout=0.0),
                                   ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16), tool_samples=4)
    calls = ['{"direction": "up", "volatility_level": "high"}', "not an action", '{"end_change_pct": -2.0}',
             '{"direction": "down"}']

    def run(w):
        tool = ForecastTool(dec, w)
        rows = np.flatnonzero(w.date <= t.to_datetime64())[-4:]  # the same days in every build
        return tool.call_batch(list(rows), calls) + tool.call_batch([w.select([int(i)]) for i in rows], calls)

    for a, b in zip(run(base), run(pert), strict=True):
        assert a.observation == b.observation
        np.testing.assert_array_equal(a.payload.forecast.close_samples, b.payload.forecast.close_samples)
    # the same check fails on windows with a one-day look-ahead (build_windows' leak_days hook)
    leaky, leaky_pert = (build_windows(f, **kw, leak_days=1) for f in (frames, perturb_frames(frames, t)))
    assert [r.observation for r in run(leaky)] != [r.observation for r in run(leaky_pert)]
