"""The policy side of stockr1 (see docs/llm.md, docs/qa_sft.md).

Modules are imported directly (``from llm.policy import Policy``) so that light users such as the
QA generator do not pay for importing transformers:

special_tokens  protocol tokens           tokenizer / tokenizer_cli  offline tokenizer, tiny policy
policy          LM + LoRA + soft tokens   logprobs                   per-token log-probs / entropy
rollout         tool-calling engine       tools                      ForecastTool
scripted        scripted test policy      qa, traces, sft            QA data, SFT traces, joint SFT
corpus          the tokenizer's corpus
"""
