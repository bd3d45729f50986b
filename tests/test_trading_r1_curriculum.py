"""Trading-R1 curriculum runner: stage order, SFT->RFT chaining, stage rewards, resume."""

import pytest

from rl.methods.trading_r1 import curriculum as C
from rl.methods.trading_r1.stages import StageConfig, stage_reward


class Recorder:
    def __init__(self):
        self.calls = []

    def sft(self, examples, target, init, stage, out):
        self.calls.append(("sft", stage.name, target, init))
        return f"{stage.name}-sft"

    def rft(self, examples, reward, init, stage, out):
        good = reward([e["prompt"] for e in examples], [e[f"target_{stage.name}"] for e in examples],
                      label=[e["label"] for e in examples], excess_return=[e["excess_return"] for e in examples])
        bad = reward([e["prompt"] for e in examples], ["no thesis"] * len(examples),
                     label=[e["label"] for e in examples], excess_return=[e["excess_return"] for e in examples])
        assert all(g > b for g, b in zip(good, bad, strict=True))  # the stage reward prefers its targets
        self.calls.append(("rft", stage.name, reward.__name__, init))
        return f"{stage.name}-rft"


def _examples():
    blocks = {"technicals": "<rsi>55</rsi>\nMACD positive", "news": "- 2020-01-01 earnings beat",
              "macro": "CPI 2.1%", "sentiment": "mean +0.2", "fundamentals": "none", "market_data": "C=100"}
    from rl.methods.trading_r1.prompt import template_thesis

    return [{"prompt": f"p{i}", "label": lab, "excess_return": e,
             **{f"target_{s}": template_thesis(blocks, lab, k) for s, k in C.STAGE_TARGET.items()}}
            for i, (lab, e) in enumerate([(4, 0.06), (0, -0.06), (2, 0.0)])]


def test_three_stages_chain_and_resume(tmp_path):
    cfg = C.CurriculumConfig.from_yaml("configs/methods/trading_r1/curriculum.yaml")
    cfg = C.CurriculumConfig(cfg.name, "init", str(tmp_path), cfg.stages, 3)
    rec = Recorder()
    log = C.run_curriculum(cfg, _examples(), rec)
    assert [c[:2] for c in rec.calls] == [("sft", "structure"), ("rft", "structure"), ("sft", "claims"),
                                         ("rft", "claims"), ("sft", "decision"), ("rft", "decision")]
    assert [c[3] for c in rec.calls] == ["init", "structure-sft", "structure-rft", "claims-sft", "claims-rft", "decision-sft"]
    assert rec.calls[5][2] == "trading_r1_decision+outcome+placement"
    assert log[-1]["checkpoint"] == "decision-rft"
    rec2 = Recorder()  # rerun: all stages done -> nothing retrained
    log2 = C.run_curriculum(cfg, _examples(), rec2)
    assert rec2.calls == [] and all(e["skipped"] for e in log2)


def test_stage_reward_weights_and_none():
    r = stage_reward({"decision": 2.0, "placement": 0.5})
    out = r(None, ["<a>x</a>\nDECISION: [[[BUY]]]", "nothing"], label=[3, None], excess_return=[0.0, 0.0])
    assert out == pytest.approx([2.0 * 1.0 + 0.5 * 1.0, 0.0])  # 2nd: decision undefined, placement 0
    with pytest.raises(ValueError, match="unknown reward heads"):
        StageConfig("x", {"profit": 1.0})
