"""How well does a judge separate grounded from broken reasoning? Constructed cases on the sample.

``python -m rl.methods.trade_r1.calibrate [--judge offline|env] [--n 60] --out DIR`` builds, for
held-out (ticker, t) pairs of the offline sample, five completions from the point-in-time context
(the data layer's ``render_context``) and reports the judge's mean scores per case:

- grounded:     3 headlines of the context as reasoning, decision on their net sentiment side;
- stale:        the same built from the context 250 trading days earlier (numbers and dates wrong);
- contradicted: grounded reasoning with the opposite decision;
- paraphrased falsehood: a number-free claim of the opposite move ("rallied strongly" after a
  fall, or vice versa), decision on the claim's side;
- verb-swapped falsehood: the grounded headlines with their direction verbs swapped ("falls 1.5%"
  -> "rallies 1.5%"): same numbers and vocabulary, false content, decision on the new side.

A good judge scores grounded high and the others low. The offline judge catches the first
three by construction (numbers, polarity), the fourth by vocabulary mismatch only, and cannot
catch the last (factuality ~1): it has no notion of which
direction a number moved.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from rl.methods.trade_r1.gates import verify
from rl.methods.trade_r1.judge import OfflineJudge, judge_from_env, polarity

CASES = ("grounded", "stale", "contradicted", "paraphrased falsehood", "verb-swapped falsehood")
SWAP = {"edges up": "edges down", "edges down": "edges up", "falls": "rallies", "rallies": "falls",
        "slides": "surges", "surges": "slides"}
_SWAP = re.compile("|".join(sorted(map(re.escape, SWAP), key=len, reverse=True)))
_HEAD = re.compile(r"^• (\d{4}-\d{2}-\d{2}): (.+)$", re.M)


def headlines(context: str, n: int = 3) -> list[str]:
    return [f"On {d} {h.strip()}." for d, h in _HEAD.findall(context)[:n]]


def cases(context: str, stale_context: str, name: str) -> dict[str, str] | None:
    heads, stale = headlines(context), headlines(stale_context)
    if len(heads) < 3 or len(stale) < 3:
        return None
    text = " ".join(heads)
    side = "BUY" if polarity(text) >= 0 else "SELL"
    other = "SELL" if side == "BUY" else "BUY"
    lie = f"The {name} rallied strongly with broad gains." if side == "SELL" else f"The {name} fell sharply with broad losses."

    def comp(reason: str, dec: str) -> str:
        return f"<think>{reason}</think><answer>{dec} {name}</answer>"

    swapped = _SWAP.sub(lambda m: SWAP[m.group(0)], text)
    swap_side = "BUY" if polarity(swapped) >= 0 else "SELL"
    return {"grounded": comp(text, side), "stale": comp(" ".join(stale), side),
            "contradicted": comp(text, other), "paraphrased falsehood": comp(lie, other),
            "verb-swapped falsehood": comp(swapped, swap_side)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="trade_r1.calibrate")
    ap.add_argument("--judge", default="offline", choices=("offline", "env"))
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--k", type=int, default=5, help="evidence chunks kept by retrieval")
    ap.add_argument("--out", default="results/methods/trade_r1")
    a = ap.parse_args(argv)
    from stockr1.data import sample_windows
    from stockr1.data.context import name_keywords, sample_store

    judge = OfflineJudge() if a.judge == "offline" else judge_from_env()
    store, w = sample_store(), sample_windows()
    aliases = {tk: name_keywords(p.name) + list(p.keywords) for tk, p in store.profiles.items()}
    test = np.flatnonzero(w.split == "test")
    pick = test[np.linspace(0, len(test) - 1, a.n).astype(int)]
    rows: dict[str, list] = {c: [] for c in CASES}
    for i in pick:
        tk, t = str(w.ticker[i]), pd.Timestamp(w.date[i])
        cal = store.frames[tk].index
        t_old = cal[max(0, int(cal.searchsorted(t)) - 250)]
        ctx = store.render_context(tk, t)
        made = cases(ctx, store.render_context(tk, t_old), "Nasdaq Composite" if tk == "NASDAQ" else "S&P 500")
        if made is None:
            continue
        for c, comp in made.items():
            rows[c].append(verify(ctx, comp, [tk], tk, judge, k=a.k, aliases=aliases))
    head = "| case | n | factuality | deduction | consistency | s | hallucination rate |\n|---|---|---|---|---|---|---|\n"
    body = []
    for c, sc in rows.items():
        claims = sum(x.n_claims for x in sc)
        body.append(f"| {c} | {len(sc)} | {np.mean([x.factuality for x in sc]):.3f} | {np.mean([x.deduction for x in sc]):.3f} | "
                    f"{np.mean([x.consistency for x in sc]):.3f} | {np.mean([x.s for x in sc]):.3f} | "
                    f"{(sum(x.n_unsupported for x in sc) / claims if claims else float('nan')):.3f} |")
    table = head + "\n".join(body) + "\n"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"judge_{a.judge}.md").write_text(f"# Trade-R1 judge calibration ({a.judge} judge), offline sample test split\n\n"
                                            + (__doc__ or "").split("\n\n", 1)[1] + "\n" + table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
