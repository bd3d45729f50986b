"""Mixed precision on the rollout path (``train.precision: bf16-mixed``): the policy samples and scores under
bf16 autocast, while the forecast tool and the encoder's soft tokens stay in fp32, so the text the policy
reads is the text SFT wrote whatever precision it runs in."""

import numpy as np
import pytest
import torch

from llm.rollout import RolloutEngine
from llm.tools import ForecastTool
from rl.soft_tokens import SoftTokenSource
from rl.trainer import FuncScorer, GRPOSample, GRPOTrainConfig, GRPOTrainer
from stockr1.distributed import full_precision, precision_autocast
from tests.tiny_runs import DATA


def _matmul_dtype() -> torch.dtype:
    a = torch.ones(4, 4)
    return (a @ a).dtype


@pytest.mark.parametrize(("precision", "dtype"), [("bf16-mixed", torch.bfloat16), ("32-true", torch.float32),
                                                  ("bf16-true", torch.float32), ("64-true", torch.float32)])
def test_precision_autocast_follows_fabrics_setting(precision: str, dtype: torch.dtype) -> None:
    with precision_autocast(precision, "cpu"):
        assert _matmul_dtype() == dtype
    assert _matmul_dtype() == torch.float32  # and leaves nothing behind


def test_full_precision_switches_autocast_off_inside_and_restores_it() -> None:
    with precision_autocast("bf16-mixed", "cpu"):
        with full_precision():
            assert _matmul_dtype() == torch.float32
        assert _matmul_dtype() == torch.bfloat16


@pytest.fixture(scope="module")
def windows():
    from llm.build import load_data

    return load_data(DATA)[0]


def test_the_tool_and_the_soft_tokens_do_not_depend_on_the_policys_precision(tiny_decoder, windows) -> None:
    """Under a bf16 policy the decoder would compute in bf16 and render other digits; it must not."""
    dec = tiny_decoder(seed=0)
    dec.eval()
    rows = np.flatnonzero(windows.split == "test")[:3].tolist()
    calls = ['{"direction": "up", "volatility_level": "high"}', "not an action", '{"direction": "down"}']
    tool = ForecastTool(dec, windows, n_samples=4)
    src = SoftTokenSource(dec, windows)
    fp32_text, fp32_tokens = [r.observation for r in tool.call_batch(rows, calls)], src(rows)
    with precision_autocast("bf16-mixed", "cpu"):
        bf16_text, bf16_tokens = [r.observation for r in tool.call_batch(rows, calls)], src(rows)
        # the control: the same decoder, called bare under the autocast, does compute in bf16
        bare = dec.encoder(torch.as_tensor(windows.select(np.array(rows)).x, dtype=torch.float32),
                           channels=torch.as_tensor(windows.select(np.array(rows)).channels)).h_ts
    assert bare.dtype == torch.bfloat16
    assert bf16_text == fp32_text and any(any(c.isdigit() for c in t) for t in fp32_text)
    assert bf16_tokens.dtype == torch.float32 and torch.equal(bf16_tokens, fp32_tokens)


def test_a_bf16_mixed_grpo_step_samples_under_autocast_and_trains(tiny_policy, tmp_path) -> None:
    torch.manual_seed(0)
    pol = tiny_policy(d_ts=8)
    seen: list[bool] = []
    pol.model.register_forward_hook(lambda mod, args, out: seen.append(torch.is_autocast_enabled("cpu")))
    eng = RolloutEngine(pol, pol.tokenizer, [], max_new_tokens=4, temperature=1.0)
    samples = [GRPOSample(pol.tokenizer.apply_chat_template([{"role": "user", "content": f"Question {i}?"}],
                                                           tokenize=False, add_generation_prompt=True), i,
                          uncertainty=0.2) for i in range(2)]
    cfg = GRPOTrainConfig(group_size=4, queries_per_step=2, max_steps=1, lr=1e-2, accelerator="cpu",
                          precision="bf16-mixed", ckpt_every=5, micro_batch=8)
    tr = GRPOTrainer(pol, eng, samples, FuncScorer({"len": lambda p, c, **kw: [float(len(x)) for x in c]}),
                     cfg, tmp_path)
    before = tr.trainable_state()
    tr.fit()
    after = tr.trainable_state()
    assert seen and all(seen)  # every forward, the sampling ones included, ran under bf16 autocast
    assert all(v.dtype == torch.float32 for v in after.values())  # mixed: the weights stay fp32
    assert sum(not torch.equal(before[k], after[k]) for k in before) > len(before) // 2
    assert np.isfinite(tr.history[-1]["loss"])
