"""Each ablation row switches off exactly what it claims, in the trainer config run_grpo will build."""

import math

import numpy as np
import pytest
import torch

from benchmarks.ablation.command import (
    VARIANTS,
    VARIANTS_BY_KEY,
    AblationConfig,
    grpo_overrides,
    resolved_grpo,
    sft_overrides,
)
from rl.grpo import uncertainty_weight
from rl.rewards import compute_rewards

CFG = AblationConfig.from_dict({
    "seeds": [0, 1, 2],
    "grpo": {"config": "configs/grpo/tiny.yaml",
             "overrides": {"qa": {"max_train_queries": 16}, "train": {"max_steps": 3, "group_size": 4}}},
})
SFT_CFG = {"data": {"source": "sample", "lookback": 90, "horizon": 10}, "qa": {"n_train": 200, "n_test": 60, "seed": 0}}
EXPECT = {  # variant -> (uncertainty weight on, enabled reward components)
    "grpo": (False, ("r_ans", "r_act", "r_prec", "r_cons")),
    "ugrpo": (True, ("r_ans", "r_act", "r_prec", "r_cons")),
    "ugrpo_no_ract": (True, ("r_ans", "r_prec", "r_cons")),
    "ugrpo_no_rprec": (True, ("r_ans", "r_act", "r_cons")),
}


@pytest.mark.parametrize("key", list(EXPECT))
def test_variant_resolves_to_its_switches(key):
    full, tcfg = resolved_grpo(CFG, VARIANTS_BY_KEY[key], seed=2, sft_cfg=SFT_CFG)
    weighted, comps = EXPECT[key]
    assert tcfg.uncertainty.enabled is weighted
    assert tcfg.reward_components == comps
    # reward weights are App. C.2's, untouched by any row: only the component set changes
    assert (tcfg.rewards.ans, tcfg.rewards.alpha, tcfg.rewards.beta, tcfg.rewards.gamma) == (1.0, 1.0, 0.5, 1.0)
    assert tcfg.seed == 2 and full["seed"] == 2
    from llm.qa import QAConfig

    qa = dict(full["qa"])  # the SFT's items: every QAConfig field fixed, the GRPO base's n_val=50 gone
    assert qa.pop("max_train_queries") == 16
    qa["families"] = tuple(qa["families"])  # YAML-safe list in the override
    assert QAConfig(**qa) == QAConfig(n_train=200, n_val=2000, n_test=60, seed=0)
    assert full["wandb"]["group"] == f"ablation/{key}"


def test_same_budget_for_every_grpo_row():
    budgets = set()
    for v in VARIANTS:
        if v.grpo is None:
            continue
        full, t = resolved_grpo(CFG, v, seed=0, sft_cfg=SFT_CFG)
        budgets.add((t.max_steps, t.group_size, t.queries_per_step, t.lr, t.lambda_ts,
                     full["rollout"]["max_new_tokens"], full["qa"]["max_train_queries"]))
    assert len(budgets) == 1 and next(iter(budgets))[:2] == (3, 4)


def test_variant_switches_cannot_be_undone_by_budget_overrides():
    cfg = AblationConfig.from_dict({"grpo": {"config": "configs/grpo/tiny.yaml", "overrides": {
        "train": {"uncertainty": {"enabled": True}, "reward_components": ["r_ans"]}}}})
    _, t = resolved_grpo(cfg, VARIANTS_BY_KEY["grpo"], 0, SFT_CFG)
    assert t.uncertainty.enabled is False and t.reward_components == ("r_ans", "r_act", "r_prec", "r_cons")


def test_weight_switch_changes_the_weight_function():
    u = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    w_on = uncertainty_weight(u, resolved_grpo(CFG, VARIANTS_BY_KEY["ugrpo"], 0, SFT_CFG)[1].uncertainty)
    w_off = uncertainty_weight(u, resolved_grpo(CFG, VARIANTS_BY_KEY["grpo"], 0, SFT_CFG)[1].uncertainty)
    assert torch.allclose(w_off, torch.ones(3, dtype=torch.float64))
    assert float(w_on[0]) == 1.0 and math.isclose(float(w_on[1]), 0.5, rel_tol=1e-6) and float(w_on[2]) < 0.5


def test_dropped_component_adds_nothing_to_the_total():
    """Two completions that differ only in their action: the total separates them unless R_act is off."""
    from forecast_action.schema import ForecastAction

    target = ForecastAction(direction="up", end_change_pct=3.0)
    good = '<forecast_action>{"direction": "up", "end_change_pct": 3.0}</forecast_action><answer>Yes</answer>'
    bad = '<forecast_action>{"direction": "down", "end_change_pct": -3.0}</forecast_action><answer>Yes</answer>'
    cols = {"answer": ["Yes"] * 2, "answer_type": ["yes_no"] * 2, "target_action": [target] * 2}
    totals = {}
    for key in ("ugrpo", "ugrpo_no_ract"):
        t = resolved_grpo(CFG, VARIANTS_BY_KEY[key], 0, SFT_CFG)[1]
        br = compute_rewards(["p", "p"], [good, bad], t.rewards, t.reward_components, **cols)
        totals[key] = br.total
        assert np.isnan(br.components["r_act"]).all() == (key == "ugrpo_no_ract")
    assert totals["ugrpo"][0] > totals["ugrpo"][1]
    assert totals["ugrpo_no_ract"][0] == totals["ugrpo_no_ract"][1]


def test_sft_row_has_no_grpo_stage_and_sft_overrides_seed_and_share():
    with pytest.raises(ValueError, match="no GRPO stage"):
        grpo_overrides(CFG, VARIANTS_BY_KEY["sft"], 0, SFT_CFG)
    o0 = sft_overrides(CFG, 0, None)
    o1 = sft_overrides(CFG, 1, share_from=__import__("pathlib").Path("w/sft/s0"))
    assert o0["train"]["seed"] == 0 and "prepare_from" not in o0
    assert o1["train"]["seed"] == 1 and o1["prepare_from"] == "w/sft/s0" and o1["run"] == "s1"


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="unknown variants"):
        AblationConfig.from_dict({"variants": ["sft", "ppo"]})
    with pytest.raises(ValueError, match="unknown ablation config keys"):
        AblationConfig.from_dict({"seed": 0})


def test_demo_config_loads_with_three_seeds_and_all_rows():
    from stockr1.config import load_yaml

    cfg = AblationConfig.from_dict(load_yaml("configs/ablation/demo.yaml"))
    assert len(cfg.seeds) >= 3 and set(cfg.variants) == set(VARIANTS_BY_KEY)
    for v in VARIANTS:
        if v.grpo is not None:
            resolved_grpo(cfg, v, cfg.seeds[0], SFT_CFG)  # every row resolves to a valid trainer config
