"""SFTTrainer.fit writes one JSON line per step to run_dir/metrics.jsonl, continuous across a resume."""

from __future__ import annotations

import dataclasses
import json

import pytest

from llm.sft import SFTData, SFTTrainer, TrainConfig, lr_lambda
from tests.test_sft_joint import make_model, setup  # noqa: F401 (setup is the shared fixture)

KEYS = {"step", "loss", "l_sft", "l_ts", "l_ts_weighted", "grad_norm", "lr", "sec"}


def read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_metrics_jsonl_one_line_per_step_and_continuous_after_resume(setup, tmp_path) -> None:  # noqa: F811
    w, traces, tok = setup
    data = SFTData(traces, w, tok, max_len=4096)
    cfg = TrainConfig(lr=1e-3, decoder_lr=1e-3, warmup_steps=3, max_steps=2, batch_size=2, ckpt_every=2,
                      accelerator="cpu")
    tr = SFTTrainer(make_model(tok), cfg, tmp_path)
    tr.fit(data)
    log = read(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in log] == [1, 2] and all(set(r) == KEYS for r in log)
    assert log == tr.history
    for r in log:
        assert r["loss"] == pytest.approx(r["l_sft"] + 0.5 * r["l_ts"], rel=1e-5)  # lambda_ts of make_model
        assert r["l_ts_weighted"] == pytest.approx(0.5 * r["l_ts"], rel=1e-6)
        assert r["lr"] == pytest.approx(cfg.lr * lr_lambda(cfg)(r["step"]))  # warmup: (step + 1) / 3
    first_lines = (tmp_path / "metrics.jsonl").read_text()

    # an interrupted run: a step logged after the last checkpoint, then a line torn by the kill
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({**log[-1], "step": 3, "loss": 999.0}) + "\n" + '{"step": 4, "lo')
    tr2 = SFTTrainer(make_model(tok), dataclasses.replace(cfg, max_steps=4), tmp_path)
    assert tr2.maybe_resume() and tr2.step == 2
    tr2.fit(data)
    text = (tmp_path / "metrics.jsonl").read_text()
    log2 = read(tmp_path / "metrics.jsonl")
    assert text.startswith(first_lines)  # the lines up to the checkpoint are kept verbatim
    assert [r["step"] for r in log2] == [1, 2, 3, 4] and 999.0 not in [r["loss"] for r in log2]
    assert log2 == tr2.history
    assert all(a["sec"] <= b["sec"] for a, b in zip(log2, log2[1:], strict=False))  # time continues

    # a fresh run in the same directory (no checkpoint) starts a fresh file
    (tmp_path / "last.ckpt").unlink()
    SFTTrainer(make_model(tok), dataclasses.replace(cfg, max_steps=1), tmp_path).fit(data)
    assert [r["step"] for r in read(tmp_path / "metrics.jsonl")] == [1]
