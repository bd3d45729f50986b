"""The from_pretrained path with a Qwen-like local model whose tokenizer lacks the protocol tokens:
tokens added, embeddings fitted (padded matrix vs resize), untied lm_head rows trainable under LoRA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from llm.policy import Policy, PolicyConfig
from llm.special_tokens import PROTOCOL_TOKENS


def _plain_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["the close rose by one percent"] * 20, trainer=tr)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def _save_base(path: Path, rows_extra: int, tied: bool) -> tuple[Path, int]:
    tok = _plain_tokenizer()
    n = len(tok)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=n + rows_extra, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=tied)
    Qwen3ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path, n


@pytest.mark.parametrize("rows_extra", [16, 0])  # Qwen-style padded matrix / exact fit -> resize
def test_protocol_tokens_added_with_mean_rows(tmp_path: Path, rows_extra: int):
    path, n = _save_base(tmp_path / "base", rows_extra, tied=False)
    ref = Qwen3ForCausalLM.from_pretrained(path)
    pol = Policy(PolicyConfig(name_or_path=str(path), lora_r=0, d_ts=4))
    ids = [pol.tokenizer.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS]
    assert ids == list(range(n, n + len(PROTOCOL_TOKENS)))
    emb = pol.model.get_input_embeddings().weight
    head = pol.model.get_output_embeddings().weight
    assert emb.shape[0] == max(n + rows_extra, n + len(PROTOCOL_TOKENS))
    for w, w0 in ((emb, ref.get_input_embeddings().weight), (head, ref.get_output_embeddings().weight)):
        torch.testing.assert_close(w[:n], w0[:n])  # existing rows untouched
        torch.testing.assert_close(w[ids], w0[:n].mean(0, keepdim=True).expand(len(ids), -1), atol=1e-5, rtol=1e-4)


def test_untied_head_protocol_rows_train_under_lora(tmp_path: Path):
    path, _ = _save_base(tmp_path / "base", 16, tied=False)
    pol = Policy(PolicyConfig(name_or_path=str(path), lora_r=2, lora_alpha=2, d_ts=4))
    names = [n for n, p in pol.named_parameters() if p.requires_grad and "trainable_tokens" in n]
    assert any("embed_tokens" in n for n in names) and any("lm_head" in n for n in names)
    answer = pol.tokenizer.convert_tokens_to_ids("<answer>")
    ids = pol.tokenizer("the close <answer>", return_tensors="pt").input_ids
    loss = -torch.log_softmax(pol(ids).logits[0, -2], -1)[answer]
    loss.backward()
    head_delta = next(p for n, p in pol.named_parameters() if "lm_head" in n and "trainable_tokens_delta" in n)
    assert head_delta.grad is not None and head_delta.grad.abs().sum() > 0


def test_lora_on_local_base_save_load_round_trip(tmp_path: Path):
    path, _ = _save_base(tmp_path / "base", 16, tied=False)
    pol = Policy(PolicyConfig(name_or_path=str(path), lora_r=2, lora_alpha=2, d_ts=4, lora_dropout=0.0))
    with torch.no_grad():
        for p in pol.trainable_parameters():
            p.add_(0.1 * torch.randn_like(p))
    pol.save(tmp_path / "saved")
    assert (tmp_path / "saved" / "adapter").exists() and not (tmp_path / "saved" / "model").exists()
    back = Policy.load(tmp_path / "saved")
    ids = pol.tokenizer("the close <answer> rose </answer>", return_tensors="pt").input_ids
    torch.testing.assert_close(back(ids).logits, pol(ids).logits)
