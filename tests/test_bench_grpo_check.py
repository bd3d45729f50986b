"""`stockr1 bench grpo_check`: its configs, its verdict read from the seeds x queries interval (a seed-spread
tie renders as a tie), and a cut-down end-to-end run on the tiny random-init policy (slow)."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmarks.grpo_check.command import (
    GRPOCheckConfig,
    main,
    pool_probes,
    probe_draws,
    read_earlier_look,
    read_steps,
    summarise,
)
from benchmarks.grpo_check.report import credit_text, readme
from benchmarks.grpo_check.side_by_side import interval_text, read_checks, recipe_text, row
from benchmarks.grpo_check.side_by_side import main as side_by_side
from stockr1.config import load_yaml
from tests.tiny_runs import DATA, DECODER_TS, tiny_sft_config

ROOT = Path(__file__).parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "grpo_check").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_check_config_is_valid(path: Path) -> None:
    cfg = GRPOCheckConfig.from_dict(load_yaml(path))
    assert cfg.n_queries >= 8 and len(cfg.seeds) >= 2


@pytest.mark.parametrize(("edit", "message"), [({"n_queries": 4}, "n_queries >= 8"), ({"seeds": [0]}, "2 distinct seeds"),
                                               ({"grpo": {"overrides": {"train": {"lrr": 1}}}}, "did you mean 'lr'")])
def test_a_check_too_small_to_tell_is_refused(edit, message) -> None:
    with pytest.raises(ValueError, match=message):
        GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), **edit})


def test_probe_draws_keep_the_single_draw_cache_and_pair_start_with_end() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "probe_group_size": 4,
                                     "probe_repeats": 3})
    assert probe_draws(cfg, "start", 2) == [("start-s2-g4.json", 1002), ("start-s2-g4-r1.json", 2002),
                                            ("start-s2-g4-r2.json", 3002)]
    assert [seed for _, seed in probe_draws(cfg, "end", 2)] == [1002, 2002, 3002]  # the start's random numbers
    assert len({seed for s in (0, 1, 2) for _, seed in probe_draws(cfg, "end", s)}) == 9  # no draw repeats another


def test_pooled_probe_draws_are_the_mean_of_equal_draws() -> None:
    a = {"reward_total": 1.0, "n_queries": 2, "group_size": 4, "seed": 1000, "reward/r_ans": 0.25,
         "answer_parse_rate": 90.0, "per_query_total": [1.0, 2.0], "variance_share": {"r_ans": 0.6, "r_act": 0.4}}
    b = {"reward_total": 2.0, "n_queries": 2, "group_size": 4, "seed": 2000, "reward/r_ans": 0.75,
         "answer_parse_rate": 100.0, "per_query_total": [3.0, 0.0], "variance_share": {"r_ans": float("nan"), "r_act": 0.2}}
    pooled = pool_probes([a, b])
    assert pooled["per_query_total"] == [2.0, 1.0] and pooled["reward_total"] == 1.5 and pooled["reward/r_ans"] == 0.5
    assert pooled["answer_parse_rate"] == 95.0 and pooled["group_size"] == 8 and pooled["seed"] == [1000, 2000]
    assert pooled["variance_share"] == pytest.approx({"r_ans": 0.6, "r_act": 0.3})  # a NaN share is skipped
    assert pool_probes([a]) == a
    with pytest.raises(ValueError, match="share their queries"):
        pool_probes([a, {**b, "per_query_total": [1.0]}])


def test_pooled_draws_concatenate_each_querys_answers_and_average_its_components() -> None:
    q = {"gold": "No", "answer_type": "yes_no"}
    a = {"per_query_total": [1.0], "group_size": 2, "n_queries": 1, "seed": 1000,
         "per_query": [{**q, "answers": ["Yes", "No"], "r_ans": 0.5, "r_prec": None}]}
    b = {"per_query_total": [2.0], "group_size": 2, "n_queries": 1, "seed": 2000,
         "per_query": [{**q, "answers": ["No", None], "r_ans": 0.0, "r_prec": 0.4}]}
    c = {k: v for k, v in a.items() if k != "per_query"}  # a draw cached before the probe kept its queries
    pooled = pool_probes([a, b, c])
    assert pooled["per_query"] == [{**q, "answers": ["Yes", "No", "No", None], "r_ans": 0.25, "r_prec": 0.4}]
    assert pooled["per_query_draws"] == 2 and pooled["group_size"] == 6


def test_the_per_query_section_shows_which_answers_moved() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 100})
    res = _res([0.3, 0.2], q=2)
    for s in (0, 1):  # query 0 (gold No) moves from Yes to No; query 1 (gold Yes) stays at Yes
        res["probe"]["start"][s]["per_query"] = [
            {"gold": "No", "answer_type": "yes_no", "answers": ["Yes", "Yes", "Yes", "No"], "r_ans": 0.25},
            {"gold": "Yes", "answer_type": "yes_no", "answers": ["Yes", "Yes", "Yes", "Yes"], "r_ans": 1.0}]
        res["probe"]["end"][s]["per_query"] = [
            {"gold": "No", "answer_type": "yes_no", "answers": ["No", "No", "No", "Yes"], "r_ans": 0.75},
            {"gold": "Yes", "answer_type": "yes_no", "answers": ["Yes", "Yes", "Yes", "Yes"], "r_ans": 1.0}]
    summary = summarise(res, cfg)
    assert summary["per_query"][0] == {"gold": "No", "answer_type": "yes_no", "start_r_ans": 0.25, "end_r_ans": 0.75,
                                       "start_answers": {"Yes": 6, "No": 2}, "end_answers": {"No": 6, "Yes": 2}}
    text = readme(summary, _info())
    assert "R_ans rose on 1 of 2 queries and fell on 0" in text and "(8 rollouts per query and policy" in text
    assert "| 0 | yes_no | No | 0.25 | 0.75 | Yes 6, No 2 | No 6, Yes 2 |" in text
    assert summary["yes_share_change"] == {} and "Yes/No queries" not in text  # one query per gold: no interval


def test_the_groups_where_r_ans_can_teach_are_counted_per_gold_by_hand() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 100,
                                     "probe_group_size": 4})
    res = _res([0.3, 0.2], q=3)
    for s in (0, 1):  # each seed's pooled draws: 2 groups of 4 per query, in draw order
        res["probe"]["start"][s]["per_query"] = [
            {"gold": "No", "answer_type": "yes_no", "answers": ["Yes", "Yes", "Yes", "No"] + ["Yes"] * 4},
            {"gold": "Yes", "answer_type": "yes_no", "answers": ["Yes</forecast_action>", "Yes", "Yes", "Yes",
                                                                 None, "No", "Yes", "No"]},
            {"gold": "Yes", "answer_type": "yes_no", "answers": ["Yes"] * 8}]
        res["probe"]["end"][s]["per_query"] = res["probe"]["start"][s]["per_query"]
    summary = summarise(res, cfg)
    # gold No: 1 mixed group per seed of 2; gold Yes: 2 mixed per seed (an unparsed answer is not the gold) of 4
    assert summary["teaching_groups"] == {"no": {"groups": 4, "mixed": 2}, "yes": {"groups": 8, "mixed": 4}}
    text = readme(summary, _info())
    assert "gold-Yes queries 4 of 8 groups, gold-No queries 2 of 4" in text


def test_each_component_rise_reads_its_own_interval_over_seeds_and_queries() -> None:
    """R_act rises on every query for both seeds (holds); R_ans rises on half the queries and falls as much on
    the other half, alike in both seeds, so its std over seeds is 0 while its interval spans 0 (a tie the
    mean ± std would hide); R_cons is undefined on one query in one record, so that query is left out."""
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 400})
    res = _res([0.3, 0.25], q=8)
    for s in (0, 1):
        for which in ("start", "end"):
            up = 0.2 * (which == "end")
            res["probe"][which][s]["per_query"] = [
                {"gold": "Yes", "answer_type": "yes_no", "answers": ["Yes"], "r_ans": 0.5 + (up if i % 2 else -up),
                 "r_act": 0.4 + up + 0.01 * i, "r_prec": 0.3, "r_cons": None if (which, s, i) == ("end", 1, 3) else 0.6}
                for i in range(8)]
    comps = summarise(res, cfg)["rise_components"]
    assert comps["r_act"]["interval"]["verdict"] == "holds" and comps["r_act"]["interval"]["diff"] == pytest.approx(0.2)
    assert comps["r_ans"]["interval"]["verdict"] == "tie" and comps["r_ans"]["std"] == 0.0
    assert comps["r_cons"]["n_queries"] == 7 and comps["r_prec"]["interval"]["diff"] == pytest.approx(0.0)
    text = readme(summarise(res, cfg), _info())
    assert "  - r_act +0.000 ± 0.000; 8 queries: r_act rises: +0.200 [+0.2" in text and "**holds**" in text
    line = next(r for r in text.splitlines() if r.startswith("  - r_ans"))
    assert "8 queries: r_ans rises: " in line and "[-0.150, +0.150]: **tie**" in line
    assert "four readings, not corrected for their number" in text
    res["probe"]["end"][0].pop("per_query")  # one record without per-query components: mean ± std only
    assert "no per-query records, so no interval" in readme(summarise(res, cfg), _info())


def _yes_no(start_yes: list[int], end_yes: list[int], golds: list[str], rises: list[float]) -> dict:
    """Probe records of 2 seeds whose query i gives ``start_yes[i]`` / ``end_yes[i]`` Yes answers of 4."""
    res = _res(rises, q=len(golds))
    for s in (0, 1):
        for which, k in (("start", start_yes), ("end", end_yes)):
            res["probe"][which][s]["per_query"] = [
                {"gold": g, "answer_type": "yes_no", "answers": ["Yes"] * n + ["No"] * (4 - n), "r_ans": 0.5}
                for g, n in zip(golds, k, strict=True)]
    return res


@pytest.mark.parametrize(("end_yes", "words"), [
    ([1, 1, 1, 1], "shifts as one prior over queries, not per query"),       # Yes falls on every query
    ([4, 4, 1, 1], "Both move toward their gold beyond their intervals: the answer is learnt per query"),
    ([4, 0, 1, 1], "At least one is a tie: these probes cannot tell"),     # gold-Yes: one up, one down
])
def test_the_yes_share_line_reads_each_golds_interval(end_yes: list[int], words: str) -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 200})
    res = _yes_no([3, 3, 3, 3], end_yes, ["Yes", "Yes", "No", "No"], [0.1, 0.1])
    change = summarise(res, cfg)["yes_share_change"]
    assert change["yes"]["start"] == 0.75 and change["yes"]["end"] == sum(end_yes[:2]) / 8
    assert change["no"]["diff"] == pytest.approx(-0.5) and change["no"]["n_queries"] == 2
    text = readme(summarise(res, cfg), _info())
    assert words in text and "the Yes share falls on the 2 gold-No queries (0.75 → 0.25): -0.50" in text


def test_answers_are_counted_as_r_ans_grades_them() -> None:
    """"Yes." and "Yes<answer>Yes" are Yes answers to R_ans, so to the Yes share and the per-query counts; an
    action written inside the tag is unreadable, a missing answer None."""
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 100})
    res = _yes_no([3, 3, 3, 3], [1, 1, 1, 1], ["Yes", "Yes", "No", "No"], [0.1, 0.1])
    for s in (0, 1):
        res["probe"]["end"][s]["per_query"][0]["answers"] = ["Yes.", "Yes<answer>Yes", '{"direction": "up"}', None]
    summary = summarise(res, cfg)
    assert summary["per_query"][0]["end_answers"] == {"Yes": 4, "unreadable": 2, "None": 2}
    # gold-Yes end: query 0 has 2 Yes of 4, query 1 has 1 of 4 (per seed) -> 3 / 8
    assert summary["yes_share_change"]["yes"]["end"] == 3 / 8


def test_per_query_records_missing_from_one_probe_give_no_section() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 100})
    res = _yes_no([3, 3, 3, 3], [1, 1, 1, 1], ["Yes", "Yes", "No", "No"], [0.1, 0.1])
    res["probe"]["end"][1].pop("per_query")  # one record without per-query answers: no section, no guess
    assert summarise(res, cfg)["per_query"] is None and summarise(res, cfg)["yes_share_change"] is None
    assert "## Per query" not in readme(summarise(res, cfg), _info())


def test_an_answer_absent_from_a_logged_step_has_share_zero(tmp_path: Path) -> None:
    recs = [{"step": 1, "reward/total": 1.0, "answers/share/yes": 0.75, "answers/share/no": 0.25,
             "answers/top_share": 0.75},
            {"step": 2, "reward/total": 1.2, "answers/share/yes": 1.0, "answers/top_share": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    steps = read_steps(tmp_path / "metrics.jsonl")
    assert steps["answers/share/no"] == {1: 0.25, 2: 0.0} and steps["answers/share/yes"] == {1: 0.75, 2: 1.0}
    assert steps["reward/total"] == {1: 1.0, 2: 1.2}


def _res(rises: list[float], q: int = 8) -> dict:
    """Probe records: the start scores 1.0 on every query; seed s's end scores 1.0 + rises[s] (+ query noise)."""
    rng = np.random.default_rng(0)
    start, end = {}, {}
    for s, r in enumerate(rises):
        base = {"reward/r_ans": 0.2, "reward/r_act": 0.5, "reward/r_prec": 0.3, "reward/r_cons": 0.5,
                "variance_share": {"r_ans": 0.4, "r_act": 0.3, "r_prec": 0.1, "r_cons": 0.2}}
        start[s] = {**base, "reward_total": 1.0, "per_query_total": [1.0] * q}
        end[s] = {**base, "reward_total": 1.0 + r, "per_query_total": list(1.0 + r + rng.normal(0, 0.01, q))}
    steps = {s: {"reward/total": {1: 1.0, 2: 1.0 + r}, "policy/kl": {1: 0.0, 2: 1e-3}, "rollout/truncated": {1: 0.1, 2: 0.0},
                 "reward/var_share/r_ans": {1: 0.4, 2: 0.5}, "time/step_s": {1: 700.0, 2: 660.0},
                 "time/rollout_s": {1: 350.0, 2: 310.0}} for s, r in enumerate(rises)}
    recipe = {"lr": 1e-6, "warmup_steps": 0, "mu": 1, "beta": 0.001, "loss_type": "grpo", "group_size": 4,
              "queries_per_step": 8, "temperature": 1.0, "max_new_tokens": 640, "lora_r": 8, "uncertainty": True}
    return {"probe": {"start": start, "end": end}, "steps": steps, "timings": {}, "recipe": recipe,
            "start": {"policy_base": "tiny", "sft_release_hash": "0123456789ab", "sft_run_dir": "release/tiny/sft"}}


def _info() -> dict:
    return {"config_path": "c.yaml", "config": {"grpo": {"config": "configs/grpo/tiny.yaml", "overrides": {}}},
            "command": "stockr1 bench grpo_check --out x", "commit": "abc", "date": "2026-12-03", "figures": []}


def test_a_seed_spread_rise_is_a_tie_and_a_clear_rise_holds() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 400})
    tie = summarise(_res([0.3, -0.25]), cfg)  # one seed up, one down: the mean +0.025 is no rise
    assert tie["rise"]["verdict"] == "tie" and tie["rise"]["interval"] == "seeds x questions"
    text = readme(tie, _info())
    assert "(end − start, probe, 95.0% interval): +0.02" in text and "**tie** (the interval includes 0)" in text
    assert "read the diagnostics below before anything else" in text
    assert (f"(± 0.000) is the probe's sampling noise alone, {cfg.probe_group_size} rollouts per query; the\n  end's "
            f"(± {np.std([1.3, 0.75], ddof=1):.3f}) is the training-seed spread") in text  # the start: one policy
    assert "R_ans's share of the within-group variance during training: 0.45" in text
    assert "rollouts that hit max_new_tokens: 5.0%" in text and "lr 1e-06 (warmup 0), mu 1, beta 0.001" in text
    assert "| 2 | 1.025 ± 0.389 | 1.0e-03 ± 0.0e+00 |" in text  # per step: mean ± std over seeds
    assert "cost: 680 s a step, of which rollouts 330 s (mean over steps and seeds; 2 threads)" in text
    up = summarise(_res([0.30, 0.25]), cfg)
    assert up["rise"]["verdict"] == "holds" and "**holds**" in readme(up, _info())
    a, b = tie["rise"]["ci_seeds_questions"]
    c, d = tie["rise"]["ci_questions"]
    assert (f"seeds x queries [{a:+.3f}, {b:+.3f}] (resampling the 2 training seeds), queries only "
            f"[{c:+.3f}, {d:+.3f}]; the verdict reads the wider (seeds x questions)") in readme(tie, _info())
    assert up["policy_base"] == "tiny" and up["sft_release_hash"] == "0123456789ab"


def test_the_diagnostics_name_the_credit_the_recipe_trained_with() -> None:
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 200})
    res = _res([0.3, 0.25])
    assert "credit sequence (Stock-R1 Eq. 1" in readme(summarise(res, cfg), _info())  # no credit key: the default
    res["recipe"] = {**res["recipe"], "credit": {"mode": "answer_span", "answer_share": 0.25}}
    text = readme(summarise(res, cfg), _info())
    assert "credit answer_span (the answer span carries R_ans's advantage with 25% of its" in text
    assert "a departure from Stock-R1 Eq. 1" in text
    assert "AdamW betas (0.9, 0.999) (default), eps 1e-8 (default)" in text  # no optimiser keys: torch's defaults
    res["recipe"] = {**res["recipe"], "adam_eps": 1e-3}
    assert "AdamW betas (0.9, 0.999) (default), eps 0.001" in readme(summarise(res, cfg), _info())
    assert "protocol rows" not in readme(summarise(res, cfg), _info())
    res["recipe"] = {**res["recipe"], "rows_lr": 2e-4, "rows_adam_eps": 1e-8}
    assert "eps 0.001; the protocol rows and the projector at lr 0.0002, eps 1e-08" in readme(summarise(res, cfg), _info())
    assert "eps 1e-08, precision 32-true" in readme(summarise(res, cfg), _info())  # no precision key: fp32
    assert "precision 32-true, decoded by the policy itself" in readme(summarise(res, cfg), _info())
    res["recipe"] = {**res["recipe"], "precision": "bf16-mixed", "merge_lora": True, "twin_dtype": "bfloat16"}
    assert ("eps 1e-08, precision bf16-mixed, decoded by a merged bfloat16 twin of the policy (rollout.merge_lora, "
            "twin_dtype: the sampler's log-probs are not the loss's)") in readme(summarise(res, cfg), _info())


def test_the_diagnostics_show_the_gradient_by_kind_of_weight() -> None:
    """Step 1's and the all-steps mean of each group's share and RMS, averaged over seeds; absent from runs
    logged without them."""
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 200})
    res = _res([0.3, 0.25])
    assert "gradient by kind of weight" not in readme(summarise(res, cfg), _info())
    for s, (share, rms) in enumerate(((0.6, 1e-3), (0.4, 3e-3))):
        res["steps"][s].update({"policy/grad_share/rows": {1: share, 2: 0.5}, "policy/grad_rms/rows": {1: rms, 2: 1e-3},
                                "policy/grad_share/adapter": {1: 1 - share, 2: 0.5},
                                "policy/grad_rms/adapter": {1: 3e-5, 2: 5e-5}})
    text = readme(summarise(res, cfg), _info())
    assert ("(share of its squared norm / per-entry RMS, mean over seeds; an AdamW eps above a group's RMS makes its "
            "step linear): rows 50% / 2.0e-03 at step 1, 50% / 1.5e-03 over steps; adapter 50% / 3.0e-05 at step 1, "
            "50% / 4.0e-05 over steps") in text


def _write_check(folder: Path, name: str, summary: dict, config: dict, command: str = "stockr1 bench grpo_check") -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "summary.json").write_text(json.dumps({**summary, "steps": 2}))
    (folder / name / "run_info.json").write_text(json.dumps({"command": f"{command} --out {name}", "config": config}))


def test_side_by_side_reads_each_checks_own_verdicts_and_counts_them(tmp_path: Path) -> None:
    """One row per grpo_check report (a grpo_credit report and a folder without outputs are not checks),
    the verdicts and intervals its summary holds, the recipe's departures named; the summary line counts the
    holds and says the intervals are not corrected over the checks."""
    cfg = GRPOCheckConfig.from_dict({**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 400})
    tie, rise = summarise(_res([0.3, -0.25]), cfg), summarise(_res([0.3, 0.25]), cfg)
    rise["recipe"] = {**rise["recipe"], "adam_eps": 1e-2, "rows_lr": 2e-4, "rows_adam_eps": None,
                      "credit": {"mode": "answer_span", "answer_prior": "cancel"}, "precision": "bf16-mixed"}
    _write_check(tmp_path, "a-tie", tie, {"balance_yes_no": True})
    _write_check(tmp_path, "b-rise", rise, {"grpo": {"overrides": {"rollout": {"merge_lora": True, "twin_dtype": "bfloat16"}}}})
    _write_check(tmp_path, "c-credit", rise, {}, command="stockr1 bench grpo_credit")
    (tmp_path / "d-empty").mkdir()
    checks = read_checks(tmp_path)
    assert [c["name"] for c in checks] == ["a-tie", "b-rise"]
    out = tmp_path / "side_by_side"
    rows = [row(c, out) for c in checks]
    t, r = tie["rise"], rise["rise"]
    assert rows[0]["rise"] == f"{t['diff']:+.3f} [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]: tie (95.0%)"
    assert rows[1]["rise"] == f"{r['diff']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]: **holds** (95.0%)" and rows[1]["check"] == "[b-rise](../b-rise/README.md)"
    assert rows[0]["trained"] == "8 balanced yes/no; 2 steps x 2 seeds; lr 1e-06; credit Eq. 1"
    assert rows[1]["trained"] == ("8 mixed; 2 steps x 2 seeds; lr 1e-06; AdamW eps 0.01; rows lr 0.0002, eps 0.01; "
                                  "credit answer_span (answer prior cancelled); bf16-mixed; decoded by a merged "
                                  "bfloat16 twin")  # read from the overrides of a run whose recipe lacks the keys
    assert rows[0]["kl"] == "1.0e-03" and rows[0]["toward_gold"] == "–"
    shift = {"diff": -0.3, "ci_low": -0.5, "ci_high": -0.1, "verdict": "worse"}  # a shift has no good side
    assert interval_text(shift, 2, shift=True) == "-0.30 [-0.50, -0.10]: toward No"
    assert interval_text({**shift, "ci_high": 0.1}, 2, shift=True).endswith(": tie")
    assert interval_text(shift, 2) == "-0.30 [-0.50, -0.10]: worse"
    assert side_by_side(["--folder", str(tmp_path)]) == 0
    text = (out / "README.md").read_text()
    assert "1 of 2 checks read a rise that holds; each interval is its own check's, not corrected over the 2 checks" in text
    assert "up to 10% (Bonferroni, their alphas summed)" in text
    assert json.loads((out / "rows.json").read_text()) == rows
    assert [c["name"] for c in read_checks(tmp_path)] == ["a-tie", "b-rise"]  # its own output is not a check
    with pytest.raises(FileExistsError, match="already holds results"):
        side_by_side(["--folder", str(tmp_path)])
    (tmp_path / "a-tie" / "summary.json").write_text("{")
    with pytest.raises(ValueError, match="a-tie: its summary.json or run_info.json is not valid JSON"):
        read_checks(tmp_path)


def test_committed_side_by_side_is_current() -> None:
    """results/grpo_check/side_by_side lists every committed check with the figures their summaries hold."""
    folder, out = ROOT / "results" / "grpo_check", ROOT / "results" / "grpo_check" / "side_by_side"
    rows = [row(c, out) for c in read_checks(folder)]
    assert json.loads((out / "rows.json").read_text()) == rows, \
        "results/grpo_check/side_by_side is stale: run `stockr1 bench grpo_checks --overwrite`"


def test_a_second_look_at_the_same_seeds_splits_alpha(tmp_path: Path) -> None:
    base = {**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "n_boot": 400}
    first = summarise(_res([0.3, -0.25]), GRPOCheckConfig.from_dict(base))
    (tmp_path / "summary.json").write_text(json.dumps({**first, "steps": 5}))
    cfg = GRPOCheckConfig.from_dict({**base, "steps": 10, "level": 0.975, "earlier_look": str(tmp_path)})
    second = summarise({**_res([0.3, 0.1]), "earlier_look": read_earlier_look(cfg)}, cfg)
    wide, narrow = second["rise"], summarise(_res([0.3, 0.1]), GRPOCheckConfig.from_dict(base))["rise"]
    assert wide["level"] == 0.975 and wide["ci_low"] < narrow["ci_low"] and wide["ci_high"] > narrow["ci_high"]
    assert second["earlier_look"]["steps"] == 5 and second["earlier_look"]["rise"]["verdict"] == "tie"
    text = readme(second, _info())
    assert "at most 5.0% + 2.5% = 7.5% (Bonferroni), so this look's interval is 97.5%" in text
    r = first["rise"]
    assert "(end − start, probe, 97.5% interval)" in text
    assert f"trained them 5 steps and read {r['diff']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] (tie, 95.0%" in text
    assert "second look" not in readme(first, _info())  # a first look has no sequential section
    for edit, message in (({"seeds": [0, 1, 2]}, "same seeds and fewer steps"), ({"steps": 5}, "fewer steps")):
        with pytest.raises(ValueError, match=message):
            read_earlier_look(GRPOCheckConfig.from_dict({**base, "steps": 10, "level": 0.975,
                                                         "earlier_look": str(tmp_path), **edit}))
    with pytest.raises(FileNotFoundError, match="earlier_look"):
        read_earlier_look(GRPOCheckConfig.from_dict({**base, "earlier_look": str(tmp_path / "none")}))
    third = tmp_path / "second"
    third.mkdir()
    (third / "summary.json").write_text(json.dumps({**second, "steps": 10}))
    with pytest.raises(ValueError, match="only a second look is accounted for"):  # the bound counts two alphas
        read_earlier_look(GRPOCheckConfig.from_dict({**base, "steps": 15, "level": 0.99, "earlier_look": str(third)}))
    assert read_earlier_look(GRPOCheckConfig.from_dict(base)) is None
    with pytest.raises(ValueError, match="0.5 < level < 1"):
        GRPOCheckConfig.from_dict({**base, "level": 95})


@pytest.mark.slow
def test_the_check_runs_end_to_end_on_the_tiny_random_init_policy(tmp_path: Path) -> None:
    """Cut down: 8 queries, 2 steps, 2 seeds, G = 3, 12 new tokens, from the random-init tiny policy (no SFT)."""
    base = tiny_sft_config(tmp_path, {"n_train": 12, "n_val": 4, "n_test": 4}, {}, {})
    grpo = {"run": "g", "seed": 0, "data": DATA, "max_context_chars": 200, "qa": base["qa"],
            "decoder": {"seed": 0, "ts": DECODER_TS, "action": {"cond_dim": 8, "emb_dim": 2, "hidden": 16}},
            "policy": base["policy"], "rollout": {"max_new_tokens": 12, "temperature": 1.0},
            "train": {"group_size": 3, "lr": 1e-3, "micro_batch": 24, "accelerator": "cpu", "num_iterations": 2,
                      "loss": {"beta": 0.04}}, "wandb": {"mode": "disabled"}}
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(grpo))
    check = {"grpo": {"config": str(tmp_path / "grpo.yaml"), "overrides": {}}, "sft_run_dir": None, "n_queries": 8,
             "steps": 2, "seeds": [0, 1], "probe_group_size": 2, "probe_repeats": 2, "answer_contexts": 2,
             "window": 1, "work_dir": str(tmp_path / "work"),
             "threads": 1, "n_boot": 100}
    (tmp_path / "check.yaml").write_text(yaml.safe_dump(check))
    out = tmp_path / "out"
    assert main(["--config", str(tmp_path / "check.yaml"), "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["seeds"] == [0, 1] and s["n_queries"] == 8 and s["rise"]["verdict"] in {"holds", "tie", "worse"}
    assert s["rise"]["n_seeds"] == 2 and s["policy_base"].startswith("tiny")
    for key in ("reward/total", "policy/kl", "policy/clip_low", "rollout/truncated"):
        assert set(s["per_step"][key]) == {"1", "2"}, key  # every step, both seeds
    # logged only on steps where some group has reward spread (a random-init policy's first step does)
    assert "1" in s["per_step"]["reward/var_share/r_ans"] and "1" in s["per_step"]["advantage/sign_flip"]
    assert s["per_step"]["rollout/truncated"]["1"]["mean"] > 0.5  # 12 tokens cannot finish a trace
    assert s["recipe"]["queries_per_step"] == 8 and s["recipe"]["lr"] == 1e-3
    steps = json.loads((out / "steps.json").read_text())
    assert set(steps) == {"0", "1"}
    # two probe draws of G 2 per policy, each cached on its own, pooled into one record of 4 rollouts per query
    assert {p.name for p in (tmp_path / "work" / "probe").iterdir()} == {
        f"{w}-s{s}-g2{r}.json" for w in ("start", "end") for s in (0, 1) for r in ("", "-r1")} | {
        "answer-contexts-g2.json", "logodds-start-g2.json", "logodds-end-s0-g2.json", "logodds-end-s1-g2.json"}
    # one log-odds per context for every policy (12 tokens rarely reach <answer>: often none)
    n_ctx = len(json.loads((tmp_path / "work" / "probe" / "answer-contexts-g2.json").read_text())["contexts"])
    for name in ("logodds-start-g2.json", "logodds-end-s0-g2.json"):
        assert len(json.loads((tmp_path / "work" / "probe" / name).read_text())["logodds"]) == n_ctx
    assert s["probe_repeats"] == 2 and s["per_query_draws"] == 2 and len(s["per_query"]) == 8
    assert all(sum(q["start_answers"].values()) == 2 * 2 * 2 for q in s["per_query"])  # seeds x draws x G
    text = (out / "README.md").read_text()
    assert "## Verdict" in text and "## Diagnostics" in text and (out / "training.png").exists()
    with pytest.raises(FileExistsError):
        main(["--config", str(tmp_path / "check.yaml"), "--out", str(out)])
    # every stage's wall time is kept in the work dir: a re-render from the caches reports what each cost when it ran
    t = json.loads((tmp_path / "work" / "timings.json").read_text())
    assert {"grpo/s0", "grpo/s1", "probe/start-s0-g2", "probe/end-s1-g2-r1", "answer-contexts-g2",
            "logodds-end-s1-g2"} <= set(t) and all(v > 0 for v in t.values())
    assert main(["--config", str(tmp_path / "check.yaml"), "--out", str(out), "--overwrite"]) == 0
    assert json.loads((out / "run_info.json").read_text())["timings_s"] == t


@pytest.mark.parametrize(("credit", "report", "column"), [
    ({"mode": "answer_span", "answer_prior": "project"}, "answer prior projected out", "credit answer_span (answer prior projected out)"),
    ({"mode": "answer_span", "answer_prior": "hold", "hold_per_query": 3}, "read on 3 decision contexts per query",
     "credit answer_span (answer prior held)"),
    ({"answer_prior": "hold"}, "credit sequence (Stock-R1 Eq. 1: the total's advantage on every token; each step's",
     "credit Eq. 1 (answer prior held)"),
    ({"mode": "answer_span", "answer_prior": "hold", "answer_tags": False}, "the answer span's words (its <answer> tags "
     "left out) carries", "credit answer_span (words) (answer prior held)"),
])
def test_the_credit_texts_name_the_answer_prior(credit: dict, report: str, column: str) -> None:
    assert report in credit_text({"credit": credit})
    summary = {"n_queries": 8, "balance_yes_no": True, "steps": 4, "seeds": [0, 1], "recipe": {"lr": 2e-4, "credit": credit}}
    assert recipe_text(summary, {}).endswith(column)


def test_the_side_by_side_names_a_kl_coefficient_only_where_the_check_sets_it() -> None:
    summary = {"n_queries": 8, "balance_yes_no": True, "steps": 6, "seeds": [4, 5],
               "recipe": {"lr": 8e-4, "beta": 0.4, "credit": {"mode": "answer_span", "answer_prior": "hold"}}}
    config = {"grpo": {"overrides": {"train": {"loss": {"beta": 0.4}}}}}
    assert "lr 0.0008; KL beta 0.4; credit answer_span" in recipe_text(summary, config)
    # the recipe's own beta (no override) is not a departure: the column leaves it out
    assert "beta" not in recipe_text({**summary, "recipe": {**summary["recipe"], "beta": 0.04}}, {})
