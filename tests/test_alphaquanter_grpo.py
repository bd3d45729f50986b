"""A GRPO step of AlphaQuanter on a tiny policy with the data tool in the shared rollout engine."""

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import AddedToken

from llm.policy import Policy, PolicyConfig
from llm.tokenizer import train_tokenizer
from rl.methods import reward_functions, run_grpo
from rl.methods.alphaquanter.env import episode_prompt
from rl.methods.alphaquanter.tools import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
    AlphaQuanterTool,
)
from rl.methods.text_sft import TextSFTConfig, text_sft
from stockr1.data.context import PointInTimeStore

CALL = '<think>check the news</think><tool_call>{"name": "get_news", "arguments": {"n": 1}}</tool_call>'
DIRECT = "<think>trend is up</think><answer>BUY</answer>"


@pytest.mark.slow
def test_grpo_step_with_tool_changes_parameters(tmp_path):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    idx = pd.bdate_range("2020-01-01", periods=60, name="date")
    c = np.linspace(100, 110, 60)
    df = pd.DataFrame({"open": c, "high": c, "low": c, "close": c, "volume": np.full(60, 1e6)}, idx)
    news = pd.DataFrame({"ticker": ["AAA"], "time": [pd.Timestamp("2020-02-03 10:00")], "title": ["AAA beats"],
                         "summary": [""], "sentiment": [0.5]})
    store = PointInTimeStore({"AAA": df}, news=news)
    refs = [("AAA", idx[40])] * 4  # one prompt, two targets: SFT learns a mixture to sample from
    prompts = [episode_prompt(tk, t, 2) for tk, t in refs]
    targets = [CALL, DIRECT, CALL, DIRECT]
    tok = train_tokenizer([p + t for p, t in zip(prompts, targets, strict=True)] * 3, 320)
    tok.add_tokens([AddedToken(x, special=False, normalized=False)
                    for x in (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE)])
    tok.save_pretrained(tmp_path / "tok")
    policy = Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(tmp_path / "tok"), lora_r=0, soft_tokens=False))
    losses = text_sft(policy, prompts, targets, TextSFTConfig(epochs=100, lr=5e-3))
    assert losses[-1] < 0.5 * losses[0]
    before = [p.detach().clone() for p in policy.parameters()]
    cols = [{"smoothed_return": 0.03} for _ in refs]
    hist = run_grpo(policy, prompts, cols, reward_functions("alphaquanter"), {"total": 1.0},
                    {"steps": 1, "group_size": 4, "lr": 1e-3, "max_new_tokens": 64, "max_tool_calls": 2},
                    tmp_path / "grpo", tools=[AlphaQuanterTool(store)], sample_refs=refs)
    assert hist[0]["reward/frac_zero_spread"] < 1.0
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, policy.parameters(), strict=True))
