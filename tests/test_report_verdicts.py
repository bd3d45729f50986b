"""Every generated report reads its verdict from the interval (stockr1.metrics.verdict): a difference or a
target whose interval holds 0 renders as a tie, whatever its mean or a stored verdict string says. (The
ablation's, grpo_check's and the demo report's own tests check theirs.)"""

from benchmarks.action import oracle_claims, targets_met
from benchmarks.action import readme as action_readme
from benchmarks.compare.plots import interval_table
from benchmarks.compare.sections import probe_section, scale_section
from benchmarks.forecast.report import differences_md
from benchmarks.qa.command import diff_cell


def test_qa_difference_cells_follow_the_interval_not_a_stored_word() -> None:
    assert diff_cell({"diff": 3.0, "ci_lo": -1.0, "ci_hi": 7.0, "verdict": "better"}) == "+3.0 [-1.0, +7.0] tie"
    assert diff_cell({"diff": 3.0, "ci_lo": 1.0, "ci_hi": 5.0, "verdict": "tie"}) == "+3.0 [+1.0, +5.0] holds"
    assert diff_cell({"diff": -3.0, "ci_lo": -5.0, "ci_hi": -1.0, "verdict": "tie"}).endswith("worse")


def test_forecast_verdict_matrix_reads_each_interval_in_the_metrics_direction() -> None:
    rows = [{"reference": "m", "baseline": "b", "metric": "crps", "reference_value": 1.0, "baseline_value": 1.1,
             "diff": -0.1, "ci_lo": -0.3, "ci_hi": 0.1, "verdict": "win"},  # a stale "win": the CI holds 0
            {"reference": "m", "baseline": "b", "metric": "da_10", "reference_value": 0.6, "baseline_value": 0.5,
             "diff": 0.1, "ci_lo": 0.05, "ci_hi": 0.15, "verdict": "loss"}]  # higher is better: it holds
    text = differences_md(rows)
    assert "| b | tie | holds |" in text and "win" not in text and "loss" not in text


def test_compare_differences_and_tie_counts_read_the_intervals() -> None:
    iv = {"metrics": {"a": {k: {"value": 0.1, "lo": 0.0, "hi": 0.2} for k in ("cumulative_return", "sharpe", "hit_rate")}},
          "differences": {"a - b": {"cumulative_return": {"value": 0.05, "lo": -0.01, "hi": 0.11},
                                    "sharpe": {"value": 0.5, "lo": 0.1, "hi": 0.9},
                                    "hit_rate": {"value": -0.05, "lo": -0.08, "hi": -0.02}}}}
    table = interval_table(iv)
    assert "| a - b | 5.00 [-1.00, 11.00] tie | 0.500 [0.100, 0.900] holds | -5.00 [-8.00, -2.00] worse |" in table
    info = {"decision_days": {"n": 10}, "anonymise": {"weeks": 4, "scale": 1.7},
            "config": {"policy": {"name_or_path": "tiny"}}}
    assert "1 of the 1 paired CR differences" in "\n".join(scale_section(info, iv))
    gaps = {"differences": {"a - a (anonymised)": {"cumulative_return": {"value": 0.02, "lo": -0.01, "hi": 0.05},
                                                   "hit_rate": {"value": 0.01, "lo": -0.02, "hi": 0.04}}}}
    assert "No paired gap (CR, HR) excludes 0" in "\n".join(probe_section(info, gaps))


def test_action_targets_and_oracle_gain_read_their_intervals() -> None:
    """82% of 2 x 50 requests against a target of 80%: the Wilson interval straddles it, so the target is
    undecided, not met; 100% of them is met; an oracle gain whose interval holds 0 is a tie."""
    ctl = {"direction": {"extremes": 0.82, "middle": 0.9}, "volatility_level": {"extremes": 1.0, "middle": 1.0},
           "range_width_bin": {"extremes": 0.3, "middle": 0.9}}
    got = targets_met(ctl, 50)
    assert got == {"direction": "tie", "volatility_level": "holds", "range_width_bin": "worse"}
    claims = oracle_claims({"oracle_full": {"crps_diff": -0.001, "crps_ci_lo": -0.002, "crps_ci_hi": 0.0005}})
    assert claims == ["oracle_full lowers crps (oracle − no action): -0.00100 [-0.00200, +0.00050]: **tie** "
                      "(the interval includes 0)"]
    meta = {"checkpoint": "d", "split": "test", "data": "sample", "n_windows": 50, "n_samples": 8, "seed": 0,
            "seconds": 1.0, "targets_met": got, "oracle_claims": claims}
    text = action_readme("# Action benchmark (x)\n\n## body\n", meta, "stockr1 bench action --out x")
    assert "direction undecided, volatility_level met, range_width_bin missed" in text and "**tie**" in text
