"""Tool-reader baselines (llm.qa.tool_reader): answers from sample paths by hand, an oracle forecaster
answers every question right, and each window is forecast once from its own row only."""

from __future__ import annotations

import numpy as np

from llm.qa import TEMPLATES_BY_KEY, QAConfig, QAGenerator, is_correct
from llm.qa.tool_reader import ToolReader, read_answer, sample_paths
from stockr1.types import CLOSE, HIGH, LOW, VOLUME, Forecast, Windows
from tests.test_qa_generator import context_fn, fixed_windows, make_windows


def _forecast(close_samples: np.ndarray, high: np.ndarray, low: np.ndarray, volume: np.ndarray) -> Forecast:
    """[N, M, S] sampled closes and [N, S] high / low / volume."""
    return Forecast(close=close_samples.mean(1), close_samples=close_samples, high=high, low=low, volume=volume)


def _oracle(w: Windows) -> Forecast:
    """Every sample path is the realised future: a reader of it must answer like the grader."""
    f = w.future
    return _forecast(np.repeat(f[:, None, :, CLOSE], 3, axis=1), f[:, :, HIGH], f[:, :, LOW], f[:, :, VOLUME])


def test_majority_and_median_over_sample_paths_by_hand() -> None:
    w = fixed_windows()
    gen = QAGenerator(w, context_fn)
    fut = w.future[0, :, CLOSE]  # 99 97 101 104 ... from today's close 100
    flat = np.full_like(fut, 100.0)
    down = 100.0 * np.array([0.99, 0.98, 0.98, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97])
    samples = np.stack([fut, fut, flat])[None]  # [1, 3, 10]
    vol = w.future[:1, :, VOLUME]
    fc = _forecast(samples, samples.max(1), samples.min(1), vol)
    drop = gen.make_item(0, TEMPLATES_BY_KEY["ev_drop_paper"], {"x": 3, "k": 2}, "test", "a")
    # two paths dip to 97 (< 98: Yes), the flat one does not: the majority says Yes
    assert read_answer(drop, w, sample_paths(fc, 0)) == "Yes"
    pct = gen.make_item(0, TEMPLATES_BY_KEY["fq_pct_change_paper"], {"x": 3}, "test", "b")
    # three-day returns 1.00, 1.00, 0.00 -> median 1.00; with the falling path instead of one rise: 1.00, 0.00, -2.00
    assert read_answer(pct, w, sample_paths(fc, 0)) == "1.00"
    fc2 = _forecast(np.stack([fut, flat, down])[None], samples.max(1), samples.min(1), vol)
    assert read_answer(pct, w, sample_paths(fc2, 0)) == "0.00"
    assert read_answer(drop, w, sample_paths(fc2, 0)) in {"Yes", "No"}


def test_an_oracle_forecast_answers_every_question_right() -> None:
    w = make_windows()
    items, _ = QAGenerator(w).generate(QAConfig(n_train=0, n_val=0, n_test=120))
    assert len(items) == 120 and len({it.template for it in items}) > 10
    reader = ToolReader(_oracle, w, items)
    wrong = [(it.template, it.answer, reader.answer(it)) for it in items if not is_correct(it, reader.answer(it))]
    assert not wrong, wrong[:5]


def test_each_window_is_forecast_once_from_its_own_rows() -> None:
    w = make_windows()
    items, _ = QAGenerator(w).generate(QAConfig(n_train=0, n_val=0, n_test=60))
    seen: list[Windows] = []

    def forecaster(sub: Windows) -> Forecast:
        seen.append(sub)
        return _oracle(sub)

    reader = ToolReader(forecaster, w, items)
    assert len(seen) == 1
    wanted = sorted({it.window for it in items})
    np.testing.assert_array_equal(seen[0].hist, w.hist[wanted])  # exactly the items' windows, in order
    # answers come from the item's own row: permuting the windows' futures changes them
    perm = np.roll(np.arange(len(w)), 7)
    shuffled = Windows(w.ticker, w.date, w.x, w.y, w.hist, w.future[perm], w.split, w.context)
    other = ToolReader(_oracle, shuffled, items)
    assert any(other.answer(it) != reader.answer(it) for it in items)


def test_the_ts_reader_takes_a_single_saved_encoder_as_shipped() -> None:
    """``--tool-reader-ts release/smollm2-135m/ts``: a plain saved encoder (not an ensemble) is read too."""
    from pathlib import Path

    from llm.qa.tool_reader import ensemble_forecaster
    from stockr1.data import sample_windows

    w = sample_windows().select(np.arange(3))
    fc = ensemble_forecaster(str(Path(__file__).resolve().parents[1] / "release" / "tiny" / "ts"), n_samples=5)(w)
    assert fc.close_samples.shape == (3, 5, w.future.shape[1]) and np.isfinite(fc.close_samples).all()
