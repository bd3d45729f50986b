"""rl.logging: step metrics from rollouts and rewards, collapse warnings, JSONL output."""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from forecast_action.schema import ForecastAction
from rl.logging import RunLogger, collapse_warnings, step_metrics
from rl.rewards import PENALTY, RewardBreakdown


@dataclass
class R:
    """The Rollout fields step_metrics reads."""

    answer: str | None
    action: ForecastAction | None
    forecast: object | None = None
    prompt_index: int = 0
    sample_index: int = 0
    prompt: str = "p"
    completion: str = "c"
    finish_reason: str = "answer"
    n_generated: int = 10


YES_NO = [SimpleNamespace(columns={"answer": "Yes", "answer_type": "yes_no"})] * 2


def _metrics(answers, directions, totals, r_ans, finish=None, samples=YES_NO):
    rolls = [R(a, ForecastAction(direction=d) if d else None, object() if d else None)
             for a, d in zip(answers, directions, strict=True)]
    for r, f in zip(rolls, finish or [], strict=False):
        r.finish_reason = f
    comps = {"r_ans": np.array(r_ans, float), "r_act": np.full(len(rolls), np.nan)}
    br = RewardBreakdown(comps, np.array(totals, float))
    adv = torch.zeros(len(rolls))
    return step_metrics(3, rolls, samples, br, adv, 4, torch.tensor([0.3, 0.6]), torch.tensor([0.9, 0.4]),
                        {"loss": 0.1})


def test_step_metrics_values() -> None:
    m = _metrics(["Yes", "No", None, "Yes", "Yes", "Yes", "Yes", "yes"], ["up", None, "down", "up"] * 2,
                 [1, 0, -1, 1, 2, 2, 2, 2], [1, 0, PENALTY, 1, 1, 1, 1, 1])
    s = m["scalars"]
    assert s["reward/r_ans"] == np.mean([1, 0, PENALTY, 1, 1, 1, 1, 1]) and "reward/r_act" not in s
    assert s["reward/frac_zero_spread"] == 0.5  # second group is all 2
    assert s["reward/group_std"] == np.std([1, 0, -1, 1]) / 2
    assert s["rollout/answer_parse_rate"] == 7 / 8
    assert s["rollout/action_success_rate"] == 6 / 8
    assert s["answers/share/yes"] == 6 / 8 and s["answers/share/none"] == 1 / 8 and s["answers/top_share"] == 6 / 8
    assert s["actions/direction/up"] == 4 / 8 and s["actions/direction/none"] == 2 / 8
    assert s["uncertainty/weight_mean"] == np.float32(0.65) and s["loss"] == 0.1
    assert len(m["rows"]) == 8 and m["rows"][0]["action"] == '{"direction": "up"}'
    assert s["rollout/truncated"] == 0.0
    # group 1: R = [1, 0, -1, 1], r_ans = [1, 0, -0.5, 1]: cov 2.125 / 3, var 2.75 / 3; group 2 has no spread
    assert s["reward/var_share/r_ans"] == pytest.approx((2.125 / 3 / 2) / (2.75 / 3 / 2))
    assert s["advantage/noise_std"] > 0 and 0 <= s["advantage/sign_flip"] <= 1  # group 1 has spread, group 2 none


def test_answer_shares_count_the_answer_r_ans_grades() -> None:
    """A share counts what R_ans grades, so "Yes, because…" and an answer tag with junk after its first word
    are Yes answers; an answer R_ans cannot read is "unreadable" and a missing one "none", whatever its text.
    A query without an answer type (no gold) keeps its raw text."""
    answers = ["Yes, because", "yes trial=1.00</forecast", "No.", "maybe", None, "Up a bit", "Up a bit", "down"]
    m = _metrics(answers, ["up"] * 8, [1, 0, 1, 0, 1, 0, 1, 0], [1, 1, 0, PENALTY] + [np.nan] * 4,
                 samples=[YES_NO[0], SimpleNamespace(columns={})])
    shares = {k: v for k, v in m["scalars"].items() if k.startswith("answers/share/")}
    assert shares == {"answers/share/yes": 2 / 8, "answers/share/no": 1 / 8, "answers/share/unreadable": 1 / 8,
                      "answers/share/none": 1 / 8, "answers/share/up a bit": 2 / 8, "answers/share/down": 1 / 8}
    assert m["scalars"]["answers/top_share"] == 2 / 8

def test_truncation_is_the_share_of_rollouts_that_hit_the_token_budget() -> None:
    m = _metrics(["Yes"] * 8, ["up"] * 8, [1, 0, 1, 0, 1, 0, 1, 0], [1.0] * 8,
                 finish=["length", "answer", "eos", "length", "answer", "answer", "answer", "length"])
    assert m["scalars"]["rollout/truncated"] == 3 / 8 and m["scalars"]["rollout/finish/length"] == 3 / 8


def test_collapse_warnings_fire_and_stay_quiet(tmp_path) -> None:
    healthy = _metrics(["Yes", "No"] * 4, ["up", "down"] * 4, [1, 0, 1, 0, 0, 1, 0, 1], [1.0] * 8)
    assert collapse_warnings(healthy["scalars"], 8) == []
    collapsed = _metrics(["Yes"] * 8, ["up"] * 8, [1.0] * 8, [1.0] * 8)
    warns = collapse_warnings(collapsed["scalars"], 8)
    assert len(warns) == 3 and "zero reward spread" in warns[0] and "'yes'" in warns[1] and "direction='up'" in warns[2]
    log = RunLogger(tmp_path, use_wandb=False)
    assert log.log(3, collapsed, n_rows=2) == warns
    line = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert line["warn/zero_spread"] == 1.0 and line["warn/answer_dominates"] == 1.0 and line["step"] == 3.0
    assert len((tmp_path / "samples.jsonl").read_text().splitlines()) == 2
    assert log.warnings[0]["step"] == 3
