"""A GRPO step of Trade-R1 (DSR gate, offline judge) on a tiny policy through the shared trainer."""

import pytest
import torch

from llm.policy import Policy, PolicyConfig
from llm.tokenizer import train_tokenizer
from rl.methods import reward_functions, run_grpo
from rl.methods.text_sft import TextSFTConfig, text_sft

CONTEXT = "AAPL revenue grew 12% on strong iPhone sales\nFed held rates at 5.25%"
GOOD = "<think>AAPL revenue grew 12% on strong iPhone sales.</think><answer>BUY AAPL</answer>"
BAD = "<think>AAPL will moon 300% on rumours.</think><answer>BUY AAPL</answer>"


@pytest.mark.slow
def test_dsr_grpo_step_changes_parameters(tmp_path, monkeypatch):
    monkeypatch.delenv("STOCKR1_JUDGE_URL", raising=False)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    prompts = ["News for AAPL"] * 4  # one prompt, two targets: SFT learns a mixture to sample from
    targets = [GOOD, BAD, GOOD, BAD]
    train_tokenizer([p + t for p, t in zip(prompts, targets, strict=True)] * 5, 300, tmp_path / "tok")
    policy = Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(tmp_path / "tok"), lora_r=0, soft_tokens=False))
    losses = text_sft(policy, prompts, targets, TextSFTConfig(epochs=100, lr=5e-3))
    assert losses[-1] < 0.5 * losses[0]
    before = [p.detach().clone() for p in policy.parameters()]
    cols = [{"context": CONTEXT, "ticker": "AAPL", "excess_return": 0.01} for _ in prompts]
    hist = run_grpo(policy, prompts, cols, reward_functions("trade_r1_dsr"), {"trade_r1_dsr": 1.0},
                    {"steps": 1, "group_size": 4, "lr": 1e-3, "max_new_tokens": 64}, tmp_path / "grpo")
    assert hist[0]["reward/frac_zero_spread"] < 1.0  # grounded vs hallucinated samples score differently
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, policy.parameters(), strict=True))
