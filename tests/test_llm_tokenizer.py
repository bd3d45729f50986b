"""Offline tokenizer: deterministic build, protocol tokens atomic, Qwen-style chat template."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm.special_tokens import (
    ANSWER_CLOSE,
    FORECAST_ACTION_OPEN,
    PROTOCOL_TOKENS,
    TS_PLACEHOLDER,
    ts_placeholders,
)
from llm.tokenizer import build_or_load_tokenizer, chat_prompt, format_chat, load_tokenizer, train_tokenizer


def _corpus(n: int = 200) -> list[str]:
    return [
        f"Ticker: T{i % 7} Date: 2010-01-{1 + i % 28:02d} close {100 + 1.37 * i:.2f} "
        f"<forecast_action>trend: {'up' if i % 3 else 'down'}</forecast_action> <answer>{i % 2}</answer>"
        for i in range(n)
    ]


def test_same_corpus_gives_identical_files(tmp_path: Path):
    train_tokenizer(_corpus(), 500, tmp_path / "a")
    train_tokenizer(_corpus(), 500, tmp_path / "b")
    a = (tmp_path / "a" / "tokenizer.json").read_bytes()
    b = (tmp_path / "b" / "tokenizer.json").read_bytes()
    assert a == b
    # and a different corpus gives a different vocabulary (the test would catch a constant file)
    train_tokenizer(_corpus()[::-1][:50] + ["zebra quokka " * 20] * 5, 500, tmp_path / "c")
    assert (tmp_path / "c" / "tokenizer.json").read_bytes() != a


def test_protocol_tokens_are_single_ids_and_survive_decode(tmp_path: Path):
    tok = train_tokenizer(_corpus(), 500, tmp_path)
    ids = [tok.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS]
    assert len(set(ids)) == len(PROTOCOL_TOKENS) and tok.unk_token_id not in ids
    text = f"x {FORECAST_ACTION_OPEN}a{ANSWER_CLOSE}{ts_placeholders(3)}"
    enc = tok(text, add_special_tokens=False).input_ids
    assert enc.count(tok.convert_tokens_to_ids(TS_PLACEHOLDER)) == 3
    assert tok.convert_tokens_to_ids(FORECAST_ACTION_OPEN) in enc
    # protocol tags are not "special": skip_special_tokens keeps them for the parsers
    assert tok.decode(enc, skip_special_tokens=True) == text
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
    assert tok.pad_token_id != tok.eos_token_id


def test_chat_template_matches_qwen_format(tmp_path: Path):
    tok = train_tokenizer(_corpus(), 500, tmp_path)
    p = chat_prompt(tok, "hi", system="sys")
    assert p == "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    for gen in (True, False):
        assert format_chat(msgs, gen) == tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
    reloaded = load_tokenizer(tmp_path)
    assert reloaded(p).input_ids == tok(p).input_ids


def test_cache_reused_only_for_same_corpus(tmp_path: Path):
    build_or_load_tokenizer(_corpus(), 500, tmp_path)
    f = tmp_path / "tokenizer.json"
    mtime = f.stat().st_mtime_ns
    build_or_load_tokenizer(_corpus(), 500, tmp_path)
    assert f.stat().st_mtime_ns == mtime  # reused
    build_or_load_tokenizer(_corpus(120), 500, tmp_path)
    assert f.stat().st_mtime_ns != mtime  # rebuilt for a different corpus


def test_bad_arguments_raise_clear_errors(tmp_path: Path):
    with pytest.raises(ValueError, match="empty"):
        train_tokenizer([], 500)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(_corpus(), 100)


def test_action_keys_become_single_tokens_and_text_round_trips(tmp_path: Path):
    """`_` counts as a letter in the pre-tokenizer, so each snake_case action key can be one token
    (with GPT-2's split `end_value` and `end_change_pct` would share the pieces `end`, `_`)."""
    from forecast_action.schema import FIELD_SPECS

    keys = list(FIELD_SPECS)
    corpus = [" ".join(f'"{k}": {i}.5,' for k in keys) for i in range(60)] + _corpus(50)
    tok = train_tokenizer(corpus, 600, tmp_path)
    for k in keys:
        assert len(tok(k, add_special_tokens=False).input_ids) == 1, k
    text = '{"end_value": 2349.91, "end_change_pct": -3.69} snake_case_words and _x 1_000\n\nok'
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text


def test_numbers_split_into_single_digits_whatever_the_corpus(tmp_path: Path):
    """Every digit is its own token, as in Qwen's tokenizer: a price the corpus never held (a
    test-era level) is the same ten digit tokens as a training-era one, so the policy can copy it.
    A corpus full of repeated prices would let BPE merge them if digits were grouped."""
    corpus = [f"close 1258.83 volume 1795600350 on 2004-01-14 close {1200 + i}.25" for i in range(300)]
    tok = train_tokenizer(corpus + _corpus(50), 600, tmp_path)
    for text in ("1258.83", "4674.38", "1795600350"):
        pieces = [tok.decode([i]) for i in tok(text, add_special_tokens=False).input_ids]
        assert pieces == list(text), pieces
    digit_ids = {tok.convert_tokens_to_ids(str(d)) for d in range(10)}
    vocab_numbers = [t for t in tok.get_vocab() if any(c in "0123456789" for c in t) and t not in map(str, range(10))]
    assert vocab_numbers == [] and len(digit_ids) == 10
    text = " close at 4674.38 (+1.76%) on 2016-03-09"
    assert tok.decode(tok(text, add_special_tokens=False).input_ids) == text


def test_cache_key_covers_the_pre_tokenizer_split():
    """A tokenizer built with another split (e.g. digit runs merged) is never reused from the cache."""
    from llm.tokenizer import PRE_TOKENIZE_PATTERN, corpus_hash

    merged_digits = PRE_TOKENIZE_PATTERN.replace(r"\p{N}|", r" ?\p{N}+|")
    assert merged_digits != PRE_TOKENIZE_PATTERN
    assert corpus_hash(_corpus(), 500) == corpus_hash(_corpus(), 500, PRE_TOKENIZE_PATTERN)
    assert corpus_hash(_corpus(), 500, merged_digits) != corpus_hash(_corpus(), 500)
