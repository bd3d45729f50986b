"""`VLLMServerClient`: the part of ``vllm.LLM``'s interface `llm.vllm_backend.VLLMBackend` uses, over
HTTP to a running ``vllm serve`` (UNVERIFIED, like the backend: written against vLLM 0.34's
OpenAI-compatible ``/v1/completions`` and its dev endpoints ``/collective_rpc``, ``/sleep``, ``/wake_up``,
which need ``VLLM_SERVER_DEV_MODE=1`` on the server).

``generate`` sends one completion request per row, concurrently: the prompt embeddings as base64 of
``torch.save`` (``--enable-prompt-embeds``), ``return_token_ids`` for the ids and ``logprobs=0`` for the
sampled token's log-prob; the answer is turned back into ``.outputs[0].token_ids / .logprobs`` as
``vllm.LLM.generate`` returns them, so the backend parses both the same way. Standard library only.
"""

from __future__ import annotations

import base64
import io
import json
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

# SamplingParams keys the OpenAI-compatible endpoint takes (the rest are engine-side only)
_REQUEST_KEYS = ("n", "temperature", "top_p", "max_tokens", "stop_token_ids", "ignore_eos", "logprobs",
                 "logit_bias", "seed", "skip_special_tokens")


@dataclass(frozen=True)
class _Logprob:
    logprob: float


@dataclass(frozen=True)
class _Completion:
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]]


@dataclass(frozen=True)
class _RequestOutput:
    outputs: list[_Completion]


class VLLMServerClient:
    """base_url: the server (``http://host:8000``); model: the served name (default: the server's first)."""

    def __init__(self, base_url: str, model: str | None = None, timeout_s: float = 600.0, max_workers: int = 64):
        self.base_url, self.timeout_s, self.max_workers = base_url.rstrip("/"), timeout_s, max_workers
        self._model = model

    @property
    def model(self) -> str:
        if self._model is None:
            self._model = self._request("GET", "/v1/models")["data"][0]["id"]
        return self._model

    def generate(self, prompts: Sequence[dict[str, Any]], sampling_params: Sequence[dict[str, Any]],
                 use_tqdm: bool = False) -> list[_RequestOutput]:
        bodies = [self.completion_body(p, sp) for p, sp in zip(prompts, sampling_params, strict=True)]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, max(len(bodies), 1))) as pool:
            answers = list(pool.map(lambda b: self._request("POST", "/v1/completions", b), bodies))
        return [_RequestOutput([self.completion(a["choices"][0])]) for a in answers]

    def completion_body(self, prompt: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        """One ``/v1/completions`` body: embeddings [T, H] as base64 ``torch.save``, ids and log-probs back."""
        buf = io.BytesIO()
        torch.save(prompt["prompt_embeds"].contiguous(), buf)
        body = {k: params[k] for k in _REQUEST_KEYS if params.get(k) is not None}
        if "logit_bias" in body:
            body["logit_bias"] = {str(k): v for k, v in body["logit_bias"].items()}
        return {**body, "model": self.model, "prompt_embeds": base64.b64encode(buf.getvalue()).decode(),
                "return_token_ids": True}

    @staticmethod
    def completion(choice: dict[str, Any]) -> _Completion:
        """A response choice -> ``token_ids`` and per-token ``{id: Logprob}`` (the sampled token's)."""
        ids = [int(t) for t in choice["token_ids"]]
        lps = choice["logprobs"]["token_logprobs"]
        return _Completion(ids, [{t: _Logprob(float(lp))} for t, lp in zip(ids, lps, strict=True)])

    def collective_rpc(self, method: str, kwargs: dict[str, str] | None = None, timeout: float | None = None) -> Any:
        return self._request("POST", "/collective_rpc", {"method": method, "kwargs": kwargs or {}, "timeout": timeout})

    def sleep(self, level: int = 1) -> Any:
        return self._request("POST", f"/sleep?level={int(level)}")

    def wake_up(self, tags: list[str] | None = None) -> Any:
        query = urllib.parse.urlencode([("tags", t) for t in tags or []])
        return self._request("POST", "/wake_up" + (f"?{query}" if query else ""))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None
