"""The offline tokenizer: byte-level BPE trained with `tokenizers` on the project's own corpus.

Real policies (Qwen3) use their own tokenizer plus the protocol tokens
(`llm.special_tokens.add_protocol_tokens`). The offline default and the tests use this one.

Determinism: the corpus is consumed in the given order by a single-threaded trainer (BPE ties
are broken by the trainer's ordering, which depends only on the corpus), so the same corpus and
vocab size give byte-identical ``tokenizer.json`` files. ``corpus_hash`` is stored next to the
files so a cached build is reused only for the same corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from transformers import PreTrainedTokenizerFast

from llm.special_tokens import (
    CHAT_SPECIAL_TOKENS,
    ENDOFTEXT,
    EOS_TOKEN,
    IM_END,
    IM_START,
    PAD_TOKEN,
    add_protocol_tokens,
)

# Qwen2.5/Qwen3-Instruct's template without tool/think handling: `<|im_start|>role\ncontent<|im_end|>\n`.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
META_FILE = "stockr1_tokenizer.json"

# GPT-2's pre-tokenizer split with two changes:
# - `_` counts as a letter: snake_case identifiers (the forecast action's JSON keys, e.g.
#   `range_width_bin`) stay one pre-token, so BPE can learn each key as one token. With GPT-2's split
#   a key is 3-5 pieces shared between keys (`end`,`_`,`value` in `end_value` and `end_change_pct`),
#   and a tiny random-init policy loops over them instead of walking the schema.
# - every digit is its own pre-token, as in Qwen's tokenizer. With digit runs merged, 2,868 of the
#   4,011 tokens were numbers (prices, volumes, dates seen in training), so a price from the test era
#   (S&P 500 above 1,565) was made of rare pieces the policy had hardly seen, and it wrote memorised
#   training-era prices instead of copying today's close (results/qa). Ten digit tokens are copied
#   the same way whatever the price level. Numbers get longer (a trace: ~1,000 -> ~1,410 tokens).
# Qwen's own tokenizer (real policies) is untouched.
PRE_TOKENIZE_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[\p{L}_]+|\p{N}| ?[^\s\p{L}\p{N}_]+|\s+(?!\S)|\s+"""


def corpus_hash(texts: Iterable[str], vocab_size: int, pattern: str = PRE_TOKENIZE_PATTERN) -> str:
    """Identifies a build: the corpus, the vocab size and the pre-tokenizer split."""
    h = hashlib.sha256(f"vocab={vocab_size}\npattern={pattern}\n".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def train_tokenizer(texts: Iterable[str], vocab_size: int, out_dir: str | Path | None = None) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer with Qwen's chat tokens and the protocol tokens.

    texts: the corpus, consumed once in order. vocab_size includes the 256 byte symbols and the
    special tokens. Saves to ``out_dir`` (HF format + a meta file) when given.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = list(texts)
    if not texts:
        raise ValueError("train_tokenizer: the corpus is empty")
    min_vocab = 256 + len(CHAT_SPECIAL_TOKENS)
    if vocab_size <= min_vocab:
        raise ValueError(f"vocab_size must exceed {min_vocab} (bytes + special tokens), got {vocab_size}")
    # One thread: the trainer's parallel word counting is order-independent, but pinning it
    # removes any doubt and the corpora here are small.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRE_TOKENIZE_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(CHAT_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[t for t in CHAT_SPECIAL_TOKENS if t not in (EOS_TOKEN, PAD_TOKEN)],
        clean_up_tokenization_spaces=False,
    )
    hf.chat_template = CHAT_TEMPLATE
    hf.padding_side = "left"  # generation pads on the left; training code passes its own side
    add_protocol_tokens(hf)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        hf.save_pretrained(out)
        meta = {"vocab_size": vocab_size, "corpus_hash": corpus_hash(texts, vocab_size), "n_texts": len(texts)}
        (out / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
    return hf


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved by `train_tokenizer` (or any HF tokenizer) and ensure the protocol tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    add_protocol_tokens(tok)
    if tok.chat_template is None:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def build_or_load_tokenizer(texts: Iterable[str], vocab_size: int, out_dir: str | Path) -> PreTrainedTokenizerFast:
    """Reuse ``out_dir`` when it holds a tokenizer trained on the same corpus and vocab size."""
    texts = list(texts)
    meta_path = Path(out_dir) / META_FILE
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("corpus_hash") == corpus_hash(texts, vocab_size):
            return load_tokenizer(out_dir)
    return train_tokenizer(texts, vocab_size, out_dir)


def format_chat(messages: Iterable[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """`CHAT_TEMPLATE` in plain Python (for corpus text, where no tokenizer exists yet)."""
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def chat_prompt(tokenizer, user: str, system: str | None = None) -> str:
    """The generation prompt string for one user turn (ends with ``<|im_start|>assistant\\n``)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


__all__ = [
    "CHAT_TEMPLATE",
    "ENDOFTEXT",
    "build_or_load_tokenizer",
    "chat_prompt",
    "format_chat",
    "corpus_hash",
    "load_tokenizer",
    "train_tokenizer",
]
