"""``stockr1 ask``: the Stock-R1 path on a CSV the project never saw (``llm.ask``).

- the decision window is the frame's last rows, with nothing after it; rows before the look-back do
  not change it; a frame too short is a clear error;
- a policy that writes a valid action gets a decoded trajectory dated on the trading days after the
  last row (weekdays when the exchange is unknown, the exchange's sessions when declared; named), and its
  answer; a policy that writes garbage gets a scored error, not a crash;
- the command end to end on a saved run: JSON out, exit 0; a missing run is one line, exit 2.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.encoder import ActionEncoderConfig
from forecast_action.forecaster import as_frames
from llm.ask import ask, ask_context, ask_prompt, ask_window, question_item
from llm.scripted import ScriptedPolicy
from ts_encoder.config import TSEncoderConfig

ROOT = Path(__file__).resolve().parents[1]
TS = TSEncoderConfig(lookback=60, horizon=5, patch_len=10, d_model=16, n_layers=1, n_heads=2, ffn_dim=32,
                     dropout=0.0, d_llm=16, cond_dim=8)
ACT = '<forecast_action>{"direction": "up", "volatility_level": "low"}</forecast_action>'


def _csv_frame(n: int = 200, seed: int = 3, end: str = "2024-03-08") -> pd.DataFrame:
    """A random-walk OHLCV series the project never saw, ending on a Friday."""
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range(end=end, periods=n)
    close = 50 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = close * np.exp(rng.normal(0, 0.003, n))
    return pd.DataFrame({"Date": dates, "Open": open_, "High": np.maximum(open_, close) * 1.004,
                         "Low": np.minimum(open_, close) * 0.996, "Close": close,
                         "Volume": rng.integers(1_000, 5_000, n)})


@pytest.fixture(scope="module")
def decoder() -> ActionConditionedDecoder:
    from stockr1.types import train_only

    torch.manual_seed(0)
    dec = ActionConditionedDecoder(TS, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16), tool_samples=32)
    from llm.tools import concat_windows

    frame = as_frames(_csv_frame(400, seed=9))[0]["series"]  # another series: its own train windows
    w = concat_windows([ask_window(frame.iloc[:end], TS.lookback, TS.horizon, "fit") for end in range(100, 400, 15)])
    dec.fit_uncertainty(train_only(dataclasses.replace(w, split=np.full(len(w), "train"))))
    return dec.eval()


def test_the_window_is_the_last_rows_and_nothing_after_them() -> None:
    frames, _ = as_frames(_csv_frame())
    frame = frames["series"]
    w = ask_window(frame, TS.lookback, TS.horizon, "series")
    assert w.date[0] == np.datetime64(frame.index[-1]) and w.hist[0, -1, 3] == pytest.approx(frame["close"].iloc[-1])
    assert np.isnan(w.future).all() and np.isnan(w.y).all()  # nothing after the last row exists
    older = frame.copy()
    older.iloc[: len(frame) - TS.lookback - 1, :4] *= 1.7  # rows before the look-back (and its previous close)
    np.testing.assert_array_equal(ask_window(older, TS.lookback, TS.horizon, "series").x, w.x)
    with pytest.raises(ValueError, match="series: 40 rows, the policy's encoder needs at least 61"):
        ask_window(frame.iloc[-40:], TS.lookback, TS.horizon, "series")


def test_question_item_refuses_what_the_prompt_cannot_state() -> None:
    with pytest.raises(ValueError, match="question is empty"):
        question_item("  ", "X", "2024-03-08")
    with pytest.raises(ValueError, match="choices go with --answer-type choice"):
        question_item("Which?", "X", "2024-03-08", "choice")
    with pytest.raises(ValueError, match="answer type must be one of"):
        question_item("Which?", "X", "2024-03-08", "free")


def test_a_valid_action_is_decoded_into_dated_days_after_the_last_row(decoder, tiny_tokenizer) -> None:
    frames, _ = as_frames(_csv_frame())
    tok = tiny_tokenizer  # the policy is scripted: any tokenizer that holds the protocol tokens
    q = "Will the close be higher in 5 days?"
    context = ask_context(frames["series"], "series")
    last = frames["series"]["close"].iloc[-1]
    # the prompt states the price frame and the last close, as every training prompt does
    assert context.splitlines()[2:4] == ["Prices: as traded on 2024-03-08", context.splitlines()[3]]
    assert context.splitlines()[3].startswith(f"Last close: {last:.2f}; 5-session change: ")
    prompt = ask_prompt(tok, question_item(q, "series", "2024-03-08"), context, TS.n_tokens)
    pol = ScriptedPolicy(tok, {prompt: ["Trend looks up. " + ACT, " So yes. <answer>Yes</answer>"]})
    (a,) = ask(pol, decoder, frames, q, tokenizer=tok)
    assert a.decision_date == "2024-03-08" and a.question == q
    assert a.action == {"direction": "up", "volatility_level": "low"} and a.answer == "Yes"
    assert a.rationale == "Trend looks up. " and a.uncertainty is not None and 0.0 <= a.uncertainty <= 1.0
    assert [r["date"] for r in a.trajectory] == ["2024-03-11", "2024-03-12", "2024-03-13", "2024-03-14", "2024-03-15"]
    for r in a.trajectory:
        assert r["close_q0.05"] <= r["close_q0.5"] <= r["close_q0.95"] and r["close_mean"] > 0
    assert "Answer: Yes" in a.render() and "2024-03-15" in a.render()
    assert a.price_frame == "as traded on 2024-03-08" and a.last_close == pytest.approx(last)
    assert a.calendar == "weekdays (exchange unknown: pass --exchange MIC)" and a.calendar in a.render()

    bad = ScriptedPolicy(tok, {prompt: ["Hmm. <forecast_action>gibberish</forecast_action>", " <answer>No</answer>"]})
    (b,) = ask(bad, decoder, frames, q, tokenizer=tok)
    assert b.action is None and b.action_errors and b.answer == "No"  # a scored error, not a crash


def test_the_trajectory_of_a_declared_nyse_series_skips_good_friday(decoder, tiny_tokenizer) -> None:
    frames, _ = as_frames(_csv_frame(end="2024-03-22"))  # the Friday before Good Friday 2024-03-29
    tok, q = tiny_tokenizer, "Will the close be higher in 5 days?"
    prompt = ask_prompt(tok, question_item(q, "series", "2024-03-22"), ask_context(frames["series"], "series"), TS.n_tokens)
    pol = ScriptedPolicy(tok, {prompt: ["Up. " + ACT, " <answer>Yes</answer>"]})
    (a,) = ask(pol, decoder, frames, q, tokenizer=tok, declared={"series": "XNYS"})
    assert [r["date"] for r in a.trajectory] == ["2024-03-25", "2024-03-26", "2024-03-27", "2024-03-28", "2024-04-01"]
    assert a.calendar == "XNYS" and a.to_dict()["calendar"] == "XNYS" and "dated on XNYS" in a.render()


@pytest.mark.slow
def test_stockr1_ask_on_a_saved_run_and_a_new_csv(decoder, tmp_path, tiny_policy) -> None:
    torch.manual_seed(0)
    run = tmp_path / "run"
    tiny_policy(d_ts=TS.d_llm).save_pretrained(run / "policy")
    decoder.save_pretrained(run / "decoder")
    csv = tmp_path / "mine.csv"
    _csv_frame().to_csv(csv, index=False)
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "stockr1.cli", "ask", "--policy", str(run), "--data", str(csv), "--question",
           "Will the close be higher in 5 days?", "--max-new-tokens", "24", "--json"]
    proc = subprocess.run([*cmd, "--out", str(tmp_path / "example")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (out,) = json.loads(proc.stdout)
    # --out writes the example a README shows: the command, then the answer as printed, and the JSON
    assert json.loads((tmp_path / "example" / "answer.json").read_text()) == [out]
    example = (tmp_path / "example" / "README.md").read_text()
    assert "Generated by `stockr1 ask --policy" in example and "Will the close be higher in 5 days?" in example
    assert out["ticker"] == "mine" and out["decision_date"] == "2024-03-08"
    assert out["question"] == "Will the close be higher in 5 days?" and isinstance(out["completion"], str)
    assert (out["action"] is None) == bool(out["action_errors"])  # a random policy: scored, not a crash
    assert out["price_frame"] == "as traded on 2024-03-08"
    assert out["last_close"] == pytest.approx(_csv_frame()["Close"].iloc[-1])
    assert out["calendar"] == "weekdays (exchange unknown: pass --exchange MIC)"
    missing = subprocess.run(cmd[:4] + ["--policy", str(tmp_path / "nope")] + cmd[6:], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope is not a directory" in missing.stderr
