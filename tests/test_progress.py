"""The progress line of SFT and GRPO, and the GRPO step summary beside it."""

import math

from rl.logging import step_line
from stockr1.progress import eta, progress


def test_progress_rate_and_eta_count_only_this_processes_steps() -> None:
    assert progress(50, 2000, 60.0, 50) == "step 50/2000 (2.5%) 1.20 s/step, ETA 39m"
    # resumed at step 40: 10 steps in 30 s -> 3 s/step for the 1,950 left
    assert progress(50, 2000, 30.0, 10) == "step 50/2000 (2.5%) 3.00 s/step, ETA 1h37m"
    assert progress(0, 10, 0.0, 0) == "step 0/10 (0.0%) measuring"
    assert (eta(5), eta(125), eta(7500)) == ("5s", "2m", "2h05m")


def test_step_line_reports_reward_kl_and_parse_rates_and_dashes_for_missing() -> None:
    s = {"reward/total": 0.5123, "reward/r_ans": 0.3, "reward/r_act": 0.2, "policy/kl": 0.00123,
         "rollout/action_success_rate": 0.75, "rollout/answer_parse_rate": math.nan}
    assert step_line(s) == ("reward 0.512 (ans 0.300, act 0.200), KL 0.0012, action ok 75%, answer parses –")
