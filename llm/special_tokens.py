"""The tool-call protocol's tokens, defined once and imported everywhere.

A Stock-R1 completion looks like::

    <|im_start|>assistant
    ...rationale...
    <forecast_action>{"trend": "up", ...}</forecast_action>      <- model writes (gen_mask 1)
    <forecast_ts>...decoder trajectory...</forecast_ts>           <- tool inserts (gen_mask 0)
    ...final reasoning...
    <answer>yes</answer><|im_end|>                                 <- model writes (gen_mask 1)

The prompt carries ``K`` copies of ``TS_PLACEHOLDER``; the policy replaces their embeddings with
the projected time-series tokens ``h_ts`` (Stock-R1 §3.2, like a VLM's image tokens).

Protocol tokens are added as *non-special* added tokens (the way Qwen adds ``<tool_call>``), so
``decode(..., skip_special_tokens=True)`` keeps them and the parsers still see the tags. Only the
chat-control tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) are special.
"""

from __future__ import annotations

FORECAST_ACTION_OPEN = "<forecast_action>"
FORECAST_ACTION_CLOSE = "</forecast_action>"
FORECAST_TS_OPEN = "<forecast_ts>"
FORECAST_TS_CLOSE = "</forecast_ts>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
TS_PLACEHOLDER = "<ts>"
# Generic tool calls (Qwen's own tags), used by agents with several data tools (AlphaQuanter).
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"

# Qwen's chat-control tokens (ids come from the tokenizer; these are the strings).
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"

CHAT_SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
PROTOCOL_TOKENS: tuple[str, ...] = (
    FORECAST_ACTION_OPEN,
    FORECAST_ACTION_CLOSE,
    FORECAST_TS_OPEN,
    FORECAST_TS_CLOSE,
    ANSWER_OPEN,
    ANSWER_CLOSE,
    TS_PLACEHOLDER,
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_RESPONSE_OPEN,
    TOOL_RESPONSE_CLOSE,
)
# Tokens only the tool (or the prompt builder) may write; the rollout engine never samples them.
TOOL_ONLY_TOKENS: tuple[str, ...] = (
    FORECAST_TS_OPEN, FORECAST_TS_CLOSE, TS_PLACEHOLDER, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE,
)

EOS_TOKEN = IM_END  # end of an assistant turn (Qwen3-Instruct convention)
PAD_TOKEN = ENDOFTEXT


def ts_placeholders(k: int) -> str:
    """The ``K`` placeholder string a prompt carries for ``h_ts [B, K, d_ts]``."""
    if k < 0:
        raise ValueError(f"number of time-series tokens must be >= 0, got {k}")
    return TS_PLACEHOLDER * k


def add_protocol_tokens(tokenizer) -> list[int]:
    """Add the protocol tokens to a HF tokenizer (idempotent); return their ids in PROTOCOL_TOKENS order.

    Also sets pad/eos when the tokenizer lacks them (Qwen has both already).
    """
    from tokenizers import AddedToken

    missing = [t for t in CHAT_SPECIAL_TOKENS if tokenizer.convert_tokens_to_ids(t) in (None, tokenizer.unk_token_id)]
    if missing:
        tokenizer.add_special_tokens({"additional_special_tokens": list(missing)})
    new = [AddedToken(t, special=False, normalized=False) for t in PROTOCOL_TOKENS if t not in tokenizer.get_vocab()]
    if new:
        tokenizer.add_tokens(new)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = PAD_TOKEN
    if tokenizer.eos_token is None:
        tokenizer.eos_token = EOS_TOKEN
    return [tokenizer.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS]
