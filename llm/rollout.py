"""The one rollout engine: batched sampling with a KV cache, interrupted by tool calls.

Protocol per row (Stock-R1 §3.3)::

    prompt | model: reasoning ... </forecast_action> | tool: <forecast_ts>..</forecast_ts> | model: ... </answer>

How it runs. Generation proceeds in *phases*. In a phase the backend (`llm.generation`; by default
`llm.hf_backend.HFBackend`, or `llm.vllm_backend.VLLMBackend`) continues every active row until it
stops: at a tool's close tag, at ``</answer>``, at EOS, or at its token budget. The HF backend
left-pads the rows, prefills them once (the policy replaces ``<ts>`` placeholders with the soft
tokens here) and samples token by token with the KV cache. Rows stopped at a close tag get the
tool's observation appended (``gen_mask`` 0) and take part in the next phase; the others are finished. So a rollout with one
tool call costs two prefills; we accept the second prefill (instead of splicing observation tokens
into a batched cache whose rows are at different lengths) because it keeps the loop short and
obviously correct, and the paper's protocol has exactly one call.

Choices (documented because the paper leaves them open):
- ``max_new_tokens`` counts model-written tokens only; tool observations do not use the budget.
- The engine never samples tool-only tokens (``<forecast_ts>``, ``</forecast_ts>``, ``<ts>``):
  an observation can only come from the tool. `token_logprobs` applies the same ban
  (``engine.banned_token_ids``) so GRPO ratios use the distribution that was sampled.
- After ``max_tool_calls`` calls a close tag is an ordinary token (no more tool calls run).
- A tool that raises gets an error observation; the rollout continues (nothing is lost).
- Tool close tags must be single tokens (add them to the tokenizer, as the protocol tokens are).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from llm.generation import GenerationBackend, PhaseRequest
from llm.hf_backend import HFBackend
from llm.sampling import SeededGenerator, TokenSampler
from llm.special_tokens import ANSWER_CLOSE, ANSWER_OPEN, ENDOFTEXT, TOOL_ONLY_TOKENS

FORECAST_TOOL_NAME = "forecast"
_ANSWER_RE = re.compile(re.escape(ANSWER_OPEN) + r"(.*?)" + re.escape(ANSWER_CLOSE), re.DOTALL)


# ---------------------------------------------------------------------------------------- tools
@dataclass(frozen=True)
class ToolResult:
    """observation: text inserted after the call (gen_mask 0); payload: tool-specific result."""

    observation: str
    payload: Any = None
    error: str | None = None


@runtime_checkable
class Tool(Protocol):
    """A tool the model calls by writing ``open_tag call_text close_tag``.

    A tool may also define ``call_batch(sample_refs, call_texts) -> list[ToolResult]``; the engine
    then calls it once per phase for all rows that called it.
    """

    name: str
    open_tag: str
    close_tag: str

    def __call__(self, sample_ref: Any, call_text: str) -> ToolResult: ...


# ------------------------------------------------------------------------------------- rollouts
@dataclass(frozen=True)
class Segment:
    """kind: prompt | model | tool."""

    kind: str
    text: str
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class ToolCall:
    tool: str
    call_text: str
    result: ToolResult


@dataclass
class Rollout:
    """One sampled completion. ``token_ids``, ``gen_mask`` and ``logprobs`` are aligned, prompt included.

    gen_mask: 1 = written by the model (enters the policy loss), 0 = prompt or tool observation.
    logprobs: log-prob of each model-written token under the sampling distribution (temperature and
              bans applied, before top-p); 0 elsewhere.
    finish_reason: answer (stopped at </answer>) | eos | length (model-token budget exhausted).
    """

    prompt_index: int
    sample_index: int
    sample_ref: Any
    segments: list[Segment]
    tool_calls: list[ToolCall]
    token_ids: list[int]
    gen_mask: list[int]
    logprobs: list[float]
    prompt_len: int
    finish_reason: str

    @property
    def prompt(self) -> str:
        return self.segments[0].text

    @property
    def completion(self) -> str:
        """Everything after the prompt: model text and tool observations, in order."""
        return "".join(s.text for s in self.segments[1:])

    @property
    def completion_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len :]

    @property
    def completion_mask(self) -> list[int]:
        return self.gen_mask[self.prompt_len :]

    @property
    def n_generated(self) -> int:
        return sum(self.gen_mask)

    @property
    def answer(self) -> str | None:
        """Text of the last complete ``<answer>…</answer>`` the model wrote (None if missing)."""
        model_text = "".join(s.text for s in self.segments if s.kind == "model")
        found = _ANSWER_RE.findall(model_text)
        return found[-1].strip() if found else None

    def _forecast_call(self) -> ToolCall | None:
        return next((c for c in self.tool_calls if c.tool == FORECAST_TOOL_NAME), None)

    @property
    def action(self):
        """The parsed ForecastAction of the first forecast call (None if missing or unparseable)."""
        call = self._forecast_call()
        return getattr(call.result.payload, "action", None) if call else None

    @property
    def action_errors(self) -> list:
        """Parser errors of the first forecast call; ``["no_action"]`` when the model never called it."""
        call = self._forecast_call()
        if call is None:
            return ["no_action"]
        return list(getattr(call.result.payload, "errors", []) or ([call.result.error] if call.result.error else []))

    @property
    def forecast(self):
        """The decoded one-row `Forecast` of the first forecast call (None if it did not run)."""
        call = self._forecast_call()
        return getattr(call.result.payload, "forecast", None) if call else None

    @property
    def uncertainty(self) -> float | None:
        call = self._forecast_call()
        return getattr(call.result.payload, "uncertainty", None) if call else None


def encode_segments(tokenizer, segments: Sequence[tuple[str, bool]]) -> tuple[list[int], list[int]]:
    """Tokenize ``(text, written_by_model)`` segments one by one, as the engine does -> (ids, gen_mask).

    SFT must use this so its token boundaries match what the engine produces at rollout time.
    """
    ids: list[int] = []
    mask: list[int] = []
    for text, by_model in segments:
        seg = tokenizer(text, add_special_tokens=False).input_ids
        ids += seg
        mask += [int(by_model)] * len(seg)
    return ids, mask


# --------------------------------------------------------------------------------------- engine
@dataclass
class _Row:
    prompt_index: int
    sample_index: int
    sample_ref: Any
    segments: list[Segment]
    ids: list[int]
    mask: list[int]
    logprobs: list[float]
    prompt_len: int
    tool_calls: list[ToolCall] = field(default_factory=list)
    n_gen: int = 0
    finish: str | None = None


class RolloutEngine:
    """Sample tool-using completions from ``policy``.

    policy: any module with ``forward(input_ids, attention_mask, ts_tokens, cache=, use_cache=,
    logits_to_keep=) -> .logits [B, T, V], .cache`` (`llm.policy.Policy`, or a scripted fake).
    temperature 0 = greedy. ``max_batch_rows`` caps rows per forward (memory); ``prefill_chunk``
    prefills long prompts in pieces of that many tokens and ``merge_lora`` decodes a LoRA policy through a
    twin with its adapter merged, held in ``twin_dtype`` ("bfloat16"; None: the policy's) (`llm.hf_backend.HFBackend`;
    the default backend only).
    backend: a `llm.generation.GenerationBackend` builder ``(engine) -> backend`` (default: the HF
    decode loop over ``policy``); `llm.vllm_backend.VLLMBackend.factory` gives the vLLM one.
    """

    def __init__(
        self,
        policy,
        tokenizer,
        tools: Sequence[Tool] = (),
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tool_calls: int = 1,
        stop_at_answer: bool = True,
        max_batch_rows: int | None = None,
        seed: int | None = None,
        prefill_chunk: int | None = None,
        backend: Callable[[RolloutEngine], GenerationBackend] | None = None,
        merge_lora: bool = False,
        twin_dtype: str | None = None,
    ):
        if max_new_tokens <= 0 or temperature < 0 or not 0 < top_p <= 1:
            raise ValueError(f"bad sampling settings: max_new_tokens={max_new_tokens}, temperature={temperature}, top_p={top_p}")
        self.policy, self.tokenizer = policy, tokenizer
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.max_tool_calls, self.max_batch_rows, self.prefill_chunk = max_tool_calls, max_batch_rows, prefill_chunk
        self.seed, self.merge_lora, self.twin_dtype = seed, merge_lora, twin_dtype
        self.pad_id = tokenizer.pad_token_id
        self.tools: dict[int, Tool] = {}
        for tool in tools:
            tid = self._single_token(tool.close_tag, f"tool {tool.name!r} close tag")
            if tid in self.tools:
                raise ValueError(f"tools {self.tools[tid].name!r} and {tool.name!r} share the close tag {tool.close_tag!r}")
            self.tools[tid] = tool
        self.answer_close_id = self._single_token(ANSWER_CLOSE, "answer close tag") if stop_at_answer else None
        self.eos_ids = {i for i in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(ENDOFTEXT)) if i is not None}
        self.banned_token_ids = sorted({tokenizer.convert_tokens_to_ids(t) for t in TOOL_ONLY_TOKENS} | {self.pad_id} - self.eos_ids)
        self.backend: GenerationBackend = (backend or _hf_backend)(self)

    @property
    def generator(self) -> SeededGenerator | None:
        """The backend's seed (``generator.manual_seed(s)``); None when built without ``seed``."""
        return self.backend.generator

    def sync_weights(self) -> None:
        """After an optimiser update: the backend generates with the policy's new weights."""
        self.backend.sync_weights()

    def _single_token(self, text: str, what: str) -> int:
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        if len(ids) != 1:
            raise ValueError(f"{what} {text!r} must be a single token (got {len(ids)}); add it to the tokenizer")
        return ids[0]

    # ------------------------------------------------------------------ public API
    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[str],
        ts_tokens: Tensor | None = None,
        sample_refs: Sequence[Any] | None = None,
        num_return_sequences: int = 1,
    ) -> list[Rollout]:
        """prompts [B] (chat-formatted), ts_tokens [B, K, d_ts] -> B * G rollouts, prompt-major
        (row ``b * G + g`` is the g-th sample of prompt b). ``sample_refs`` [B] are handed to the
        tools (e.g. window indices for `ForecastTool`); default: the prompt index."""
        b, g = len(prompts), num_return_sequences
        if sample_refs is not None and len(sample_refs) != b:
            raise ValueError(f"sample_refs has {len(sample_refs)} entries for {b} prompts")
        if ts_tokens is not None and ts_tokens.shape[0] != b:
            raise ValueError(f"ts_tokens has batch {ts_tokens.shape[0]} for {b} prompts")
        rows: list[_Row] = []
        for i, p in enumerate(prompts):
            ids = self.tokenizer(p, add_special_tokens=False).input_ids
            for j in range(g):
                rows.append(_Row(i, j, sample_refs[i] if sample_refs is not None else i,
                                 [Segment("prompt", p, tuple(ids))], list(ids), [0] * len(ids), [0.0] * len(ids), len(ids)))
        ts_rows = ts_tokens.repeat_interleave(g, 0) if ts_tokens is not None else None
        was_training = getattr(self.policy, "training", False)
        self.policy.eval()
        self.backend.wake()
        try:
            active = list(range(len(rows)))
            while active:
                calls = self._phase(rows, active, ts_rows)
                self._run_tools(rows, calls)
                active = [i for i, _ in calls if rows[i].finish is None]
        finally:
            self.backend.sleep()
            self.policy.train(was_training)
        return [
            Rollout(r.prompt_index, r.sample_index, r.sample_ref, r.segments, r.tool_calls, r.ids, r.mask,
                    r.logprobs, r.prompt_len, r.finish or "length")
            for r in rows
        ]

    # ------------------------------------------------------------------ one phase
    def _stop_ids(self, row: _Row) -> frozenset[int]:
        """The tokens that end a phase of ``row``: its open tool close tags, ``</answer>``, EOS."""
        tools = set(self.tools) if len(row.tool_calls) < self.max_tool_calls else set()
        answer = {self.answer_close_id} if self.answer_close_id is not None else set()
        return frozenset(tools | answer | self.eos_ids)

    def _phase(self, rows: list[_Row], idx: list[int], ts_rows: Tensor | None) -> list[tuple[int, Tool]]:
        """Sample for rows ``idx`` until each stops (the backend); return the (row, tool) calls to execute."""
        reqs = [PhaseRequest(tuple(rows[i].ids), None if ts_rows is None else ts_rows[i],
                             self.max_new_tokens - rows[i].n_gen, self._stop_ids(rows[i])) for i in idx]
        outs = self.backend.generate_phase(reqs)
        calls: list[tuple[int, Tool]] = []
        for i, out in zip(idx, outs, strict=True):
            tool = self._commit(rows[i], list(out.token_ids), list(out.logprobs), out.stop_token_id)
            if tool is not None:
                calls.append((i, tool))
        return calls

    def _commit(self, r: _Row, new: list[int], lps: list[float], stop: int | None) -> Tool | None:
        """Append a phase's tokens to the row; return the tool it called, or set its finish reason."""
        if new:
            r.segments.append(Segment("model", self._decode(new), tuple(new)))
            r.ids += new
            r.mask += [1] * len(new)
            r.logprobs += lps
            r.n_gen += len(new)
        if stop is not None and stop in self.tools and len(r.tool_calls) < self.max_tool_calls:
            return self.tools[stop]
        r.finish = "length" if stop is None else "answer" if stop == self.answer_close_id else "eos"
        return None

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    # ------------------------------------------------------------------ tools
    def _run_tools(self, rows: list[_Row], calls: list[tuple[int, Tool]]) -> None:
        by_tool: dict[int, list[int]] = {}
        tools: dict[int, Tool] = {}
        for i, tool in calls:
            by_tool.setdefault(id(tool), []).append(i)
            tools[id(tool)] = tool
        for key, idx in by_tool.items():
            tool = tools[key]
            texts = [self._call_text(rows[i], tool) for i in idx]
            results = self._call(tool, [rows[i].sample_ref for i in idx], texts)
            for i, text, res in zip(idx, texts, results, strict=True):
                r = rows[i]
                obs = self.tokenizer(res.observation, add_special_tokens=False).input_ids
                r.tool_calls.append(ToolCall(tool.name, text, res))
                r.segments.append(Segment("tool", res.observation, tuple(obs)))
                r.ids += obs
                r.mask += [0] * len(obs)
                r.logprobs += [0.0] * len(obs)
                if r.n_gen >= self.max_new_tokens:
                    r.finish = "length"

    @staticmethod
    def _call(tool: Tool, refs: list[Any], texts: list[str]) -> list[ToolResult]:
        try:
            if hasattr(tool, "call_batch"):
                return list(tool.call_batch(refs, texts))
            return [tool(ref, text) for ref, text in zip(refs, texts, strict=True)]
        except Exception as e:  # a broken tool must not lose the batch: every row gets the error
            msg = f"{type(e).__name__}: {e}"
            return [ToolResult(observation=f"\n[tool {tool.name} failed: {msg}]\n", error=msg) for _ in refs]

    def _call_text(self, row: _Row, tool: Tool) -> str:
        """Text between the last open tag and the close tag in the latest model segment
        (the whole segment if the open tag is missing; the tool reports the error)."""
        seg = row.segments[-1].text
        body = seg[: seg.rfind(tool.close_tag)] if tool.close_tag in seg else seg
        k = body.rfind(tool.open_tag)
        return body[k + len(tool.open_tag) :] if k >= 0 else body



def _hf_backend(engine: RolloutEngine) -> GenerationBackend:
    """The default backend: the HF decode loop over ``engine.policy`` with the engine's sampling."""
    gen = SeededGenerator(engine.seed) if engine.seed is not None else None
    sampler = TokenSampler(engine.temperature, engine.top_p, engine.banned_token_ids, gen)
    return HFBackend(engine.policy, engine.pad_id, sampler, engine.max_batch_rows, engine.prefill_chunk,
                     merge_lora=engine.merge_lora,
                     twin_dtype=None if engine.twin_dtype is None else getattr(torch, engine.twin_dtype))
