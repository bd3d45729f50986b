"""Trading-R1 evaluation (§4.3, App. 8.2): CR, SR (rf 4%), HR and MDD per ticker, Tables 3-4 layout.

Decisions are executed with the shared backtest simulator (``stockr1.backtest.simulate``) so
every method is traded by identical rules: BUY / STRONG BUY go long, SELL / STRONG SELL go short,
HOLD stays flat; each position is held ``holding`` days. Intensity (STRONG) does not change the
size: the paper maps classes to user-specific weights it does not publish.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from rl.methods.trading_r1.labels import ACTIONS, labels_for_windows, sample_label_windows
from stockr1.backtest import BacktestConfig, prices_from_windows, simulate
from stockr1.data import load_source

SIDE = {"STRONG SELL": -1, "SELL": -1, "HOLD": 0, "BUY": 1, "STRONG BUY": 1}


def evaluate_decisions(decisions: dict[str, pd.Series], prices: dict[str, pd.Series],
                       cfg: BacktestConfig = BacktestConfig()) -> dict[str, dict[str, float]]:
    """decisions: ticker -> Series of class index (ACTIONS order) or name on decision days (-1/None
    = no decision, flat). Returns ticker -> {CR, SR, HR, MDD} (fractions; SR annualised)."""
    out = {}
    for tk, dec in decisions.items():
        side = dec.map(lambda a: SIDE.get(ACTIONS[a] if isinstance(a, int | float) and a >= 0 else a, 0)).astype(int)
        m = simulate(side, prices[tk], cfg).metrics
        out[tk] = {"CR": m["cumulative_return"], "SR": m["sharpe"], "HR": m["hit_rate"], "MDD": m["max_drawdown"]}
    return out


def table_md(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """results: model -> ticker -> metrics; one row per model, CR/SR/HR/MDD per ticker (Tables 3-4)."""
    tickers = sorted({t for r in results.values() for t in r})
    head = "| Model | " + " | ".join(f"{t} CR(%) | {t} SR | {t} HR(%) | {t} MDD(%)" for t in tickers) + " |\n"
    head += "|---|" + "---|" * (4 * len(tickers)) + "\n"
    rows = []
    for model, r in results.items():
        cells = []
        for t in tickers:
            v = r.get(t)
            cells += (["-"] * 4 if v is None else
                      [f"{100 * v['CR']:.2f}", f"{v['SR']:.2f}", f"{100 * v['HR']:.1f}", f"{100 * v['MDD']:.2f}"])
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    return head + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m rl.methods.trading_r1.evaluate --out DIR``: the evaluation on the offline sample's
    test split for reference policies (no trained model needed): always-BUY (the majority class)
    and the Algorithm 1 label oracle (uses the future; an upper bound for a perfect classifier)."""
    ap = argparse.ArgumentParser(prog="trading_r1.evaluate")
    ap.add_argument("--out", default="results/methods/trading_r1")
    a = ap.parse_args(argv)
    w, frames = sample_label_windows(), load_source("sample")
    labels = labels_for_windows(w, frames)
    test = np.flatnonzero(w.split == "test")
    cfg = BacktestConfig()
    tickers = sorted(set(w.ticker[test].tolist()))
    prices = {t: prices_from_windows(w.select(test), t, cfg.holding) for t in tickers}
    dec = {}
    for t in tickers:
        idx = test[w.ticker[test] == t]
        dec[t] = pd.Series(labels[idx], pd.DatetimeIndex(w.date[idx]))
    results = {
        "always BUY (majority class)": evaluate_decisions({t: d * 0 + 3 for t, d in dec.items()}, prices, cfg),
        "label oracle (uses the future)": evaluate_decisions(dec, prices, cfg),
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(json.dumps(results, indent=1))
    table = table_md(results)
    (out / "evaluation.md").write_text("# Trading-R1 evaluation protocol on the offline sample test split (Tables 3-4 layout)\n\n"
                                       "Reference policies only; trained-model rows come from `stockr1 bench compare`.\n\n" + table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
