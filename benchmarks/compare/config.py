"""The ``stockr1 bench compare`` config (configs/compare/*.yaml): every section typed, parsed once, strict.

``CompareConfig.from_yaml(path, overrides)`` / ``from_dict``: a misspelled section or key, at the top, in
a shared section or in a method's own section, is an error naming its path and the nearest valid key.
Sections that are merged into another config are checked merged, at load time, by that config's own
typed class: ``policy`` (+ a method's ``policy``) by ``PolicyConfig``, ``grpo`` (+ a method's ``grpo``)
by ``GRPOTrainConfig`` as ``rl.methods.run_grpo`` builds it, Stock-R1's GRPO overrides by
``GRPORunConfig`` and its ``warm_start`` overrides by ``SFTRunConfig``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm.policy import PolicyConfig
from llm.sft_config import SFTRunConfig
from rl.methods import rft_train_config
from rl.methods.stock_r1 import adapter as stock_r1
from rl.methods.text_sft import TextSFTConfig
from rl.run_config import GRPORunConfig
from stockr1.backtest import BacktestConfig
from stockr1.config import YamlConfig, as_plain, check_keys, check_merged, config_from_dict, deep_update
from stockr1.data.config import DataConfig

METHODS: tuple[str, ...] = ("stock_r1", "trading_r1", "trade_r1_fsr", "trade_r1_dsr", "alphaquanter")


@dataclass(frozen=True)
class CompareEval:
    """Evaluation rollouts (greedy by default); ``device``: cpu, or cuda on a GPU machine."""

    temperature: float = 0.0
    max_batch_rows: int | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.temperature < 0 or (self.max_batch_rows is not None and self.max_batch_rows < 1):
            raise ValueError(f"eval.temperature must be >= 0 and eval.max_batch_rows >= 1 (or null), got "
                             f"{self.temperature}, {self.max_batch_rows}")


@dataclass(frozen=True)
class MethodSection:
    """What every method's section takes. checkpoint: a trained policy dir (then compare only evaluates);
    real_config: the method's own full-scale config (documentation only: compare does not read it);
    policy / grpo / eval: merged over the shared sections of the same name."""

    checkpoint: str | None = None
    real_config: str | None = None
    max_new_tokens: int = 128
    policy: Mapping[str, Any] = field(default_factory=dict)
    grpo: Mapping[str, Any] = field(default_factory=dict)
    eval: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class CompareSFT(TextSFTConfig):
    """Every sibling method's own SFT stage (``rl.methods.text_sft``) on its teacher before GRPO:
    ``examples`` train-split days (one teacher text each, the same days for every method), the step
    budget of ``TextSFTConfig``; then the parse rate of greedy decisions on the validation split's
    decision days (every ``holding``-th day, at most ``val_decisions_per_ticker`` per ticker)."""

    examples: int = 2807
    val_decisions_per_ticker: int | None = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.examples < 1 or (self.val_decisions_per_ticker is not None and self.val_decisions_per_ticker < 1):
            raise ValueError(f"sft: examples and val_decisions_per_ticker must be >= 1, got {self}")


@dataclass(frozen=True)
class TextMethodSection(MethodSection):
    max_tool_calls: int = 1
    weights: Mapping[str, float] | None = None  # reward weights (None: the method's defaults)
    sft: Mapping[str, Any] = field(default_factory=dict)  # merged over the shared ``sft`` section


@dataclass(frozen=True)
class TradingR1Section(TextMethodSection):
    prompt_days: int = 5  # values per indicator in the prompt
    sections: tuple[str, ...] | None = None  # context sections (None: all)
    thesis: str = "full"  # format teacher: "full" thesis or the "short" structured variant

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.thesis not in ("full", "short"):
            raise ValueError(f"thesis must be 'full' or 'short', got {self.thesis!r}")


@dataclass(frozen=True)
class TradeR1Section(TextMethodSection):
    cost: float = 0.001  # C_trans per side


@dataclass(frozen=True)
class AlphaQuanterSection(TextMethodSection):
    max_tool_calls: int = 3


@dataclass(frozen=True)
class StockR1WarmStart:
    """Stock-R1's own joint SFT (``llm.sft.run_sft``) of ``config`` + ``overrides`` before u-GRPO."""

    config: str = "configs/sft/tiny.yaml"
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StockR1Section(MethodSection):
    config: str = "configs/grpo/tiny.yaml"  # rl.setup.run_grpo's base config
    sft_run_dir: str | None = None  # a finished joint SFT run u-GRPO starts from
    overrides: Mapping[str, Any] = field(default_factory=dict)  # merged into ``config`` last
    warm_start: StockR1WarmStart | None = None


METHOD_SECTIONS: dict[str, type[MethodSection]] = {
    "stock_r1": StockR1Section, "trading_r1": TradingR1Section, "trade_r1_fsr": TradeR1Section,
    "trade_r1_dsr": TradeR1Section, "alphaquanter": AlphaQuanterSection}


@dataclass(frozen=True)
class CompareConfig(YamlConfig):
    """configs/compare/*.yaml (each key documented there)."""

    seed: int = 0
    threads: int = 2
    work_dir: str = "checkpoints/compare"
    data: DataConfig = field(default_factory=DataConfig)
    decisions_per_ticker: int | None = None  # cap; None: every non-overlapping test day (rl.methods.env)
    n_train: int = 16
    max_context_chars: int | None = 800
    benchmark: str | None = "SP500"
    backtest: BacktestConfig = field(default_factory=BacktestConfig)
    policy: Mapping[str, Any] = field(default_factory=dict)  # PolicyConfig keys shared by every method
    sft: CompareSFT | None = field(default_factory=CompareSFT)  # the sibling methods' SFT (None: GRPO from init)
    grpo: Mapping[str, Any] = field(default_factory=lambda: {"steps": 2, "group_size": 4, "queries_per_step": 2})
    eval: CompareEval = field(default_factory=CompareEval)
    methods: Mapping[str, MethodSection] = field(default_factory=lambda: {m: METHOD_SECTIONS[m]() for m in METHODS})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompareConfig:
        d = dict(d or {})
        raw = d.pop("methods", None)
        cfg = config_from_dict(cls, d, "compare config")
        if raw is not None:
            cfg = dataclasses.replace(cfg, methods=_method_sections(raw))
        for name in cfg.methods:
            cfg.check_method(name)
        if min(cfg.threads, cfg.decisions_per_ticker or 1, cfg.n_train) < 1:
            raise ValueError(f"compare config: threads, decisions_per_ticker and n_train must be >= 1, got "
                             f"{cfg.threads}, {cfg.decisions_per_ticker}, {cfg.n_train}")
        return cfg

    def method(self, name: str) -> dict[str, Any]:
        """Method ``name``'s section as the plain mapping the adapters read (defaults filled in)."""
        return as_plain(self.methods.get(name) or METHOD_SECTIONS[name]())

    def eval_settings(self, m: Mapping[str, Any]) -> CompareEval:
        """The shared ``eval`` section with method section ``m``'s ``eval`` on top."""
        return config_from_dict(CompareEval, {**as_plain(self.eval), **dict(m.get("eval") or {})},
                                "compare config eval (+ the method's eval)")

    def sft_config(self, m: Mapping[str, Any]) -> CompareSFT | None:
        """The shared ``sft`` section with method section ``m``'s ``sft`` on top (None: no SFT stage)."""
        if self.sft is None:
            return None
        return config_from_dict(CompareSFT, {**as_plain(self.sft), **dict(m.get("sft") or {})},
                                "compare config sft (+ the method's sft)")

    def rft(self, m: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """(``rl.methods.run_grpo``'s rft dict: engine settings + GRPOTrainConfig keys, accelerator)."""
        g = {**self.grpo, **dict(m.get("grpo") or {})}
        acc = str(g.pop("accelerator", "cpu"))
        return {**g, "ckpt_every": int(g.get("steps", 1)), "max_new_tokens": int(m.get("max_new_tokens", 128)),
                "max_tool_calls": int(m.get("max_tool_calls", 1)), "seed": self.seed}, acc

    def stock_r1_overrides(self, m: Mapping[str, Any]) -> dict[str, Any]:
        """Overrides of Stock-R1's GRPO config (``m["config"]``): the shared budget, seed and trimming, the
        evaluated data when it is not the sample, then the section's own ``overrides``."""
        g = {**self.grpo, **dict(m.get("grpo") or {})}
        over = stock_r1.grpo_overrides(g, self.seed, self.max_context_chars, int(m.get("max_new_tokens", 128)))
        if self.data.source != "sample":  # train on the data the rows are evaluated on
            over["data"] = as_plain(self.data)
        return deep_update(over, m.get("overrides") or {})

    def check_method(self, name: str) -> None:
        """Build every config method ``name`` will build, so a bad key fails now, naming its path."""
        m, where = self.method(name), f"compare config methods.{name}"
        try:
            PolicyConfig.from_dict({**self.policy, **m["policy"]})
            self.eval_settings(m)
            if name != "stock_r1":
                rft_train_config(*self.rft(m))
                self.sft_config(m)
        except ValueError as e:
            raise ValueError(f"{where} (merged with the shared policy / eval / grpo sections): {e}") from e
        if name == "stock_r1":
            check_merged(GRPORunConfig, m["config"], self.stock_r1_overrides(m), f"{where}.overrides")
            if m["warm_start"]:
                ws = m["warm_start"]
                check_merged(SFTRunConfig, ws["config"], ws["overrides"], f"{where}.warm_start.overrides")


def _method_sections(raw: Any) -> dict[str, MethodSection]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"compare config methods must map method names to sections, got {raw!r}")
    check_keys(raw, METHODS, "compare config methods")
    return {name: config_from_dict(METHOD_SECTIONS[name], sec, f"compare config methods.{name}") for name, sec in raw.items()}
