"""Run in a fresh process by tests/test_base_model.py: build the SmolLM2 policy of
configs/policy/smollm2-135m.yaml from the converted base, check it and write what it found as JSON.

    python -m tests.smol_probe build OUT   # shapes, template, greedy answer, one training step, save OUT/policy
    python -m tests.smol_probe load OUT    # Policy.load(OUT/policy): logits equal to the saved ones
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

CONFIG = "configs/policy/smollm2-135m.yaml"
PROBE_TEXT = "Ticker: SP500 <ts><ts> <forecast_action>{\"direction\": \"up\"}</forecast_action> <answer>Yes</answer>"


def _probe_inputs(policy):
    ids = policy.tokenizer(PROBE_TEXT, add_special_tokens=False, return_tensors="pt").input_ids
    ts = torch.linspace(-1, 1, 2 * policy.cfg.d_ts).reshape(1, 2, policy.cfg.d_ts)
    return ids, ts


def build(out: Path) -> dict:
    from llm.policy import Policy, PolicyConfig
    from llm.special_tokens import PROTOCOL_TOKENS
    from llm.tokenizer import chat_prompt

    torch.manual_seed(0)
    pol = Policy(PolicyConfig.from_yaml(CONFIG))
    tok, base = pol.tokenizer, pol.model.get_base_model()
    facts = {
        "type": type(base).__name__, "layers": base.config.num_hidden_layers, "hidden": base.config.hidden_size,
        "base_vocab": base.config.vocab_size, "tokenizer_len": len(tok),
        "embedding_rows": base.get_input_embeddings().weight.shape[0],
        "protocol_ids": [tok.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS],
        "protocol_single_token": all(len(tok(t, add_special_tokens=False).input_ids) == 1 for t in PROTOCOL_TOKENS),
        "lora_targets": list(pol.lora_target_names), "projector_out": pol.projector.net[-1].out_features,
        "default_chat_prompt": chat_prompt(tok, "hi"),
        "digits": tok("2663.42", add_special_tokens=False).input_ids,
    }
    # greedy answer to a question any instruction model of this size knows: the weights are the trained ones
    pol.eval()
    ids = tok(chat_prompt(tok, "What is the capital of France? Answer in one word.", "You are a helpful assistant."),
              add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        for _ in range(8):
            ids = torch.cat([ids, pol(ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
    facts["greedy"] = tok.decode(ids[0, -8:])
    # one optimiser step: the protocol rows, LoRA and projector move; the base and other rows do not
    pol.train()
    emb = lambda: pol.model.get_input_embeddings()(torch.arange(len(tok))).detach().clone()  # noqa: E731
    rows0 = emb()
    frozen = {n: p.detach().clone() for n, p in pol.named_parameters() if not p.requires_grad and "embed" not in n}
    lora_b = {n: p.detach().clone() for n, p in pol.named_parameters() if "lora_B" in n}
    proj = {n: p.detach().clone() for n, p in pol.projector.named_parameters()}
    x, ts = _probe_inputs(pol)
    opt = torch.optim.SGD(pol.trainable_parameters(), lr=0.5)
    logp = torch.log_softmax(pol(x, ts_tokens=ts).logits[0, :-1], -1)
    (-logp.gather(1, x[0, 1:, None]).mean()).backward()
    opt.step()
    rows1 = emb()
    moved = (rows1 - rows0).abs().sum(1) > 0
    cur = dict(pol.named_parameters())
    head = pol.model.get_output_embeddings()
    facts.update({
        "rows_moved": moved.nonzero().flatten().tolist(),
        "frozen_unchanged": all(torch.equal(cur[n], v) for n, v in frozen.items()),
        "lora_b_moved": sum(not torch.equal(cur[n], v) for n, v in lora_b.items()),
        "n_lora_b": len(lora_b),
        "projector_moved": all(not torch.equal(dict(pol.projector.named_parameters())[n], v) for n, v in proj.items()),
        # tied embedding: the LM head scores a protocol token with its trained row
        "head_tied_to_rows": bool(torch.allclose(pol(x[:, :3], ts_tokens=None).logits[0, -1, facts["protocol_ids"]],
                                                 _head_scores(pol, x[:, :3], facts["protocol_ids"], rows1), atol=1e-4)),
        "head_type": type(head).__name__,
    })
    pol.eval()
    out.mkdir(parents=True, exist_ok=True)
    pol.save(out / "policy")
    with torch.no_grad():
        torch.save(pol(x, ts_tokens=ts).logits, out / "logits.pt")
    return facts


def _head_scores(pol, x, ids, rows):
    """The last position's scores of ``ids`` as hidden state . row (the tied head, computed by hand)."""
    with torch.no_grad():
        h = pol.model.get_base_model().model(input_ids=x).last_hidden_state[0, -1]
    return rows[ids] @ h


def load(out: Path) -> dict:
    from llm.policy import Policy

    pol = Policy.load(out / "policy").eval()
    x, ts = _probe_inputs(pol)
    with torch.no_grad():
        got = pol(x, ts_tokens=ts).logits
    want = torch.load(out / "logits.pt")
    saved = [p for p in (out / "policy").rglob("*") if p.is_file()]
    return {"max_abs_diff": float((got - want).abs().max()), "adapter_saved": (out / "policy" / "adapter").is_dir(),
            "base_copied": (out / "policy" / "model").exists(), "saved_mb": sum(p.stat().st_size for p in saved) / 2**20,
            "base_record": json.loads((out / "policy" / "base.json").read_text())}


if __name__ == "__main__":
    cmd, out = sys.argv[1], Path(sys.argv[2])
    print(json.dumps({"build": build, "load": load}[cmd](out)))
