"""`stockr1 tokenizer build`: tokenizer + tiny policy dir loadable like any HF model; corpus reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from llm.policy import Policy, PolicyConfig
from llm.special_tokens import PROTOCOL_TOKENS
from llm.tokenizer_cli import main, read_corpus


def _write_corpus(path: Path) -> Path:
    lines = [f"Ticker: SP500 Date: 2001-02-{i % 28 + 1:02d} close {1200 + i:.2f} <answer>Yes</answer>" for i in range(120)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_build_writes_tokenizer_and_loadable_tiny_policy(tmp_path: Path):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    args = ["build", "--out", str(tmp_path / "ck"), "--corpus", str(corpus), "--vocab-size", "400",
            "--tiny-hidden", "32", "--tiny-layers", "2", "--tiny-intermediate", "64"]
    assert main(args) == 0
    tok_json = (tmp_path / "ck" / "tokenizer" / "tokenizer.json").read_bytes()
    assert main(args) == 0  # rebuild: cached tokenizer reused, identical bytes
    assert (tmp_path / "ck" / "tokenizer" / "tokenizer.json").read_bytes() == tok_json
    pol_dir = tmp_path / "ck" / "policy_tiny"
    assert json.loads((pol_dir / "config.json").read_text())["hidden_size"] == 32
    # loads through the from_pretrained path, exactly like a hub model
    pol = Policy(PolicyConfig(name_or_path=str(pol_dir), lora_r=0, d_ts=4, attn_implementation=None))
    assert all(pol.tokenizer.convert_tokens_to_ids(t) != pol.tokenizer.unk_token_id for t in PROTOCOL_TOKENS)
    ref = Policy(PolicyConfig(name_or_path="tiny", lora_r=0, d_ts=4, tiny_hidden=32, tiny_intermediate=64),
                 tokenizer=pol.tokenizer)
    ids = pol.tokenizer("close 1201.00 <answer>", return_tensors="pt").input_ids
    torch.testing.assert_close(pol(ids).logits, ref(ids).logits)  # saved weights = seeded tiny init


def test_read_corpus_formats_and_errors(tmp_path: Path):
    (tmp_path / "a.txt").write_text("one\n\ntwo\n")
    assert read_corpus(tmp_path / "a.txt") == ["one", "two"]
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\n{"txt": "y"}\n')
    with pytest.raises(ValueError, match="b.jsonl:2"):
        read_corpus(tmp_path / "b.jsonl")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        read_corpus(tmp_path / "missing.txt")


@pytest.mark.slow
def test_default_corpus_is_deterministic_and_speaks_the_protocol():
    from llm.corpus import default_corpus

    a = default_corpus(n_items=40)
    assert a == default_corpus(n_items=40)
    assert any("<forecast_ts>" in t and "<answer>" in t for t in a)  # traces with observations and answers
    assert any("<ts>" in t and t.startswith("<|im_start|>system") for t in a)  # prompts with placeholders
    assert any(t.startswith("<forecast_action>{") for t in a)  # action blocks
