"""`FakeLLM`: the part of ``vllm.LLM``'s documented interface `llm.vllm_backend.VLLMBackend` calls, on a
plain HF model, for tests on machines where vLLM cannot run (it is passed in, never patched in).

- ``__init__(model_dir)``: builds the architecture from ``config.json`` with random weights, as vLLM's
  ``load_format="dummy"`` does;
- ``collective_rpc("reload_weights", kwargs={"weights_iterator": [(name, tensor)]})``: loads them by
  HF checkpoint name (a name the model does not have is an error, as in vLLM's ``load_weights``);
- ``generate(prompts, sampling_params, use_tqdm=)``: ``{"prompt_embeds": [T, H]}`` prompts, SamplingParams
  fields as a dict (temperature, max_tokens, stop_token_ids, ignore_eos, logprobs, logit_bias, seed),
  returning ``.outputs[0].token_ids`` and ``.logprobs`` ({id: Logprob}) with processed log-probs;
- ``sleep(level)``, ``wake_up(tags)``: recorded in ``events``.

`FakeServer` puts one behind the HTTP endpoints of ``vllm serve`` for the server-mode client.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import os
from types import SimpleNamespace
from typing import Any

import torch


class FakeLLM:
    def __init__(self, model_dir: str):
        from transformers import AutoConfig, AutoModelForCausalLM

        torch.manual_seed(1234)  # "dummy" weights: anything but the policy's
        self.model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir)).eval()
        self._cache_kw = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self.events: list[tuple[str, Any]] = []
        self.requests: list[tuple[list[dict], list[dict]]] = []
        self.loaded: list[str] = []

    def collective_rpc(self, method: str, timeout: float | None = None, args: tuple = (), kwargs: dict | None = None):
        assert method == "reload_weights", method
        weights = list((kwargs or {})["weights_iterator"])
        params = dict(self.model.named_parameters())
        unknown = [n for n, _ in weights if n not in params]
        assert not unknown, f"names vLLM's load_weights would not know: {unknown}"
        with torch.no_grad():
            for name, t in weights:
                params[name].copy_(t)
        self.loaded = [n for n, _ in weights]
        self.events.append(("reload_weights", len(weights)))
        return [None]

    def sleep(self, level: int = 1) -> None:
        self.events.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> bool:
        self.events.append(("wake_up", tags))
        return True

    @torch.no_grad()
    def generate(self, prompts: list[dict], sampling_params: list[dict], use_tqdm: bool = True) -> list[Any]:
        self.requests.append((prompts, sampling_params))
        self.events.append(("generate", len(prompts)))
        return [SimpleNamespace(outputs=[self._one(p["prompt_embeds"], sp)]) for p, sp in zip(prompts, sampling_params,
                                                                                              strict=True)]

    def _one(self, emb: torch.Tensor, sp: dict) -> Any:
        assert sp["ignore_eos"] and sp["logprobs"] == 0 and sp["n"] == 1
        gen = torch.Generator().manual_seed(sp["seed"]) if sp.get("seed") is not None else None
        out = self.model(inputs_embeds=emb[None].float(), use_cache=True)
        ids, lps = [], []
        while True:
            logits = out.logits[0, -1].float().clone()
            for t, b in (sp.get("logit_bias") or {}).items():
                logits[t] += b
            if sp["temperature"] == 0:
                tok = int(logits.argmax())
                lp = torch.log_softmax(logits, -1)[tok]
            else:
                logp = torch.log_softmax(logits / sp["temperature"], -1)
                tok = int(torch.multinomial(logp.exp(), 1, generator=gen))
                lp = logp[tok]
            ids.append(tok)
            lps.append({tok: SimpleNamespace(logprob=float(lp))})
            if tok in sp["stop_token_ids"] or len(ids) >= sp["max_tokens"]:
                return SimpleNamespace(token_ids=ids, logprobs=lps)
            nxt = self.model.get_input_embeddings()(torch.tensor([[tok]]))
            out = self.model(inputs_embeds=nxt, use_cache=True, **{self._cache_kw: getattr(out, self._cache_kw)})


class FakeServer:
    """A `FakeLLM` behind the HTTP endpoints of ``vllm serve`` that `llm.vllm_server.VLLMServerClient`
    calls (``/v1/models``, ``/v1/completions`` with ``prompt_embeds``, ``/collective_rpc``, ``/sleep``,
    ``/wake_up``), in the response forms of vLLM 0.34's OpenAI-compatible server; on localhost, in a thread."""

    def __init__(self, llm: FakeLLM):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                self._reply(fake.route("GET", self.path, None))

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self._reply(fake.route("POST", self.path, json.loads(self.rfile.read(n)) if n else None))

            def _reply(self, body):
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.llm = llm
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()

    def route(self, method: str, path: str, body: dict | None) -> Any:
        from urllib.parse import parse_qs, urlparse

        url = urlparse(path)
        if url.path == "/v1/models":
            return {"data": [{"id": "fake"}]}
        if url.path == "/v1/completions":
            assert body["model"] == "fake" and body["return_token_ids"] is True
            emb = torch.load(io.BytesIO(base64.b64decode(body["prompt_embeds"])), weights_only=True)
            sp = {**body, "logit_bias": {int(k): v for k, v in (body.get("logit_bias") or {}).items()}}
            with self._lock, torch.no_grad():
                out = self.llm._one(emb, sp)
            lps = [float(d[t].logprob) for d, t in zip(out.logprobs, out.token_ids, strict=True)]
            return {"choices": [{"index": 0, "text": "", "token_ids": out.token_ids,
                                 "logprobs": {"token_logprobs": lps, "tokens": [], "top_logprobs": []}}]}
        if url.path == "/collective_rpc":
            from safetensors.torch import load_file

            path_ = body["kwargs"]["weights_path"]
            weights = [(n, t) for f in sorted(os.listdir(path_)) if f.endswith(".safetensors")
                       for n, t in load_file(os.path.join(path_, f)).items()]
            with self._lock:
                self.llm.collective_rpc(body["method"], kwargs={"weights_iterator": weights})
            return {"results": [None]}
        if url.path == "/sleep":
            self.llm.sleep(int(parse_qs(url.query)["level"][0]))
            return {"status": "sleeping"}
        if url.path == "/wake_up":
            self.llm.wake_up(parse_qs(url.query).get("tags"))
            return {"status": "awake"}
        raise AssertionError(f"unexpected {method} {path}")
