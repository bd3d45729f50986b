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
"""

from __future__ import annotations

import inspect
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
