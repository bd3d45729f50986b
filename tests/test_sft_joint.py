"""Joint SFT: loss masks, which parameters one step moves, resume from the last checkpoint."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import ActionThresholds
from forecast_action.encoder import ActionEncoderConfig, featurize
from llm.logprobs import masked_mean
from llm.policy import Policy, PolicyConfig
from llm.qa import QAConfig, QAGenerator
from llm.qa.core import QAItem
from llm.sft import JointSFT, SFTData, SFTTrainer, TrainConfig, encode_trace, sft_data
from llm.special_tokens import ts_placeholders
from llm.tokenizer import train_tokenizer
from llm.tools import ForecastTool
from llm.traces import PROTOCOL_SPANS, RECALL, TraceConfig, TraceWriter
from stockr1.types import train_only
from tests.test_qa_generator import L, context_fn, make_windows
from tests.test_qa_traces import LinearDecoder, render
from ts_encoder.config import TSEncoderConfig

TS_CFG = TSEncoderConfig(lookback=L, horizon=10, patch_len=5, d_model=16, n_layers=1, n_heads=2, ffn_dim=32,
                         dropout=0.0, d_llm=16, cond_dim=8)


def Decoder() -> ActionConditionedDecoder:
    torch.manual_seed(0)
    return ActionConditionedDecoder(TS_CFG, ActionEncoderConfig(cond_dim=8, emb_dim=4, hidden=16))


def tiny_traces(tok_dir):
    """Windows, 30 train traces and a tokenizer trained on them (saved in ``tok_dir``); deterministic."""
    rng = np.random.default_rng(0)
    w = make_windows(120)
    w = dataclasses.replace(w, x=rng.normal(0, 0.01, w.x.shape).astype(np.float32),
                            y=rng.normal(0, 0.01, w.y.shape).astype(np.float32))
    items, _ = QAGenerator(w, context_fn).generate(QAConfig(n_train=30, n_val=0, n_test=0, seed=0))
    tool = ForecastTool(LinearDecoder(), w, 4, render=render)
    traces, _ = TraceWriter(w, tool, ActionThresholds.fit(train_only(w)), context_fn=context_fn,
                            ts_placeholder=ts_placeholders(TS_CFG.n_tokens),
                            cfg=TraceConfig(drop_trivial=False)).write(items)
    tok = train_tokenizer([t.user + t.completion for t in traces], 600, tok_dir)
    return w, traces, tok


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_traces(tmp_path_factory.mktemp("tok"))


def make_model(tok, lora_r: int = 4, windows=None) -> JointSFT:
    """With ``windows``: the decoder loss of new runs (field dropout + control loss, g fitted on their
    train split); without: L_TS on the full a*."""
    pcfg = PolicyConfig(tiny_hidden=32, tiny_layers=1, tiny_heads=2, tiny_kv_heads=1, tiny_intermediate=64,
                        lora_r=lora_r, lora_alpha=8, lora_dropout=0.0, d_ts=TS_CFG.d_llm)
    loss = DecoderLoss(DecoderRecipe(), ActionThresholds.fit(train_only(windows))) if windows is not None else None  # JointSFT default: full a*
    return JointSFT(Policy(pcfg, tokenizer=tok), Decoder(), lambda_ts=0.5, decoder_loss=loss)


def test_loss_mask_covers_model_tokens_only(setup) -> None:
    _, traces, tok = setup
    t = traces[0]
    ids, mask = encode_trace(tok, t)
    model_text = tok.decode([i for i, m in zip(ids, mask, strict=True) if m])
    other_text = tok.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    assert "</forecast_action>" in model_text and "<answer>" in model_text and model_text.endswith("<|im_end|>")
    assert "<forecast_ts>" not in model_text and "Close: [" not in model_text  # tool observation masked
    assert "<forecast_ts>" in other_text and "Question:" in other_text  # prompt masked too
    assert "Ticker:" not in model_text and "financial analyst" not in model_text
    assert model_text.count("Question:") == 1  # the model restates the question line once, after the tool


def test_emphasis_weights_exactly_the_protocol_spans(setup) -> None:
    """train.emphasis: the restated question line and the closing answer sentence get the weight, every
    other model-written token 1, prompt and tool observation 0; the token ids do not change."""
    w, traces, tok = setup
    t = traces[0]
    ids, plain = encode_trace(tok, t)
    ids5, weights = encode_trace(tok, t, emphasis=5.0)
    assert ids5 == ids and set(weights) == {0.0, 1.0, 5.0}
    assert [x > 0 for x in weights] == [x > 0 for x in plain]  # the same tokens carry a loss
    runs, cur = [], []  # contiguous runs of weighted tokens
    for i, x in zip(ids + [-1], weights + [0.0], strict=True):
        if x == 5.0:
            cur.append(i)
        elif cur:
            runs, cur = runs + [tok.decode(cur).strip()], []
    spans = PROTOCOL_SPANS.findall(t.segments[-1][0])
    assert len(spans) == 2 and spans[0].startswith(RECALL) and spans[1].endswith("</answer>")
    assert runs == spans
    b = SFTData(traces, w, tok, max_len=4096, emphasis=5.0).batch([0])
    assert b.loss_mask.dtype == torch.float32 and float(b.loss_mask.max()) == 5.0


def test_weighted_mask_mean_by_hand() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    assert float(masked_mean(x, torch.tensor([[0.0, 1.0, 3.0, 0.0]]))) == pytest.approx((2 + 9) / 4)
    assert float(masked_mean(x, torch.tensor([[0, 1, 1, 0]]))) == pytest.approx(2.5)


@pytest.mark.parametrize("control", [False, True], ids=["l_ts_only", "control_recipe"])
def test_step_moves_trainable_and_keeps_frozen(setup, control) -> None:
    w, traces, tok = setup
    model = make_model(tok, windows=w if control else None)
    data = SFTData(traces, w, tok, max_len=4096)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tr = SFTTrainer(model, TrainConfig(lr=1e-2, decoder_lr=1e-2, warmup_steps=1, max_steps=2, batch_size=4,
                                       accelerator="cpu"), "unused")
    b = data.batch([0, 1, 2, 3])
    assert int(b.loss_mask.sum()) < int(b.attention_mask.sum())
    for _ in range(2):
        loss = tr.train_step(b)
    assert torch.isfinite(loss.total) and loss.n_tokens > 0
    moved = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and not (moved & frozen)  # base weights untouched
    assert any("lora_" in n for n in moved)
    assert any(n.startswith("policy.projector") for n in moved)
    assert any(n.startswith("decoder.encoder") for n in moved)
    assert any(n.startswith("decoder.action_encoder") for n in moved)
    assert any("base_layer" in n or "embed_tokens" in n for n in frozen)


def test_joint_sft_trains_the_decoder_with_the_standalone_decoder_loss(setup) -> None:
    """One home for the decoder loss: JointSFT's L_TS term is DecoderLoss on a* of the batch."""
    w, traces, tok = setup
    model = make_model(tok, windows=w)
    b = SFTData(traces, w, tok, max_len=4096).batch([0, 1, 2, 3])
    torch.manual_seed(5)
    got = model(b)
    torch.manual_seed(5)
    want = model.decoder_loss(model.decoder, b.x, b.y, featurize(b.actions, b.start))
    assert float(got.ts) == pytest.approx(float(want.total.detach()))
    assert float(want.control.detach()) > 0  # the control term is in it
    assert float(got.total.detach()) == pytest.approx(float(got.sft) + 0.5 * float(want.total.detach()), rel=1e-6)


def test_soft_tokens_reach_the_loss(setup) -> None:
    w, traces, tok = setup
    model = make_model(tok)
    b = SFTData(traces, w, tok, max_len=4096).batch([0, 1])
    l1 = model(b).sft
    with torch.no_grad():
        for p in model.policy.projector.parameters():
            p.add_(0.5)
    assert not torch.allclose(l1, model(b).sft)


def test_resume_continues_from_last_checkpoint(setup, tmp_path) -> None:
    w, traces, tok = setup
    data = SFTData(traces, w, tok, max_len=4096)
    cfg = TrainConfig(lr=1e-3, warmup_steps=1, max_steps=2, batch_size=2, ckpt_every=1, accelerator="cpu")
    tr = SFTTrainer(make_model(tok), cfg, tmp_path)
    tr.fit(data)
    assert (tmp_path / "last.ckpt").exists() and tr.step == 2
    saved = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    tr2 = SFTTrainer(make_model(tok), dataclasses.replace(cfg, max_steps=3), tmp_path)
    assert tr2.maybe_resume() and tr2.step == 2 and len(tr2.history) == 2
    for n, p in tr2.model.named_parameters():
        assert torch.equal(p.detach(), saved[n]), n
    tr2.fit(data)
    assert tr2.step == 3 and [h["step"] for h in tr2.history] == [1, 2, 3]


def test_decoder_warmup_and_roundtrip(setup, tmp_path) -> None:
    from forecast_action.build import load_decoder, save_decoder
    from llm.sft import warmup_decoder

    w, _, _ = setup
    dec = Decoder()
    before = {n: p.detach().clone() for n, p in dec.named_parameters()}
    losses = warmup_decoder(dec, w, ActionThresholds.fit(train_only(w)), steps=3, batch_size=8)
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert any(not torch.equal(p, before[n]) for n, p in dec.named_parameters())
    save_decoder(dec, tmp_path / "d")
    dec2 = load_decoder(tmp_path / "d")
    for (n, p), (_, q) in zip(dec.state_dict().items(), dec2.state_dict().items(), strict=True):
        assert torch.equal(p, q), n
    with pytest.raises(FileNotFoundError, match="missing does not exist"):
        load_decoder(tmp_path / "missing")


def test_template_balance_draws_each_group_equally(setup) -> None:
    """train.balance=template: a template with one trace is drawn as often as one with all the others."""
    w, traces, tok = setup
    n = len(traces)
    groups = ["rare"] + ["common"] * (n - 1)
    balanced = SFTData(traces, w, tok, max_len=4096, groups=groups)
    plain = SFTData(traces, w, tok, max_len=4096)
    rng = np.random.default_rng(0)
    draws = 4000
    rare_balanced = sum(int(balanced.sample(rng, 1)[0] == 0) for _ in range(draws)) / draws
    rare_plain = sum(int(plain.sample(rng, 1)[0] == 0) for _ in range(draws)) / draws
    assert rare_balanced == pytest.approx(0.5, abs=0.03)
    assert rare_plain == pytest.approx(1 / n, abs=0.02)
    batch = balanced.sample(rng, 4)
    assert len(set(batch.tolist())) == 4  # a batch has distinct traces


def test_sft_data_balance_from_items(setup) -> None:
    """sft_data looks each trace's template up in the QA items, and names what is wrong."""
    w, traces, tok = setup
    items = [QAItem(t.item_id, "forecast", f"tpl{k % 2}", "q", t.answer, "yes_no", t.window, "X", "2010-01-04",
                    "train") for k, t in enumerate(traces)]
    data = sft_data(traces, items, w, tok, TrainConfig(max_len=4096, balance="template"))
    assert data.p is not None and float(data.p.sum()) == pytest.approx(1.0)
    assert sft_data(traces, items, w, tok, TrainConfig(max_len=4096)).p is None
    with pytest.raises(ValueError, match="balance must be"):
        TrainConfig(max_len=4096, balance="family")
    with pytest.raises(ValueError, match="have no QA item"):
        sft_data(traces, items[1:], w, tok, TrainConfig(max_len=4096, balance="template"))
    with pytest.raises(ValueError, match="groups has"):
        SFTData(traces, w, tok, max_len=4096, groups=["a"])
