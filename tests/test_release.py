"""The shipped tiny SFT run (``release/tiny``) and the code that packs, checks and installs it.

- pack -> verify -> install round-trips a run; a changed, missing or unlisted file is refused naming
  it; a release over the size cap is refused and the old one kept;
- the committed release loads in a fresh process the way the demo and ``stockr1 ask`` load it, and
  its manifest records the command, commit and data hash that made it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stockr1.release import MANIFEST, ReleaseError, install, pack, verify

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


def test_pack_verify_install_round_trip_and_what_stays_behind(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "run")
    man = pack(run, tmp_path / "rel", "stockr1 sft --config x.yaml", data_hash="abc")
    assert man["command"] == "stockr1 sft --config x.yaml" and man["data_hash"] == "abc" and man["sft_steps"] == 7
    assert set(man["files"]) == {"sft/policy/policy_config.json", "sft/policy/tokenizer/tokenizer.json",
                                 "sft/decoder/config.json", "sft/qa.jsonl", "sft/thresholds.json", "sft/config.yaml",
                                 "sft/summary.json"}  # no optimizer state, no traces
    assert verify(tmp_path / "rel")["files"] == man["files"]
    install(tmp_path / "rel", tmp_path / "demo" / "sft")
    assert (tmp_path / "demo" / "sft" / "policy" / "tokenizer" / "tokenizer.json").read_text() == "{}"


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
