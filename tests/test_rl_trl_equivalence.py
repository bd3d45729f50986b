"""Our GRPO loss equals TRL's for ``loss_type`` in grpo, dapo and dr_grpo on identical text-only inputs.

TRL side: a real ``trl.GRPOTrainer`` built on a tiny local Qwen3, and its public ``compute_loss`` on
a prepared batch (prompt/completion ids and masks, advantages, old and reference log-probs, and a
``tool_mask`` standing in for tool-observation tokens). ``compute_loss`` runs in eval mode, where
TRL does not divide by the gradient-accumulation count (that attribute only exists inside
``Trainer.train``); dropout is 0 in this config, so eval and train forwards are identical.

Our side: the same weights loaded into ``llm.policy.Policy`` (no LoRA, no soft tokens), log-probs
from ``llm.logprobs.token_logprobs`` with the same temperature, and ``rl.grpo.grpo_loss`` with
``gen_mask = completion_mask * tool_mask``, all uncertainty weights 1, the same ``loss_type`` and, for
dr_grpo, the same ``max_completion_length``. For dapo TRL reads the batch's generated-token count from
``inputs["num_items_in_batch"]`` (set by its generation step); the test sets it to ``gen_mask.sum()``,
which is what our default ``batch_tokens`` is.

Prompts are unpadded: TRL's loss forward passes no position ids, so on a left-padded prompt its
positions differ from the ones generation used, while Policy derives them from the attention mask.
"""

from pathlib import Path

import pytest
import torch

from llm.logprobs import token_logprobs
from llm.policy import Policy, PolicyConfig
from llm.tokenizer import train_tokenizer
from rl.grpo import GRPOLossConfig, grpo_loss

CORPUS = ["the index rose on strong earnings and the yield curve steepened", "volume fell, the close was flat"] * 4
TEMPERATURE = 0.9
BETA = 0.04
MAX_COMPLETION_LENGTH = 8  # > the 7 completion tokens of the batch, so dr_grpo's constant is not the padded T


def _tiny_model_dir(tmp: Path) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = train_tokenizer(CORPUS, vocab_size=300)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).save_pretrained(tmp)
    tok.save_pretrained(tmp)
    return tmp


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return _tiny_model_dir(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="module", params=[(lt, corr) for lt in ("grpo", "dapo", "dr_grpo") for corr in (True, False)],
                ids=lambda p: f"{p[0]}-{'kl_ratio_correction' if p[1] else 'plain_kl'}")
def trainer_and_policy(request, model_dir):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    d = model_dir
    loss_type, correction = request.param
    args = GRPOConfig(output_dir=str(d / "trl_out"), per_device_train_batch_size=4, num_generations=2,
                      beta=BETA, use_bias_correction_kl=correction, temperature=TEMPERATURE, loss_type=loss_type,
                      report_to="none", use_cpu=True, max_completion_length=MAX_COMPLETION_LENGTH, bf16=False)
    trainer = GRPOTrainer(model=str(d), reward_funcs=[lambda prompts, completions, **kw: [0.0] * len(completions)],
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
                          processing_class=AutoTokenizer.from_pretrained(str(d)))
    policy = Policy(PolicyConfig(name_or_path=str(d), lora_r=0, soft_tokens=False))
    return trainer, policy, loss_type, correction


def _batch(vocab: int):
    g = torch.Generator().manual_seed(1)
    b, p, c = 4, 5, 7
    completion_mask = torch.ones(b, c, dtype=torch.long)
    completion_mask[1, 4:] = 0  # shorter completion, right-padded
    completion_mask[3, 6:] = 0
    tool_mask = torch.ones(b, c, dtype=torch.long)
    tool_mask[0, 2:4] = 0  # a tool observation inside the completion
    tool_mask[2, 1:3] = 0
    return dict(
        prompt_ids=torch.randint(3, vocab, (b, p), generator=g),
        prompt_mask=torch.ones(b, p, dtype=torch.long),
        completion_ids=torch.randint(3, vocab, (b, c), generator=g),
        completion_mask=completion_mask,
        tool_mask=tool_mask,
        advantages=torch.tensor([0.8, -0.8, 1.2, -1.2]),
    )


def test_loss_and_gradients_equal_trl(trainer_and_policy) -> None:
    trainer, policy, loss_type, correction = trainer_and_policy
    assert trainer.loss_type == loss_type and trainer.max_completion_length == MAX_COMPLETION_LENGTH
    inputs = _batch(len(policy.tokenizer))
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    att = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    p = inputs["prompt_ids"].shape[1]
    gen_mask = torch.cat([torch.zeros_like(inputs["prompt_mask"]), inputs["completion_mask"] * inputs["tool_mask"]], 1)

    with torch.no_grad():  # old (sampling-time) and reference log-probs that differ from the current ones
        cur = token_logprobs(policy, ids, att, temperature=TEMPERATURE)
    g = torch.Generator().manual_seed(2)
    old = cur + 0.3 * torch.randn(cur.shape, generator=g)  # large enough that some ratios get clipped
    ref = cur + 0.2 * torch.randn(cur.shape, generator=g)
    inputs["old_per_token_logps"] = old[:, p:]
    inputs["ref_per_token_logps"] = ref[:, p:]
    inputs["num_items_in_batch"] = gen_mask.sum()  # dapo's normaliser, as TRL's generation step sets it

    trainer.model.eval()
    trainer.model.zero_grad()
    trl_loss = trainer.compute_loss(trainer.model, dict(inputs))
    trl_loss.backward()
    trl_grads = {n: q.grad.clone() for n, q in trainer.model.named_parameters() if q.grad is not None}

    policy.eval()
    policy.zero_grad()
    logp = token_logprobs(policy, ids, att, temperature=TEMPERATURE)
    ours = grpo_loss(logp, inputs["advantages"], gen_mask, old_logp=old, ref_logp=ref,
                     weights=torch.ones(4), cfg=GRPOLossConfig(beta=BETA, kl_ratio_correction=correction,
                                                               loss_type=loss_type,
                                                               max_completion_length=MAX_COMPLETION_LENGTH))
    ours.loss.backward()
    our_grads = {n: q.grad for n, q in policy.model.named_parameters() if q.grad is not None}

    assert ours.clip_low.item() + ours.clip_high.item() > 0  # the clipped branch is exercised
    assert ours.loss.item() == pytest.approx(trl_loss.item(), rel=1e-5, abs=1e-6)
    assert set(our_grads) == set(trl_grads) and len(trl_grads) > 10
    for name, g_trl in trl_grads.items():
        assert torch.allclose(our_grads[name], g_trl, rtol=1e-4, atol=1e-6), name
    metrics = trainer._metrics["eval"]  # TRL's own logged diagnostics agree with ours
    assert metrics["kl"][-1] == pytest.approx(ours.kl.item(), rel=1e-4)
    assert metrics["clip_ratio/high_mean"][-1] == pytest.approx(ours.clip_high.item(), rel=1e-4)
