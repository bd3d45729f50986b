"""Trading-R1 curriculum on the real shared stack with a tiny policy: SFT lowers the thesis loss,
GRPO with the stage reward changes the parameters, checkpoints chain through the runner."""

import json

import pytest
import torch

from llm.policy import Policy, PolicyConfig
from llm.tokenizer import train_tokenizer
from rl.methods.trading_r1.backend import SharedStackBackend
from rl.methods.trading_r1.curriculum import CurriculumConfig, run_curriculum
from rl.methods.trading_r1.stages import StageConfig

T = "<conclusion>c</conclusion>\nDECISION: [[[{}]]]"
EXAMPLES = [{"prompt": f"Ticker A{i}", "label": lab, "excess_return": 0.0, "target_decision": T.format(name)}
            for i, (lab, name) in enumerate([(3, "BUY"), (1, "SELL"), (3, "BUY"), (1, "SELL")])]


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("tr1")
    train_tokenizer([e["prompt"] + e["target_decision"] for e in EXAMPLES] * 5, 300, d / "tok")
    Policy(PolicyConfig(name_or_path="tiny", tokenizer_path=str(d / "tok"), lora_r=0, soft_tokens=False)).save(d / "init")
    return d


def test_sft_then_grpo_on_the_shared_trainer(init_dir):
    torch.set_num_threads(1)
    stage = StageConfig("decision", {"decision": 1.0}, {"epochs": 40, "lr": 3e-3, "batch_size": 4},
                        {"steps": 1, "group_size": 4, "lr": 1e-3, "max_new_tokens": 24, "queries_per_step": 2})
    cfg = CurriculumConfig("t", str(init_dir / "init"), str(init_dir / "run"), (stage,), 4)
    be = SharedStackBackend()
    log = run_curriculum(cfg, EXAMPLES, be)
    sft, rft = be.history
    assert sft["loss_last"] < 0.5 * sft["loss_first"]
    assert rft["frac_zero_spread"][0] < 1.0  # the decision reward varies within groups -> a signal
    a, b = Policy.load(log[0]["sft"]), Policy.load(log[0]["checkpoint"])
    delta = sum(float((x.detach() - y.detach()).abs().sum()) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert delta > 0.0
    assert json.loads((init_dir / "run" / "decision" / "DONE").read_text())["checkpoint"] == log[0]["checkpoint"]
