"""Reuse of greedy rollouts between `stockr1 bench qa` runs whose inputs are identical (``--reuse DIR``).

Decoding is what a CPU evaluation of a pretrained policy spends its time on (~10 s a rollout for
SmolLM2-135M on 2 cores), and the demo evaluates the shipped SFT run again on questions the release's
own evaluation (results/qa) already decoded. A row is reused only when nothing that enters a greedy
rollout differs:

- the fingerprint: sha256 over every file of the run's ``policy/`` and ``decoder/``, the QA file's bytes,
  the data section, ``max_new_tokens``, ``max_context_chars``, threads and device (reduction order);
- the questions: the leading questions both runs share, in the same order, all of them when the two
  lists are equal, else down to a whole number of rollout batches, so that every reused batch (and so
  its left padding) is the one decoded then.

The questions after that prefix are decoded, in batches that start where a fresh run's would, so an
extended run (``--n 480`` reusing a ``--n 100`` one) writes what a fresh run would have written. The
README says which rows were reused, how many of their rollouts, and from where.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_action.schema import ForecastAction
from llm.qa.core import QAItem

ROLLOUT_BATCH = 16  # llm.qa.evaluate.rollout_items' default batch: the unit a reused prefix must align to
RUN_FILE = "reuse.json"


@dataclass(frozen=True)
class StoredRollout:
    """What grading reads of a rollout (``llm.rollout.Rollout``'s completion, answer, action, token count)."""

    completion: str
    answer: str | None
    action: ForecastAction | None
    n_generated: int


def rollout_record(policy: str, item: QAItem, rollout: Any, correct: bool) -> dict[str, Any]:
    """One line of ``rollouts.jsonl``: enough to grade the rollout again without decoding it."""
    action = rollout.action
    return {"policy": policy, "id": item.id, "family": item.family, "answer": item.answer, "correct": bool(correct),
            "model_answer": rollout.answer, "n_generated": int(rollout.n_generated),
            "action": None if action is None else action.model_dump(exclude_none=True),
            "completion": rollout.completion}


def stored_rollout(rec: Mapping[str, Any]) -> StoredRollout:
    action = rec.get("action")
    return StoredRollout(completion=rec["completion"], answer=rec.get("model_answer"),
                         action=None if action is None else ForecastAction.model_validate(action),
                         n_generated=int(rec["n_generated"]))


def rollout_settings(run_cfg: Mapping[str, Any], max_new_tokens: int, threads: int, device: str = "cpu") -> dict[str, Any]:
    """The decoding settings a fingerprint covers, from the SFT run's config (its data section and context
    length) and the command's flags: one definition for ``bench qa`` and every reader of its rollouts."""
    return {"data": run_cfg.get("data", {}), "max_new_tokens": max_new_tokens, "threads": threads,
            "max_context_chars": run_cfg.get("max_context_chars"), "device": device}


def fingerprint(run_dir: Path, qa_path: Path, settings: Mapping[str, Any]) -> str:
    """sha256 of everything that enters a greedy rollout of ``run_dir`` (see the module docstring)."""
    h = hashlib.sha256()
    for sub in ("policy", "decoder"):
        for f in sorted(p for p in (Path(run_dir) / sub).rglob("*") if p.is_file()):
            h.update(f.relative_to(run_dir).as_posix().encode())
            h.update(f.read_bytes())
    h.update(Path(qa_path).read_bytes())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


def write_reuse_index(out: Path, fingerprints: Mapping[str, str]) -> None:
    """``reuse.json``: each policy row's fingerprint (its rollouts are in ``rollouts.jsonl``)."""
    (out / RUN_FILE).write_text(json.dumps({"fingerprints": dict(fingerprints)}, indent=1))


def reused_pairs(reuse_dir: Path, fp: str, items: Sequence[QAItem],
                 batch: int = ROLLOUT_BATCH) -> tuple[list, str] | None:
    """(pairs for the leading items that can be reused, source row name) from ``reuse_dir`` when a row
    there has fingerprint ``fp``; None when none can (decode all). The caller decodes the rest."""
    index = Path(reuse_dir) / RUN_FILE
    if not index.exists():
        return None
    names = [n for n, f in json.loads(index.read_text())["fingerprints"].items() if f == fp]
    if not names:
        return None
    recs = [r for line in (Path(reuse_dir) / "rollouts.jsonl").read_text().splitlines()
            if (r := json.loads(line))["policy"] == names[0]]
    k = reusable_prefix([r["id"] for r in recs], [it.id for it in items], batch)
    if k == 0:
        return None
    return [(it, stored_rollout(r)) for it, r in zip(items[:k], recs[:k], strict=True)], names[0]


def reusable_prefix(stored: Sequence[str], wanted: Sequence[str], batch: int = ROLLOUT_BATCH) -> int:
    """How many leading ``wanted`` questions take their stored rollout: all when the lists are equal, else
    the shared prefix cut down to whole batches (a partial last batch was left-padded with other rows)."""
    if list(stored) == list(wanted):
        return len(wanted)
    shared = 0
    for a, b in zip(stored, wanted, strict=False):
        if a != b:
            break
        shared += 1
    return shared // batch * batch
