"""``rollout.backend`` (hf | vllm), ``rollout.prefill_chunk`` and ``rollout.vllm`` in the GRPO run config:
validated at load, unknown values refused naming the choices, vllm refused in one line where it does
not import; the engine is built with the configured backend."""

from __future__ import annotations

import pytest

from llm.hf_backend import HFBackend
from llm.vllm_config import VLLMConfig, vllm_import_error
from rl.run_config import GRPORunConfig, RolloutConfig
from stockr1.config import config_from_dict


def test_default_backend_is_hf_and_engine_kwargs_build_it(tiny_tokenizer):
    from llm.policy import Policy, PolicyConfig
    from llm.rollout import RolloutEngine

    rc = GRPORunConfig.from_dict({"rollout": {"max_new_tokens": 8, "prefill_chunk": 256}}).rollout
    assert rc.backend == "hf" and rc.prefill_chunk == 256 and rc.vllm == VLLMConfig()
    kw = rc.engine_kwargs()
    assert "backend" not in kw and "vllm" not in kw and kw["prefill_chunk"] == 256
    tok = tiny_tokenizer
    eng = RolloutEngine(Policy(PolicyConfig(d_ts=8, lora_r=0), tokenizer=tok), tok, [], **kw)
    assert isinstance(eng.backend, HFBackend) and eng.backend.prefill_chunk == 256


def test_unknown_backend_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match=r"rollout.backend must be one of \['hf', 'vllm'\], got 'sglang'"):
        GRPORunConfig.from_dict({"rollout": {"backend": "sglang"}})
    with pytest.raises(ValueError, match="prefill_chunk must be >= 1"):
        RolloutConfig(prefill_chunk=0)
    with pytest.raises(ValueError, match="unknown grpo.rollout.vllm keys"):
        GRPORunConfig.from_dict({"rollout": {"vllm": {"gpu_mem": 0.5}}})
    with pytest.raises(ValueError, match="rollout.vllm.mode must be one of"):
        VLLMConfig(mode="remote")
    with pytest.raises(ValueError, match="server needs base_url"):
        VLLMConfig(mode="server")
    with pytest.raises(ValueError, match="sleep_level must be 1 or 2"):
        VLLMConfig(sleep_level=3)


@pytest.mark.skipif(vllm_import_error() is None, reason="vllm imports here")
def test_vllm_backend_refused_in_one_line_where_vllm_does_not_import():
    with pytest.raises(ValueError) as e:
        GRPORunConfig.from_dict({"rollout": {"backend": "vllm"}})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("rollout.backend: vllm needs vllm importable here")
    assert "use rollout.backend: hf" in msg


def test_vllm_server_mode_needs_no_local_vllm(tmp_path):
    """The server client talks HTTP only: the config loads and the backend builder is made without vllm."""
    rc = config_from_dict(RolloutConfig, {"backend": "vllm", "vllm": {"mode": "server", "base_url": "http://h:8000",
                                                                       "sync_dir": str(tmp_path)}}, "grpo.rollout")
    assert rc.vllm.mode == "server" and callable(rc.engine_kwargs()["backend"])
