"""`VLLMBackend`: rollout phases on vLLM (UNVERIFIED: written against vLLM 0.34's documented API and
source; no machine here has run it, see docs/scale.md "Rollout backends").

Per phase, each row becomes one vLLM request:

- prompt: ``{"prompt_embeds": [T, H]}``, the policy's own ``embed`` of the row so far (soft tokens in
  the ``<ts>`` slots, tool text included), so vLLM needs no projector and never sees placeholder ids;
- stop: ``stop_token_ids`` = the row's stop set (tool close tags while calls remain, ``</answer>``, EOS)
  with ``ignore_eos=True``, so vLLM stops exactly where the HF backend stops, and keeps the stop id in
  ``token_ids`` (the tags are non-special single tokens). Ids, not stop strings: a stop string matches
  detokenised text and is cut from the output, so token ids and text could disagree;
- bans: ``logit_bias`` of -100 (vLLM's bound) on the tool-only ids, the HF backend's -inf in effect;
- log-probs: ``logprobs=0`` (the sampled token's) with the engine built with
  ``logprobs_mode="processed_logprobs"`` (after temperature and bans), the HF backend's form. vLLM
  applies top-p before it reports processed log-probs, the HF backend after: with ``top_p < 1`` the two
  differ (GRPO recomputes old log-probs itself, so training does not read them);
- seed: one per request, drawn from the engine's `SeededGenerator` (a function of
  ``generator.manual_seed(s)``), or from the global CPU RNG when the engine is unseeded.

Weights (`sync_weights`, after each optimiser update, and before the first rollout since the engine
starts from dummy weights): `llm.merged_weights.merged_named_weights` of the policy (LoRA merged, the
trained protocol-token rows included) into the worker's ``reload_weights`` (which calls the model's
``load_weights``) through ``collective_rpc``; in server mode via safetensors in ``sync_dir``.
Sleep mode: `sleep` after a rollout frees the GPU for training, `wake` before the next takes it back.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from llm.generation import PhaseOutput, PhaseRequest
from llm.merged_weights import merged_named_weights, unwrapped
from llm.sampling import SeededGenerator
from llm.vllm_config import VLLMConfig

BAN_BIAS = -100.0  # vLLM clamps logit_bias to [-100, 100]
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


class VLLMBackend:
    """llm: a ``vllm.LLM`` (or anything with its ``generate``, ``collective_rpc``, ``sleep``, ``wake_up``:
    `llm.vllm_server.VLLMServerClient`, a test fake); policy: `llm.policy.Policy` (``embed`` and the
    model whose merged weights are pushed); make_params: kwargs -> sampling params (``vllm.SamplingParams``;
    ``dict`` for the server client)."""

    def __init__(self, llm: Any, policy, temperature: float, top_p: float, banned_token_ids: Sequence[int],
                 generator: SeededGenerator | None = None, make_params: Callable[..., Any] = dict,
                 dtype: str = "bfloat16", sleep_level: int | None = None, sync_dir: str | Path | None = None):
        self.llm, self.policy, self.make_params = llm, policy, make_params
        self.temperature, self.top_p, self.banned_token_ids = temperature, top_p, list(banned_token_ids)
        self.generator, self.dtype = generator, _DTYPES[dtype]
        self.sleep_level, self.sync_dir = sleep_level, None if sync_dir is None else Path(sync_dir)
        self.synced = False  # the engine starts from dummy weights: push before the first rollout
        self.asleep = False  # KV cache (and weights) released by `sleep`
        self.weights_awake = True

    # ------------------------------------------------------------------ lifecycle
    def wake(self) -> None:
        """Before a rollout: the engine has the policy's current weights and its GPU memory back."""
        if not self.synced:
            self.sync_weights()
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"] if self.weights_awake else None)
            self.asleep, self.weights_awake = False, True

    def sleep(self) -> None:
        """After a rollout: free the engine's GPU memory for the training step (when sleep mode is on).
        Level 2 drops the weights, so the next `wake` pushes them again if no update did."""
        if self.sleep_level is None:
            return
        self.llm.sleep(level=self.sleep_level)
        self.asleep, self.weights_awake = True, False
        if self.sleep_level == 2:
            self.synced = False

    def sync_weights(self) -> None:
        """Push the policy's merged weights (HF names) into the engine (the KV cache stays asleep)."""
        if not self.weights_awake:
            self.llm.wake_up(tags=["weights"])
            self.weights_awake = True
        weights = merged_named_weights(self.policy.model)
        if self.sync_dir is None:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": [(n, t.to(self.dtype)) for n, t in weights]})
        else:
            from safetensors.torch import save_file

            if not (self.sync_dir / "config.json").exists():
                write_model_dir(self.policy, self.sync_dir)
            save_file({n: t.to(self.dtype).cpu().contiguous() for n, t in weights}, str(self.sync_dir / "model.safetensors"))
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(self.sync_dir)})
        self.synced = True

    # ------------------------------------------------------------------ one phase
    def generate_phase(self, requests: Sequence[PhaseRequest]) -> list[PhaseOutput]:
        prompts, params = self.build_requests(requests)
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return [self.parse_output(r, o.outputs[0]) for r, o in zip(requests, outs, strict=True)]

    def build_requests(self, requests: Sequence[PhaseRequest]) -> tuple[list[dict[str, Any]], list[Any]]:
        """-> (prompts ``{"prompt_embeds": [T, H]}``, sampling params), one each per request."""
        seeds = self._seeds(len(requests))
        bias = {int(t): BAN_BIAS for t in self.banned_token_ids}
        prompts, params = [], []
        for r, seed in zip(requests, seeds, strict=True):
            prompts.append({"prompt_embeds": self.embed(r)})
            params.append(self.make_params(
                n=1, temperature=self.temperature, top_p=self.top_p, max_tokens=r.max_new_tokens,
                stop_token_ids=sorted(r.stop_token_ids), ignore_eos=True, logprobs=0, logit_bias=dict(bias),
                seed=seed, skip_special_tokens=False, detokenize=False))
        return prompts, params

    def embed(self, r: PhaseRequest) -> torch.Tensor:
        """The row's input embeddings [T, H] (soft tokens placed), on the CPU in the engine's dtype."""
        dev = next(self.policy.parameters()).device
        ids = torch.tensor([r.token_ids], device=dev)
        ts = None if r.ts_tokens is None else r.ts_tokens[None].to(dev)
        with torch.no_grad():
            return self.policy.embed(ids, ts)[0].to("cpu", self.dtype)

    @staticmethod
    def parse_output(r: PhaseRequest, completion: Any) -> PhaseOutput:
        """A vLLM ``CompletionOutput`` (token_ids [n], logprobs: n dicts id -> Logprob) -> `PhaseOutput`."""
        ids = tuple(int(t) for t in completion.token_ids)[: r.max_new_tokens]
        lps = tuple(float(completion.logprobs[k][t].logprob) for k, t in enumerate(ids))
        stop = ids[-1] if ids and ids[-1] in r.stop_token_ids else None
        return PhaseOutput(ids, lps, stop)

    def _seeds(self, n: int) -> list[int]:
        """One vLLM seed per request: from the engine's generator, else the global CPU RNG (which the
        GRPO trainer seeds per step), so the rollouts are a function of the seed either way."""
        gen = self.generator.for_device("cpu") if self.generator is not None else None
        return torch.randint(0, 2**31 - 1, (n,), generator=gen).tolist()

    # ------------------------------------------------------------------ construction
    @classmethod
    def factory(cls, cfg: VLLMConfig) -> Callable[[Any], VLLMBackend]:
        """``RolloutEngine(..., backend=VLLMBackend.factory(cfg))``: builds the engine (colocated
        ``vllm.LLM`` or the server client) for the rollout engine's policy and sampling settings."""

        def build(engine) -> VLLMBackend:
            gen = SeededGenerator(engine.seed) if engine.seed is not None else None
            kw = {"temperature": engine.temperature, "top_p": engine.top_p, "banned_token_ids": engine.banned_token_ids,
                  "generator": gen, "dtype": cfg.dtype}
            if cfg.mode == "server":
                from llm.vllm_server import VLLMServerClient

                client = VLLMServerClient(cfg.base_url, cfg.served_model_name, cfg.request_timeout_s)
                return cls(client, engine.policy, sync_dir=cfg.sync_dir, **kw)
            from vllm import SamplingParams

            llm = colocated_llm(cfg, engine.policy, engine.seed)
            return cls(llm, engine.policy, make_params=SamplingParams,
                       sleep_level=cfg.sleep_level if cfg.enable_sleep_mode else None, **kw)

        return build


def write_model_dir(policy, out: str | Path) -> Path:
    """config.json (the policy's architecture, its vocabulary rows) + the tokenizer: what vLLM needs to
    build the model with ``load_format="dummy"`` before the first weight push."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = unwrapped(policy.model)
    model.config.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["vocab_size"] = int(model.get_input_embeddings().weight.shape[0])
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    policy.tokenizer.save_pretrained(out)
    return out


def colocated_llm(cfg: VLLMConfig, policy, seed: int | None):
    """A ``vllm.LLM`` in this process on this rank's GPU, dummy weights until the first push."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: weights pass by reference
    from vllm import LLM

    model_dir = write_model_dir(policy, cfg.model_dir or tempfile.mkdtemp(prefix="stockr1-vllm-"))
    kw: dict[str, Any] = {"model": str(model_dir), "tokenizer": str(model_dir), "load_format": "dummy",
                          "dtype": cfg.dtype, "enable_prompt_embeds": True, "logprobs_mode": "processed_logprobs",
                          "enable_sleep_mode": cfg.enable_sleep_mode, "gpu_memory_utilization": cfg.gpu_memory_utilization,
                          "tensor_parallel_size": cfg.tensor_parallel_size, "seed": 0 if seed is None else seed}
    if cfg.max_model_len is not None:
        kw["max_model_len"] = cfg.max_model_len
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        kw["distributed_executor_backend"] = "external_launcher"  # one engine per training rank (as TRL colocates)
    return LLM(**{**kw, **cfg.extra})
