"""Rollout engine with a scripted model: segments, masks, tool calls, malformed/missing actions,
truncation, batching; and with a real tiny policy: sampled log-probs match `token_logprobs`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from llm.logprobs import pad_sequences, token_logprobs
from llm.policy import Policy, PolicyConfig
from llm.rollout import RolloutEngine, ToolResult, encode_segments
from llm.scripted import ScriptedPolicy
from llm.special_tokens import FORECAST_TS_CLOSE, FORECAST_TS_OPEN, TOOL_ONLY_TOKENS, ts_placeholders
from llm.tokenizer import chat_prompt
from llm.tools import ForecastTool
from stockr1.types import Forecast

ACT = '<forecast_action>{"direction": "up", "end_change_pct": 2.0}</forecast_action>'
BAD = "<forecast_action>gibberish</forecast_action>"


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    """The session tokenizer (tests/conftest.py), trained on this file's ACT/BAD protocol text."""
    return tiny_tokenizer


class FakeDecoder:
    """Records its calls; forecast close = row's last close * (1 + 0.01 * (action is not None))."""

    def __init__(self):
        self.calls = []

    def forecast(self, windows, actions, n_samples, generator=None):
        self.calls.append((windows, list(actions), n_samples))
        n, s = len(windows), 3
        base = windows.hist[:, -1, 3][:, None] * np.ones((n, s))
        close = base * np.array([[1.01 if a is not None else 1.0] for a in actions])
        return Forecast(close, np.repeat(close[:, None], 2, 1), close * 1.02, close * 0.98, close, np.full(n, 0.25))


@dataclass
class FakeWindows:
    hist: np.ndarray

    def __len__(self):
        return len(self.hist)

    def select(self, idx):
        return FakeWindows(self.hist[idx])


def _render(fc, i, error=None):
    head = f"error: {error} " if error else ""
    return f"{FORECAST_TS_OPEN}{head}close {fc.close[i, -1]:.1f}{FORECAST_TS_CLOSE}"


def _tool(decoder=None):
    hist = np.zeros((4, 5, 5))
    hist[:, -1, 3] = [100.0, 200.0, 300.0, 400.0]
    return ForecastTool(decoder or FakeDecoder(), FakeWindows(hist), n_samples=7, render=_render)


def _engine(tok, scripts, tool, **kw):
    return RolloutEngine(ScriptedPolicy(tok, scripts), tok, [tool], **{"max_new_tokens": 64, "temperature": 1.0, **kw})


def _ids(tok, text):
    return tok(text, add_special_tokens=False).input_ids


def test_full_protocol_segments_masks_and_tool_payload(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    seg0, seg1 = "Reasoning: trend looks up. " + ACT, " final answer <answer>yes</answer>"
    tool = _tool()
    (r,) = _engine(tok, {p: [seg0, seg1]}, tool).generate([p], sample_refs=[2])
    assert [s.kind for s in r.segments] == ["prompt", "model", "tool", "model"]
    assert r.segments[1].text == seg0 and r.segments[3].text == seg1
    obs = r.segments[2].text
    assert obs == f"\n{FORECAST_TS_OPEN}close 303.0{FORECAST_TS_CLOSE}\n"  # row 2, conditioned (x1.01)
    expect_ids = _ids(tok, p) + _ids(tok, seg0) + _ids(tok, obs) + _ids(tok, seg1)
    expect_mask = [0] * len(_ids(tok, p)) + [1] * len(_ids(tok, seg0)) + [0] * len(_ids(tok, obs)) + [1] * len(_ids(tok, seg1))
    assert r.token_ids == expect_ids and r.gen_mask == expect_mask
    assert r.prompt_len == len(_ids(tok, p)) and r.completion == seg0 + obs + seg1
    assert r.finish_reason == "answer" and r.answer == "yes"
    assert r.action.direction == "up" and r.action.end_change_pct == 2.0 and r.action_errors == []
    assert r.forecast.close.shape == (1, 3) and r.forecast.close[0, -1] == pytest.approx(303.0)
    assert r.uncertainty == 0.25
    (windows, actions, n_samples), = tool.decoder.calls
    assert windows.hist[0, -1, 3] == 300.0 and actions[0].direction == "up" and n_samples == 7
    assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.gen_mask, strict=True) if m == 0)
    assert all(lp > -1e-3 for lp, m in zip(r.logprobs, r.gen_mask, strict=True) if m == 1)  # scripted = certain
    # SFT helper tokenizes segment by segment exactly like the engine
    assert encode_segments(tok, [(p, False), (seg0, True), (obs, False), (seg1, True)]) == (expect_ids, expect_mask)


def test_malformed_action_gets_error_observation_and_continues(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    tool = _tool()
    (r,) = _engine(tok, {p: ["Reasoning: " + BAD, " final answer <answer>yes</answer>"]}, tool).generate([p])
    assert r.action is None and r.action_errors and r.action_errors[0].code == "no_fields"
    assert "error: invalid forecast action" in r.segments[2].text
    assert tool.decoder.calls[0][1] == [None]  # decoder ran unconditioned
    assert r.forecast.close[0, -1] == pytest.approx(100.0)
    assert r.finish_reason == "answer" and r.answer == "yes"


def test_missing_action_goes_straight_to_answer(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    tool = _tool()
    (r,) = _engine(tok, {p: ["trend looks up. <answer>yes</answer>"]}, tool).generate([p])
    assert [s.kind for s in r.segments] == ["prompt", "model"] and r.tool_calls == []
    assert r.action is None and r.action_errors == ["no_action"] and r.forecast is None
    assert r.finish_reason == "answer" and r.answer == "yes" and tool.decoder.calls == []
    assert r.gen_mask == [0] * r.prompt_len + [1] * (len(r.token_ids) - r.prompt_len)


def test_truncation_at_token_limit_counts_model_tokens_only(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    seg0 = "Reasoning: " + ACT
    n0 = len(_ids(tok, seg0))
    # after the tool the script is empty, so the model writes filler until the budget is spent
    (r,) = _engine(tok, {p: [seg0, ""]}, _tool(), max_new_tokens=n0 + 5).generate([p])
    assert r.finish_reason == "length" and r.answer is None
    assert r.n_generated == n0 + 5 and r.segments[-1].text == " x" * 5
    assert r.action is not None  # the action before truncation is kept
    # budget exhausted before the action closes: no tool call at all
    (r2,) = _engine(tok, {p: [seg0]}, _tool(), max_new_tokens=3).generate([p])
    assert r2.finish_reason == "length" and r2.tool_calls == [] and r2.n_generated == 3
    # without stopping at </answer> the model runs on to its budget; the answer is still read
    (r3,) = _engine(tok, {p: ["<answer>yes</answer>"]}, _tool(), max_new_tokens=12, stop_at_answer=False).generate([p])
    assert r3.finish_reason == "length" and r3.answer == "yes" and r3.n_generated == 12


def test_batch_with_groups_keeps_rows_apart(tok):
    p1, p2 = chat_prompt(tok, "Question: will it rise?"), chat_prompt(tok, "day 3: will it rise? trend up")
    tool = _tool()
    eng = _engine(tok, {p1: ["Reasoning: " + ACT, " <answer>yes</answer>"], p2: ["<answer>no</answer>"]}, tool)
    rs = eng.generate([p1, p2], sample_refs=[3, 0], num_return_sequences=2)
    assert [(r.prompt_index, r.sample_index) for r in rs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r.answer for r in rs] == ["yes", "yes", "no", "no"]
    assert [len(r.tool_calls) for r in rs] == [1, 1, 0, 0]
    assert [r.sample_ref for r in rs] == [3, 3, 0, 0]
    # one batched tool call for both rows; the tool runs the decoder one row at a time (batch-independent)
    assert [c[0].hist[:, -1, 3].tolist() for c in tool.decoder.calls] == [[400.0], [400.0]]
    assert rs[0].token_ids == rs[1].token_ids  # scripted: identical samples, no padding leaks


def test_soft_tokens_follow_their_rows_into_every_prefill(tok):
    p1, p2 = chat_prompt(tok, "Question: will it rise?"), chat_prompt(tok, "day 3: will it rise? trend up")
    pol = ScriptedPolicy(tok, {p1: ["<answer>no</answer>"], p2: ["Reasoning: " + ACT, " <answer>yes</answer>"]})
    ts = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    rs = RolloutEngine(pol, tok, [_tool()], max_new_tokens=64).generate([p1, p2], ts_tokens=ts, num_return_sequences=2)
    assert [r.answer for r in rs] == ["no", "no", "yes", "yes"]
    first, second = pol.prefill_ts
    assert torch.equal(first, ts.repeat_interleave(2, 0))
    assert torch.equal(second, ts[[1, 1]])  # after the tool call only prompt 2's rows, with their h_ts


def test_tool_call_limit_and_failing_tool(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    tool = _tool()
    seg0 = "Reasoning: " + ACT + " again " + ACT + " <answer>yes</answer>"
    (r,) = _engine(tok, {p: ["Reasoning: " + ACT, " again " + ACT + " <answer>yes</answer>"]}, tool).generate([p])
    assert len(r.tool_calls) == 1 and r.answer == "yes"  # second close tag is ordinary text
    assert seg0 != r.completion and r.completion.endswith(" again " + ACT + " <answer>yes</answer>")

    class Broken:
        name, open_tag, close_tag = "forecast", "<forecast_action>", "</forecast_action>"

        def __call__(self, ref, text):
            raise RuntimeError("boom")

    (r,) = RolloutEngine(ScriptedPolicy(tok, {p: ["Reasoning: " + ACT, " <answer>no</answer>"]}), tok, [Broken()],
                         max_new_tokens=64).generate([p])
    assert r.tool_calls[0].result.error == "RuntimeError: boom" and "boom" in r.segments[2].text
    assert r.answer == "no" and r.finish_reason == "answer"


def test_custom_tool_protocol(tok):
    """A non-forecast tool (AlphaQuanter-style) registers on the same engine."""

    class Echo:
        name, open_tag, close_tag = "echo", "<answer>", "</forecast_action>"

        def __call__(self, ref, text):
            return ToolResult(f"[{ref}:{text.strip()}]", payload=len(text))

    p = chat_prompt(tok, "Question: will it rise?")
    (r,) = RolloutEngine(ScriptedPolicy(tok, {p: ["<answer>yes</forecast_action>", ""]}), tok, [Echo()],
                         max_new_tokens=20).generate([p], sample_refs=["r0"])
    assert r.tool_calls[0].call_text == "yes" and r.segments[2].text == "[r0:yes]" and r.segments[2].kind == "tool"
    assert r.action_errors == ["no_action"]
    with pytest.raises(ValueError, match="share the close tag"):
        RolloutEngine(ScriptedPolicy(tok, {}), tok, [Echo(), _tool()])
    with pytest.raises(ValueError, match="must be a single token"):
        RolloutEngine(ScriptedPolicy(tok, {}), tok, [type("T", (), {"name": "t", "open_tag": "<a>", "close_tag": "</tool xyz>"})()])


def test_real_policy_logprobs_match_token_logprobs(tok):
    """KV-cache sampling and the full forward agree: the engine's recorded log-probs equal
    `token_logprobs` on the finished sequences (with soft tokens, left padding, tool-only bans)."""
    torch.manual_seed(0)
    pol = Policy(PolicyConfig(d_ts=8, lora_r=0), tokenizer=tok)
    prompts = [chat_prompt(tok, "Question: will it rise? " + ts_placeholders(3)),
               chat_prompt(tok, "day 3 " + ts_placeholders(3))]
    ts = torch.randn(2, 3, 8)
    eng = RolloutEngine(pol, tok, [_tool()], max_new_tokens=12, temperature=0.9, seed=1)
    rs = eng.generate(prompts, ts_tokens=ts, num_return_sequences=2)
    banned = {tok.convert_tokens_to_ids(t) for t in TOOL_ONLY_TOKENS}
    for r in rs:
        assert not banned & {t for t, m in zip(r.token_ids, r.gen_mask, strict=True) if m}
        assert 0 < r.n_generated <= 12
    ids, att, mask = pad_sequences([r.token_ids for r in rs], tok.pad_token_id, [r.gen_mask for r in rs], side="right")
    lp = token_logprobs(pol, ids, att, ts.repeat_interleave(2, 0), temperature=0.9, banned_token_ids=eng.banned_token_ids)
    rec, _, _ = pad_sequences([r.token_ids for r in rs], 0, [r.gen_mask for r in rs])
    rec_lp = torch.zeros_like(lp)
    for i, r in enumerate(rs):
        rec_lp[i, : len(r.logprobs)] = torch.tensor(r.logprobs)
    torch.testing.assert_close(lp * mask, rec_lp * mask, atol=2e-4, rtol=1e-4)
    # same seed -> same rollouts; different seed -> (almost surely) different
    again = RolloutEngine(pol, tok, [_tool()], max_new_tokens=12, temperature=0.9, seed=1).generate(
        prompts, ts_tokens=ts, num_return_sequences=2)
    assert [r.token_ids for r in again] == [r.token_ids for r in rs]


def test_temperature_and_top_p_shape_the_sampling(tok):
    p = chat_prompt(tok, "Question: will it rise?")
    script = {p: ["trend looks up. <answer>yes</answer>"]}

    def run(**kw):
        pol = ScriptedPolicy(tok, script, confidence=3.0)  # scripted token has ~6% mass at T=1 over ~360 tokens
        return RolloutEngine(pol, tok, [], max_new_tokens=12, seed=0, **kw).generate([p], num_return_sequences=4)

    for r in run(temperature=0.0) + run(temperature=1.0, top_p=0.05):  # greedy / nucleus of one token
        assert r.answer == "yes" and r.completion == script[p][0]
    wild = run(temperature=1.0)
    assert all(r.completion != script[p][0] for r in wild)  # full distribution: off script
    assert all(lp < -1.0 for r in wild for lp, m in zip(r.logprobs, r.gen_mask, strict=True) if m)
