"""``stockr1 tokenizer build``: the offline tokenizer and the tiny Qwen3 policy.

Corpus: ``llm.corpus.default_corpus`` (the project's own prompts, traces and action blocks; train
split only). ``--corpus FILE`` (one text per line, or .jsonl with a "text" field) replaces
it. Outputs::

    <out>/tokenizer/      HF tokenizer + stockr1_tokenizer.json (corpus hash; reused if unchanged)
    <out>/policy_tiny/    random-init tiny Qwen3 + tokenizer, a plain HF model dir
                          (``AutoModelForCausalLM.from_pretrained`` loads it; configs/policy/tiny.yaml)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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
    from llm.corpus import default_corpus  # torch and transformers: only when building

    corpus = read_corpus(args.corpus) if args.corpus else default_corpus(args.n_items, seed=args.seed)
    tiny = {"tiny_hidden": args.tiny_hidden, "tiny_layers": args.tiny_layers, "tiny_heads": args.tiny_heads,
            "tiny_kv_heads": args.tiny_kv_heads, "tiny_intermediate": args.tiny_intermediate, "seed": args.seed}
    tok_dir, pol_dir = build(Path(args.out), args.vocab_size, corpus, tiny)
    print(f"tokenizer ({args.vocab_size} max, {len(corpus)} texts) -> {tok_dir}\ntiny policy -> {pol_dir}")
    return 0
