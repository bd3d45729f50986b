"""`stockr1 bench qa --name --qa` on a tiny saved run: the row label and the evaluated questions."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from benchmarks.qa.command import main
from forecast_action.build import save_decoder
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.encoder import ActionEncoderConfig
from llm.build import load_data
from llm.qa import QAConfig, QAGenerator, save_items
from llm.qa.prompt import SYSTEM_PROMPT
from llm.tokenizer import train_tokenizer
from ts_encoder.config import TSEncoderConfig

DATA = {"source": "synthetic", "n_tickers": 2, "n_days": 400, "seed": 0, "lookback": 90, "horizon": 10}


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_policy):
    """A saved tiny run (policy/, decoder/, config.yaml, qa.jsonl) and a second QA file."""
    root = tmp_path_factory.mktemp("qa_args")
    run = root / "run"
    windows, ctx = load_data(DATA)
    own, _ = QAGenerator(windows, ctx).generate(QAConfig(n_train=6, n_val=0, n_test=3, seed=0))
    other, _ = QAGenerator(windows, ctx).generate(QAConfig(n_train=6, n_val=0, n_test=2, seed=7))
    run.mkdir()
    save_items(own, run / "qa.jsonl")
    save_items(other, root / "other.jsonl")
    (run / "config.yaml").write_text(yaml.safe_dump({"data": DATA, "max_context_chars": 200}))
    train_tokenizer([SYSTEM_PROMPT] + [it.question for it in own + other], 400, root / "tok")
    torch.manual_seed(0)
    ts = TSEncoderConfig(lookback=90, horizon=10, patch_len=15, d_model=16, n_layers=1, n_heads=2, ffn_dim=32,
                         dropout=0.0, d_llm=16)
    dec = ActionConditionedDecoder(ts, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16))
    save_decoder(dec, run / "decoder")
    tiny_policy(tokenizer_path=str(root / "tok"), d_ts=16).save(run / "policy")
    return run, own, other, root


def questions(out) -> list[str]:
    return [s["question"] for rows in json.loads((out / "samples.json").read_text()).values() for s in rows]


def test_name_labels_the_row_and_qa_replaces_the_questions(run) -> None:
    run_dir, own, other, root = run
    args = ["--checkpoint", str(run_dir), "--n", "2", "--max-new-tokens", "4", "--threads", "1"]
    assert main([*args, "--out", str(root / "default")]) == 0
    metrics = json.loads((root / "default" / "metrics.json").read_text())
    assert "stock-r1-sft" in metrics
    assert questions(root / "default") == [it.question for it in own if it.split == "test"][:2]
    # 4 new tokens cannot hold an action: both rollouts fail, and each is listed with its cause
    failed = json.loads((root / "default" / "failed_rollouts.json").read_text())["stock-r1-sft"]
    assert [f["id"] for f in failed] == [it.id for it in own if it.split == "test"][:2]
    assert {f["kind"] for f in failed} == {"no_action"}
    assert json.loads((root / "default" / "failures.json").read_text())["stock-r1-sft"]["no_action"] == 2
    # the README is generated from this run: command, the policy's 0% protocol with its interval, and
    # a difference to majority of exactly minus majority's accuracy (the policy answers nothing)
    readme = (root / "default" / "README.md").read_text()
    assert "--n 2" in readme and "| stock-r1-sft | 0.0 [0.0, " in readme
    iv = json.loads((root / "default" / "intervals.json").read_text())["stock-r1-sft"]
    assert iv["minus"]["majority"]["diff"] == pytest.approx(-metrics["majority"]["overall"])
    # tool-readers (GARCH; the run's decoder without an action) are rows beside the baselines, with
    # differences; no action was written, so no start_value read the prompt; the base model is named
    assert {"tool_reader_garch", "tool_reader_decoder"} <= set(metrics) and "tool_reader_decoder" in iv["minus"]
    assert metrics["stock-r1-sft"]["start_value_read_rate"] == 0.0
    assert metrics["stock-r1-sft"]["evidence_read_rate"] == 0.0  # 4 tokens cannot state the price sentence
    rollouts = [json.loads(line) for line in (root / "default" / "rollouts.jsonl").read_text().splitlines()]
    assert [(r["policy"], r["id"], r["correct"]) for r in rollouts] == \
        [("stock-r1-sft", it.id, False) for it in own if it.split == "test"][:2]
    assert metrics["stock-r1-sft"]["base_model"].startswith("random-init tiny Qwen3")

    assert main([*args, "--out", str(root / "named"), "--name", "stock-r1-grpo", "--qa", str(root / "other.jsonl"),
                 "--device", "cpu"]) == 0
    metrics = json.loads((root / "named" / "metrics.json").read_text())
    assert "stock-r1-grpo" in metrics and "stock-r1-sft" not in metrics
    assert "| stock-r1-grpo |" in (root / "named" / "table.md").read_text()
    other_test = [it.question for it in other if it.split == "test"]
    assert questions(root / "named") == other_test[:2]
    assert other_test[:2] != [it.question for it in own if it.split == "test"][:2]


def test_bad_qa_file_is_named(run) -> None:
    run_dir, _, _, root = run
    with pytest.raises(SystemExit, match="missing.jsonl does not exist"):
        main(["--checkpoint", str(run_dir), "--out", str(root / "x"), "--qa", str(root / "missing.jsonl")])
    only_train = root / "train_only.jsonl"
    only_train.write_text("".join(line + "\n" for line in (root / "other.jsonl").read_text().splitlines()
                                  if '"split": "train"' in line))
    with pytest.raises(SystemExit, match="has no test-split questions"):
        main(["--checkpoint", str(run_dir), "--out", str(root / "x"), "--qa", str(only_train)])


def test_compare_grades_a_second_policy_on_the_same_questions_with_a_paired_difference(run) -> None:
    run_dir, own, _, root = run
    out = root / "compare"
    assert main(["--checkpoint", str(run_dir), "--compare", str(run_dir), "--compare-name", "again", "--n", "2",
                 "--max-new-tokens", "4", "--threads", "1", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"stock-r1-sft", "again", "majority"} <= set(metrics)
    iv = json.loads((out / "intervals.json").read_text())
    assert "vs_policy" not in iv["stock-r1-sft"]
    d = iv["again"]["vs_policy"]["stock-r1-sft"]  # the same weights on the same questions: exactly no difference
    assert (d["diff"], d["ci_lo"], d["ci_hi"], d["verdict"]) == (0.0, 0.0, 0.0, "tie")
    assert "- again − stock-r1-sft: +0.0 [+0.0, +0.0] tie" in (out / "README.md").read_text()
    assert questions(out) == [it.question for it in own if it.split == "test"][:2] * 2


def test_anonymise_evaluates_the_same_questions_without_names_or_dates(run) -> None:
    run_dir, own, _, root = run
    out = root / "anon"
    assert main(["--checkpoint", str(run_dir), "--n", "2", "--max-new-tokens", "4", "--threads", "1", "--anonymise",
                 "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"stock-r1-sft", "stock-r1-sft-anonymised"} <= set(metrics)
    test = [it for it in own if it.split == "test"][:2]
    asked = json.loads((out / "samples.json").read_text())["stock-r1-sft-anonymised"]
    assert [s["answer"] for s in asked] == [it.answer for it in test]  # answers unchanged
    for s, it in zip(asked, test, strict=True):
        assert it.ticker not in s["question"] and it.date not in s["question"]
    gap = json.loads((out / "intervals.json").read_text())["stock-r1-sft"]["anonymised"]
    assert gap["diff"] == 0.0 and gap["verdict"] == "tie"  # 4 tokens: neither run answers anything
    assert "Memorisation probe" in (out / "README.md").read_text()


def qa_test(run_dir) -> list:
    from llm.qa import load_items

    return [it for it in load_items(run_dir / "qa.jsonl") if it.split == "test"]


def rollouts_of(out) -> list[dict]:
    return [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]


def test_reuse_takes_rollouts_only_where_every_input_is_identical(run) -> None:
    run_dir, _, _, root = run
    base = ["--checkpoint", str(run_dir), "--threads", "1", "--n", "3"]
    first, again = root / "reuse_first", root / "reuse_again"
    assert main([*base, "--max-new-tokens", "24", "--out", str(first)]) == 0
    assert main([*base, "--max-new-tokens", "24", "--reuse", str(first), "--out", str(again)]) == 0
    m1, m2 = (json.loads((d / "metrics.json").read_text())["stock-r1-sft"] for d in (first, again))
    assert m1.pop("reused_from") is None and m2.pop("reused_from") == f"{first} (stock-r1-sft: 3 of 3)"
    assert m1 == m2 and rollouts_of(again) == rollouts_of(first)  # graded from storage exactly as decoded
    assert "Rollouts reused, not decoded here" in (again / "README.md").read_text()
    spread = json.loads((first / "answer_spread.json").read_text())["stock-r1-sft"]  # the first policy's answers
    assert m1["constant_answer_templates"] == [sum(r["constant"] for r in spread), len(spread)]
    assert sum(r["n"] for r in spread) == sum(it.answer_type != "numeric" for it in qa_test(run_dir)[:3])
    # another decoding budget changes the fingerprint; 2 of 3 stored questions is not a whole rollout batch
    for extra, out in ((["--max-new-tokens", "20"], root / "reuse_budget"), (["--n", "2"], root / "reuse_prefix")):
        assert main([*base, "--max-new-tokens", "24", *extra, "--reuse", str(first), "--out", str(out)]) == 0
        assert json.loads((out / "metrics.json").read_text())["stock-r1-sft"]["reused_from"] is None


def test_reusable_prefix_is_every_question_or_whole_batches_of_the_shared_prefix() -> None:
    from benchmarks.qa.reuse import reusable_prefix

    assert reusable_prefix(list("abc"), list("abc"), batch=2) == 3  # identical: the partial last batch too
    assert reusable_prefix(list("abc"), list("abcdef"), batch=2) == 2  # c was decoded in a batch of one
    assert reusable_prefix(list("abcd"), list("abcdef"), batch=2) == 4
    assert reusable_prefix(list("abcdef"), list("abc"), batch=2) == 2
    assert reusable_prefix(list("abxd"), list("abcd"), batch=2) == 2
    assert reusable_prefix(list("xbcd"), list("abcd"), batch=2) == 0


def test_an_extended_run_reuses_whole_batches_and_decodes_the_rest_as_a_fresh_run(run) -> None:
    """--n 6 reusing an --n 3 run (batches of 2): 2 rollouts reused, 4 decoded, all equal to a fresh --n 6."""
    from benchmarks.qa.command import evaluate_run
    from benchmarks.qa.reuse import rollout_record, write_reuse_index

    run_dir, own, _, root = run
    windows, _ = load_data(DATA)
    items = own[:6]
    short = root / "extend_short"
    short.mkdir()
    _, pairs = evaluate_run(run_dir, items[:3], windows, 24, 200, batch_size=2)
    (short / "rollouts.jsonl").write_text("".join(json.dumps(rollout_record("p", it, r, False)) + "\n"
                                                  for it, r in pairs))
    write_reuse_index(short, {"p": "fp"})
    fresh_m, fresh = evaluate_run(run_dir, items, windows, 24, 200, batch_size=2)
    ext_m, ext = evaluate_run(run_dir, items, windows, 24, 200, reuse=(short, "fp"), batch_size=2)
    assert ext_m.pop("reused_from") == f"{short} (p: 2 of 6)" and fresh_m.pop("reused_from") is None
    assert [(it.id, r.completion, r.answer) for it, r in ext] == [(it.id, r.completion, r.answer) for it, r in fresh]
    assert ext_m == fresh_m
    other_m, _ = evaluate_run(run_dir, items, windows, 24, 200, reuse=(short, "another"), batch_size=2)
    assert other_m["reused_from"] is None  # another fingerprint: nothing reused


def test_compare_n_evaluates_the_second_policy_on_a_prefix_paired_on_it(run) -> None:
    run_dir, own, _, root = run
    out = root / "compare_n"
    assert main(["--checkpoint", str(run_dir), "--compare", str(run_dir), "--compare-name", "again", "--n", "3",
                 "--compare-n", "1", "--max-new-tokens", "4", "--threads", "1", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["stock-r1-sft"]["n"], metrics["again"]["n"]) == (3, 1)
    d = json.loads((out / "intervals.json").read_text())["again"]["vs_policy"]["stock-r1-sft"]
    assert d["diff"] == 0.0  # the same weights on the same first question
    readme = (out / "README.md").read_text()
    assert "| again (first 1 questions) |" in readme and "`again` on the first 1" in readme
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(run_dir), "--compare-n", "1", "--out", str(root / "x")])  # no --compare


def test_a_stored_rollout_grades_as_the_rollout_it_records() -> None:
    from types import SimpleNamespace

    from benchmarks.qa.reuse import rollout_record, stored_rollout
    from forecast_action.schema import ForecastAction
    from llm.qa.core import QAItem
    from llm.qa.evaluate import failure_kind

    item = QAItem(id="q1", family="forecast", template="direction", question="Up or down?", answer="up",
                  answer_type="choice", window=0, ticker="X", date="2020-01-02", split="test", choices=("up", "down"))
    partial = ForecastAction(start_value=100.0, direction="up")  # an incomplete action stays incomplete
    for action, answer in ((partial, "up"), (None, None), (partial, "sideways")):
        r = SimpleNamespace(action=action, answer=answer, completion="text", n_generated=7)
        s = stored_rollout(json.loads(json.dumps(rollout_record("p", item, r, False))))
        assert (s.action, s.answer, s.completion, s.n_generated) == (action, answer, "text", 7)
        assert failure_kind(item, s) == failure_kind(item, r)
