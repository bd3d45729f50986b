"""`rl.setup.select_train_queries`: the seeded subset GRPO trains on, and its yes/no-balanced variant that the
training-query check uses to stop one answer prior from earning R_ans."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks.grpo_check.command import GRPOCheckConfig, run_overrides
from llm.qa.core import QAItem
from rl.setup import select_train_queries
from stockr1.config import load_yaml

ROOT = Path(__file__).resolve().parents[1]



def _items() -> list[QAItem]:
    """40 train items: every 4th numeric, the rest yes/no with gold Yes on 2 of every 3 of them."""
    out = []
    for i in range(40):
        if i % 4 == 0:
            out.append(QAItem(f"q{i}", "forecast", "t", "?", f"{i}.00", "numeric", i, "T", "2010-01-01", "train"))
        else:
            out.append(QAItem(f"q{i}", "event", "t", "?", "No" if i % 3 == 0 else "Yes", "yes_no", i, "T",
                              "2010-01-01", "train"))
    return out


def test_the_plain_subset_is_the_seeded_permutations_head_in_file_order() -> None:
    items = _items()
    keep = sorted(np.random.default_rng(3).permutation(40)[:8])
    assert select_train_queries(items, 8, seed=3) == [items[i] for i in keep]
    assert select_train_queries(items, None) == items


def test_the_balanced_subset_has_half_of_each_gold_and_only_yes_no() -> None:
    items = _items()
    got = select_train_queries(items, 8, seed=3, balance_yes_no=True)
    assert [it.answer for it in got].count("Yes") == 4 and [it.answer for it in got].count("No") == 4
    assert {it.answer_type for it in got} == {"yes_no"} and got == sorted(got, key=lambda it: items.index(it))
    assert got == select_train_queries(items, 8, seed=3, balance_yes_no=True)  # seeded: the same queries
    assert got != select_train_queries(items, 8, seed=4, balance_yes_no=True)
    with pytest.raises(ValueError, match="even qa.max_train_queries"):
        select_train_queries(items, 7, balance_yes_no=True)
    with pytest.raises(ValueError, match="holds 10 yes/no items with gold No, fewer than the 12"):
        select_train_queries(items, 24, balance_yes_no=True)


def test_the_check_passes_the_balance_to_every_run_and_refuses_an_odd_count() -> None:
    base = {**load_yaml(ROOT / "configs" / "grpo_check" / "tiny.yaml"), "balance_yes_no": True}
    cfg = GRPOCheckConfig.from_dict(base)
    assert run_overrides(cfg, 0)["qa"] == {"max_train_queries": cfg.n_queries, "balance_yes_no": True}
    assert "balance_yes_no" not in run_overrides(GRPOCheckConfig.from_dict({**base, "balance_yes_no": False}), 0)["qa"]
    with pytest.raises(ValueError, match="even n_queries"):
        GRPOCheckConfig.from_dict({**base, "n_queries": 9})
