"""stockr1.config.config_from_dict: unknown keys named with their section, nested dataclasses,
lists -> tuples, YAML 1.1 numeric strings ("2e-3") -> numbers, bad values named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import yaml

from benchmarks.ablation.command import AblationConfig
from benchmarks.compare.command import CompareConfig
from llm.policy import PolicyConfig
from rl.grpo import GRPOLossConfig
from rl.trainer import GRPOTrainConfig
from stockr1.config import config_from_dict


@dataclass(frozen=True)
class Inner:
    beta: float = 0.0
    steps: int = 1


@dataclass(frozen=True)
class Outer:
    lr: float = 1e-3
    n: int = 2
    cap: int | None = None
    devices: int | str = 1
    names: tuple[str, ...] = ("a",)
    weights: tuple[float, ...] = (1.0,)
    pair: tuple[float, int] = (0.5, 1)
    inner: Inner = Inner()
    blob: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def test_yaml_exponent_without_dot_is_a_string_and_becomes_a_float():
    d = yaml.safe_load("lr: 2e-3\nn: 1e3\ncap: '64'\nweights: [1e-1, 0.5]\n")
    assert d["lr"] == "2e-3" and d["n"] == "1e3"  # YAML 1.1: the reason this helper exists
    cfg = config_from_dict(Outer, d, "outer")
    assert cfg.lr == 0.002 and isinstance(cfg.lr, float)
    assert cfg.n == 1000 and isinstance(cfg.n, int)
    assert cfg.cap == 64
    assert cfg.weights == (0.1, 0.5)


def test_a_fixed_length_tuple_converts_each_value_by_its_own_type():
    cfg = config_from_dict(Outer, yaml.safe_load("pair: [2e-3, '4']\n"), "outer")
    assert cfg.pair == (0.002, 4) and isinstance(cfg.pair[1], int)
    assert GRPOTrainConfig.from_dict({"adam_betas": [0.5, "9e-1"]}).adam_betas == (0.5, 0.9)


def test_grpo_lr_string_reaches_the_scheduler_as_a_float():
    cfg = GRPOTrainConfig.from_dict(yaml.safe_load("lr: 2e-3\nmax_steps: '3'\nloss: {beta: 4e-2}\n"))
    assert cfg.lr == pytest.approx(0.002) and cfg.max_steps == 3 and cfg.loss.beta == pytest.approx(0.04)
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5)  # "2e-3" * 0.5 would raise here
    assert sched.get_last_lr() == [pytest.approx(0.001)]


def test_unknown_keys_name_the_section_and_list_valid_keys():
    with pytest.raises(ValueError, match=r"unknown outer keys \['typo'\]; valid keys: \[.*'lr'.*\]"):
        config_from_dict(Outer, {"typo": 1, "lr": 0.1}, "outer")
    with pytest.raises(ValueError, match=r"unknown outer\.inner keys \['gamma'\]"):
        config_from_dict(Outer, {"inner": {"gamma": 1.0}}, "outer")
    with pytest.raises(ValueError, match=r"unknown GRPOTrainConfig\.loss keys \['betta'\]"):
        GRPOTrainConfig.from_dict({"loss": {"betta": 0.1}})
    with pytest.raises(ValueError, match=r"unknown compare config keys \['steps'\]"):
        CompareConfig.from_dict({"steps": 3})


def test_bad_values_name_the_field_and_section():
    with pytest.raises(ValueError, match=r"GRPOTrainConfig: 'lr' must be a number, got the string 'fast'"):
        GRPOTrainConfig.from_dict({"lr": "fast"})
    with pytest.raises(ValueError, match=r"outer: 'n' must be an integer, got the string '2.5'"):
        config_from_dict(Outer, {"n": "2.5"}, "outer")
    with pytest.raises(ValueError, match=r"outer\.inner: 'beta' must be a number"):
        config_from_dict(Outer, {"inner": {"beta": "high"}}, "outer")
    with pytest.raises(ValueError, match=r"outer: 'weights\[1\]' must be a number"):
        config_from_dict(Outer, {"weights": [1, "x"]}, "outer")
    with pytest.raises(ValueError, match=r"PolicyConfig: 'lora_r' must be an integer"):
        PolicyConfig.from_dict({"lora_r": "thirty-two"})
    with pytest.raises(ValueError, match="outer must be a mapping"):
        config_from_dict(Outer, ["lr", 0.1], "outer")


def test_nested_tuples_and_passthrough():
    cfg = config_from_dict(Outer, {"inner": {"beta": "1e-1", "steps": 4}, "names": ["x", "y"], "devices": "auto",
                                   "blob": {"k": "1e-3"}, "extra": {"k": "2e-3"}, "cap": None}, "outer")
    assert cfg.inner == Inner(0.1, 4)
    assert cfg.names == ("x", "y")
    assert cfg.devices == "auto"  # int | str: a string is a valid value, left alone
    assert cfg.blob == {"k": "1e-3"} and cfg.extra == {"k": "2e-3"}  # untyped contents are not touched
    assert cfg.cap is None
    built = Inner(0.3)
    assert config_from_dict(Outer, {"inner": built}, "outer").inner is built  # instances pass through
    via_nested = config_from_dict(Outer, {"blob": {"beta": "2e-1"}}, "outer", nested={"blob": Inner})
    assert via_nested.blob == Inner(0.2)
    assert config_from_dict(Outer, None, "outer") == Outer()


def test_existing_configs_use_it_and_keep_their_own_checks():
    t = GRPOTrainConfig.from_dict({"reward_components": ["r_ans", "r_cons"], "loss": {"beta": 0.04}})
    assert t.reward_components == ("r_ans", "r_cons") and t.loss == GRPOLossConfig(beta=0.04)
    a = AblationConfig.from_dict({"seeds": ["0", 1], "variants": ["sft"]})
    assert a.seeds == (0, 1) and a.variants == ("sft",)
    with pytest.raises(ValueError, match="unknown variants"):
        AblationConfig.from_dict({"variants": ["sfx"]})
    with pytest.raises(ValueError, match="at least one seed"):
        AblationConfig.from_dict({"seeds": []})
    c = CompareConfig.from_dict({"max_context_chars": "800", "decisions_per_ticker": "1e1"})
    assert c.max_context_chars == 800 and c.decisions_per_ticker == 10
    with pytest.raises(ValueError, match="unknown compare config methods keys"):
        CompareConfig.from_dict({"methods": {"trade_r2": {}}})
    p = PolicyConfig.from_dict({"lora_dropout": "5e-2", "lora_targets": ["q_proj"], "seed": "3"})
    assert p.lora_dropout == pytest.approx(0.05) and p.lora_targets == ("q_proj",) and p.seed == 3
    with pytest.raises(ValueError, match="dtype"):
        PolicyConfig.from_dict({"dtype": "fp8"})
