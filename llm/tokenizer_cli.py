"""``stockr1 tokenizer build``: the offline tokenizer and the tiny Qwen3 policy.

Corpus (deterministic, train split only): the shared system prompt, the chat-formatted QA prompts
(`llm.qa` generator on the embedded sample, with context and ``<ts>`` placeholders), and SFT-style
traces written by `llm.traces.TraceWriter` around a *persistence* forecaster (flat path at the
last close: no decoder training needed and no future data touches the text), plus each item's
target action block. ``--corpus FILE`` (one text per line, or .jsonl with a "text" field) replaces
it. Outputs::

    <out>/tokenizer/      HF tokenizer + stockr1_tokenizer.json (corpus hash; reused if unchanged)
    <out>/policy_tiny/    random-init tiny Qwen3 + tokenizer, a plain HF model dir
                          (``AutoModelForCausalLM.from_pretrained`` loads it; configs/policy/tiny.yaml)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stockr1.types import CLOSE, Forecast, Windows, train_only


class PersistenceForecaster:
    """Flat forecast at the last close/volume: the decoder stand-in for corpus text."""

    def forecast(self, windows: Windows, actions: Sequence, n_samples: int, generator=None) -> Forecast:
        s = windows.y.shape[2]
        close = np.repeat(windows.last_close[:, None], s, 1)
        vol = np.repeat(windows.last_volume[:, None], s, 1)
        return Forecast(close, np.repeat(close[:, None], 2, 1), close, close, vol, None)


def default_corpus(n_items: int = 1500, k_ts: int = 8, seed: int = 0) -> list[str]:
    """The project's own prompt/answer text (see module docstring)."""
    from forecast_action.derive import ActionThresholds, derive_actions
    from llm.qa import QAConfig, generate_qa
    from llm.qa.prompt import SYSTEM_PROMPT, user_message
    from llm.sft import load_data
    from llm.special_tokens import ts_placeholders
    from llm.tokenizer import format_chat
    from llm.tools import ForecastTool
    from llm.traces import TraceConfig, TraceWriter

    windows, context_fn = load_data({"source": "sample"})
    items, _ = generate_qa(windows, QAConfig(n_train=n_items, n_val=0, n_test=0, seed=seed), context_fn)
    items = [it for it in items if it.split == "train"]
    thresholds = ActionThresholds.fit(train_only(windows))
    ctx = windows.context if len(windows.context) == len(windows) else None
    texts = [SYSTEM_PROMPT]
    for it in items:
        user = user_message(it, str(ctx[it.window]) if ctx is not None else "", ts_placeholders(k_ts))
        texts.append(format_chat([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]))
    idx = np.array([it.window for it in items])
    for a in derive_actions(windows.future[idx, :, CLOSE], windows.last_close[idx], thresholds):
        texts.append(a.to_block())
    writer = TraceWriter(windows, ForecastTool(PersistenceForecaster(), windows, n_samples=2), thresholds,
                         context_fn=context_fn, ts_placeholder=ts_placeholders(k_ts), cfg=TraceConfig(drop_trivial=False))
    traces, _ = writer.write(items)
    texts += [t.completion for t in traces]
    return texts


def read_corpus(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"corpus file {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".jsonl":
        out = []
        for n, line in enumerate(lines, 1):
            if line.strip():
                try:
                    out.append(json.loads(line)["text"])
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise ValueError(f"{path}:{n}: expected a JSON object with a 'text' field ({e})") from e
        return out
    return [ln for ln in lines if ln.strip()]


def build(out: Path, vocab_size: int, corpus: list[str], tiny: dict[str, int]) -> tuple[Path, Path]:
    from llm.policy import Policy, PolicyConfig
    from llm.tokenizer import build_or_load_tokenizer

    tok = build_or_load_tokenizer(corpus, vocab_size, out / "tokenizer")
    policy = Policy(PolicyConfig(name_or_path="tiny", lora_r=0, **tiny), tokenizer=tok)
    policy.model.save_pretrained(out / "policy_tiny")
    tok.save_pretrained(out / "policy_tiny")
    return out / "tokenizer", out / "policy_tiny"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 tokenizer", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="train the offline tokenizer and save the tiny policy")
    b.add_argument("--out", default="checkpoints", help="output root (default: checkpoints)")
    b.add_argument("--vocab-size", type=int, default=4000)
    b.add_argument("--corpus", default=None, help="text file (one text per line) or .jsonl with 'text'")
    b.add_argument("--n-items", type=int, default=1500, help="QA items for the default corpus")
    b.add_argument("--seed", type=int, default=0)
    # the tiny recipe of configs/sft/tiny.yaml (results/sft_recipe: it learns the protocol on CPU)
    for name, default in (("hidden", 128), ("layers", 4), ("heads", 4), ("kv-heads", 2), ("intermediate", 384)):
        b.add_argument(f"--tiny-{name}", type=int, default=default)
    args = ap.parse_args(argv)
    corpus = read_corpus(args.corpus) if args.corpus else default_corpus(args.n_items, seed=args.seed)
    tiny = {"tiny_hidden": args.tiny_hidden, "tiny_layers": args.tiny_layers, "tiny_heads": args.tiny_heads,
            "tiny_kv_heads": args.tiny_kv_heads, "tiny_intermediate": args.tiny_intermediate, "seed": args.seed}
    tok_dir, pol_dir = build(Path(args.out), args.vocab_size, corpus, tiny)
    print(f"tokenizer ({args.vocab_size} max, {len(corpus)} texts) -> {tok_dir}\ntiny policy -> {pol_dir}")
    return 0
