"""The demo's stages. Each one builds the argv of the CLI a user would call, with the budget and
settings of its section in ``configs/demo.yaml``, and points inputs/outputs into the run directory.

Where a CLI takes a YAML config, the stage writes a derived config into its own directory: the
stage's base config (``config:``) deep-merged with the section's ``overrides:`` and the run-local
paths (checkpoints of earlier stages, seed). Nothing of the stages' own logic is repeated here.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from stockr1.config import deep_update
from stockr1.pipeline.invoke import run_command
from stockr1.pipeline.runner import Stage, StageContext

# run-relative paths that stages hand to each other
DATA = "data"
TS_LAST = "ts/checkpoints/last.ckpt"  # resume state of the ts stage
TS_MODEL = "ts/checkpoints/pretrained"  # the TS encoder's saved form (ts fit's ExportPretrained, or the release's)
ACTION_MODEL = "action/decoder"  # the decoder's saved form (stockr1 decoder)
TOKENIZER = "tokenizer/tokenizer"
POLICY_TINY = "tokenizer/policy_tiny"
SFT = "sft"
GRPO = "grpo"
DEFAULT_RELEASE = "release/tiny"
REPO = Path(__file__).resolve().parents[2]


def flags(args: Mapping[str, Any] | None) -> list[str]:
    """``{"max-windows": 200, "no-plots": True, "baselines": ["a", "b"]}`` -> CLI flags."""
    out: list[str] = []
    for k, v in (args or {}).items():
        if v is None or v is False:
            continue
        out.append(f"--{k}")
        if isinstance(v, (list, tuple)):
            out += [str(x) for x in v]
        elif v is not True:
            out.append(str(v))
    return out


def derived_config(ctx: StageContext, wired: Mapping[str, Any], name: str = "demo_config.yaml") -> Path:
    """Write ``config`` + ``overrides`` + ``wired`` (run-local paths, seed) into the stage dir."""
    base = yaml.safe_load(Path(ctx.cfg["config"]).read_text()) or {}
    cfg = deep_update(deep_update(base, ctx.cfg.get("overrides") or {}), wired)
    path = ctx.stage_dir / name
    path.write_text(f"# derived by `stockr1 demo` from {ctx.cfg['config']} (+ configs/demo.yaml overrides)\n"
                    + yaml.safe_dump(cfg, sort_keys=False))
    return path


def _cli(ctx: StageContext, argv: list[str], isolate: bool = False, module: str = "stockr1.cli",
         owns_out: bool = False) -> list[str]:
    """Run one CLI command of the stage. ``owns_out``: the command's ``--out`` is the stage dir, which it
    replaces as a whole when it finishes (``stockr1.outdir``; ``--overwrite`` is added), so its log is
    kept beside the stage dir while it runs and moved into it afterwards."""
    log = ctx.run_dir / f".{ctx.stage_dir.name}.log.txt" if owns_out else ctx.stage_dir / "log.txt"
    shown = run_command([*argv, *(["--overwrite"] if owns_out else [])], log, isolate=isolate, module=module,
                        threads=int(ctx.cfg.get("threads", 2)), seed=ctx.seed)
    if owns_out:
        shutil.move(log, ctx.stage_dir / "log.txt")
    return shown


# --------------------------------------------------------------------------------------- stages
def run_data(ctx: StageContext) -> list[str]:
    return _cli(ctx, ["data", "build", "--out", ctx.stage_dir, "--seed", ctx.seed, *flags(ctx.cfg.get("args"))],
                owns_out=True)


def run_local_callbacks(cfg: Mapping[str, Any], ckpt_dir: Path) -> list[dict[str, Any]]:
    """The config's trainer callbacks with every ModelCheckpoint writing into ``ckpt_dir`` (a second
    ``--config`` replaces the list as a whole, so it is copied, not rebuilt: best.ckpt and last.ckpt
    are whatever the config's callbacks make them)."""
    out = copy.deepcopy(list((cfg.get("trainer") or {}).get("callbacks") or []))
    for cb in out:
        if isinstance(cb, Mapping) and str(cb.get("class_path", "")).endswith("ModelCheckpoint"):
            cb["init_args"] = {**(cb.get("init_args") or {}), "dirpath": str(ckpt_dir)}
    return out


def run_ts(ctx: StageContext) -> list[str]:
    """Lightning CLI: the base config, then a second ``--config`` with the demo's trainer budget and
    the run-local logger/checkpoint dirs. An interrupted fit resumes with ``--resume`` from ``last.ckpt``
    (the config's unmonitored ModelCheckpoint rewrites it at every validation)."""
    d = ctx.stage_dir
    base = yaml.safe_load(Path(ctx.cfg["config"]).read_text()) or {}
    callbacks = run_local_callbacks(deep_update(base, ctx.cfg.get("overrides") or {}), d / "checkpoints")
    loggers = [{"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(d), "name": "logs"}}]
    if ctx.cfg.get("wandb"):
        loggers.append({"class_path": "ts_encoder.loggers.WandbLogger",
                        "init_args": {"project": "stockr1-ts-encoder", "name": f"demo-{ctx.seed}", "save_dir": str(d)}})
    over = deep_update(ctx.cfg.get("overrides") or {}, {
        "seed_everything": ctx.seed,
        "data": {"source": "dataset", "path": str(ctx.path(DATA))},
        "trainer": {"logger": loggers, "callbacks": callbacks, "default_root_dir": str(d)},
    })
    (d / "demo_overrides.yaml").write_text(yaml.safe_dump(over, sort_keys=False))
    argv = ["ts", "fit", "--config", ctx.cfg["config"], "--config", d / "demo_overrides.yaml"]
    return _cli(ctx, argv + (["--resume"] if ctx.resume else []), isolate=True)


def run_action(ctx: StageContext) -> list[str]:
    """``stockr1 decoder`` (--from-scratch only), initialised from the ts stage's saved encoder; writes
    ``action/decoder/``, the standalone decoder of the recipe's first stage (the demo's SFT trains its own,
    which ``bench action`` measures). An interrupted run keeps its stage dir (no ``.done``), and the rerun
    adds ``--resume``: it continues from ``action/last.ckpt``."""
    # the decoder starts from the encoder, so it takes the encoder's architecture from its saved config
    arch = json.loads((ctx.path(TS_MODEL) / "config.json").read_text())["encoder"]
    cfg = derived_config(ctx, {"data": {"source": "dataset", "path": str(ctx.path(DATA))}, "model": arch,
                               "init_encoder": str(ctx.path(TS_MODEL)), "train": {"seed": ctx.seed}})
    return _cli(ctx, ["--config", cfg, "--out", ctx.stage_dir, "--threads", ctx.cfg.get("threads", 2),
                      *(["--resume"] if ctx.resume else [])], isolate=True, module="forecast_action.train")


def run_tokenizer(ctx: StageContext) -> list[str]:
    return _cli(ctx, ["tokenizer", "build", "--out", ctx.stage_dir, "--seed", ctx.seed, *flags(ctx.cfg.get("args"))])


def run_sft(ctx: StageContext) -> list[str]:
    """Joint SFT as ``configs/sft/tiny.yaml`` says (its own fresh decoder, warmed up on L_TS: the recipe
    ``bench sft_recipe`` picked on validation), with the tokenizer stage's tokenizer; after an interruption
    the rerun adds ``--resume``: it continues from ``sft/last.ckpt``. This is what ``release/tiny`` ships."""
    cfg = derived_config(ctx, {
        "policy": {"tokenizer_path": str(ctx.path(TOKENIZER))},
        "train": {"seed": ctx.seed},
        "wandb": {"mode": "offline" if ctx.cfg.get("wandb") else "disabled"},
    })
    return _cli(ctx, ["sft", "--config", cfg, "--out", ctx.run_dir, "--run", SFT, *(["--resume"] if ctx.resume else [])],
                isolate=True)


def run_release(ctx: StageContext) -> list[str]:
    """The shipped artefacts (``dir``, hashes checked): the SFT run copied to ``<run>/sft``, where
    GRPO, ``bench qa`` and ``bench action`` read it, and the TS encoder (of ``ts``, default ``dir``) to
    ``<run>/ts/checkpoints/pretrained``,
    where the ts stage would have written it (``bench forecast`` / ``bench backtest``); ``--release``
    after ``--from-scratch`` packs a fresh one instead."""
    from stockr1.release import install

    src, ts_src = (_repo_path(ctx.cfg.get(k) or ctx.cfg.get("dir", DEFAULT_RELEASE)) for k in ("dir", "ts"))
    if ts_src == src:
        man = ts_man = install(src, ctx.path(SFT), ctx.path(TS_MODEL))
    else:  # a release without a TS encoder (the small policy's) beside the one whose encoder the benches use
        man, ts_man = install(src, ctx.path(SFT)), install(ts_src, None, ctx.path(TS_MODEL))
    keep = {k: v for k, v in man.items() if k != "files"}
    (ctx.stage_dir / "manifest.json").write_text(json.dumps({**keep, "ts_release": ts_src, "ts": ts_man.get("ts")}, indent=1))
    ctx.log(f"[release] {src}: SFT run of commit {man['git_commit'][:10]} ({man['created']}), {man['sft_steps']} steps; "
            f"TS encoder ({ts_src}): {(ts_man.get('ts') or {}).get('command')}")
    return ["(stockr1.release.install)", src, str(ctx.path(SFT)), ts_src, str(ctx.path(TS_MODEL))]


def _repo_path(path: str) -> str:
    """A configured path as given where it exists from here (so reports show ``results/qa``, not an absolute
    path), else relative to the repository root: the demo may run from another directory."""
    return path if Path(path).is_absolute() or Path(path).exists() else str(REPO / path)


def run_grpo(ctx: StageContext) -> list[str]:
    """u-GRPO from the SFT run (policy/ + decoder/), the same QA items as SFT; ``--resume`` after an
    interruption continues from ``grpo/last.ckpt``."""
    sft_cfg = yaml.safe_load((ctx.path(SFT) / "config.yaml").read_text())
    cfg = derived_config(ctx, {"seed": ctx.seed, "data": sft_cfg.get("data", {}),
                               "qa": {**sft_cfg.get("qa", {}), **((ctx.cfg.get("overrides") or {}).get("qa") or {})},
                               "sft": {"run_dir": str(ctx.path(SFT))}, "train": {"seed": ctx.seed},
                               "wandb": {"mode": "offline" if ctx.cfg.get("wandb") else "disabled"}})
    argv = ["grpo", "--config", cfg, "--sft", ctx.path(SFT), "--out", ctx.run_dir, "--run", GRPO]
    if ctx.resume:
        argv.append("--resume")
    out = _cli(ctx, argv, isolate=True)
    shutil.copy(ctx.path(SFT) / "qa.jsonl", ctx.path(GRPO) / "qa.jsonl")  # bench qa reads the items beside the policy
    return out


def run_bench_forecast(ctx: StageContext) -> list[str]:
    return _cli(ctx, ["bench", "forecast", "--data", ctx.path(DATA), "--checkpoint", ctx.path(TS_MODEL),
                      "--out", ctx.stage_dir, "--seed", ctx.seed, "--cache-dir", ctx.run_dir / ".cache" / "bench_forecast",
                      "--threads", ctx.cfg.get("threads", 2), *flags(ctx.cfg.get("args"))], owns_out=True)


def run_bench_action(ctx: StageContext) -> list[str]:
    """The decoder the policy's forecast tool calls (``sft/decoder``, with the SFT run's thresholds), so
    the oracle gain in the report is that of the decoder GRPO and ``bench qa`` use."""
    return _cli(ctx, ["bench", "action", "--checkpoint", ctx.path(SFT) / "decoder", "--thresholds",
                      ctx.path(SFT) / "thresholds.json", "--out", ctx.stage_dir,
                      "--seed", ctx.seed, "--threads", ctx.cfg.get("threads", 2), *flags(ctx.cfg.get("args"))],
                owns_out=True)


def run_bench_qa(ctx: StageContext) -> list[str]:
    """The SFT and the u-GRPO policy on the same held-out questions in one ``bench qa`` call, so the
    baselines, the resamples and the paired u-GRPO − SFT difference are shared. ``reuse`` (a path in the
    repository): the SFT row's rollouts come from the release's own evaluation when nothing differs."""
    args = dict(ctx.cfg.get("args") or {})
    if args.get("reuse"):  # an earlier bench qa --out in the repository (results/qa), wherever the demo runs from
        args["reuse"] = _repo_path(str(args["reuse"]))
    return _cli(ctx, ["bench", "qa", "--checkpoint", ctx.path(SFT), "--compare", ctx.path(GRPO), "--compare-name",
                      "stock-r1-grpo", "--config", ctx.path(SFT) / "config.yaml", "--out", ctx.stage_dir,
                      "--threads", ctx.cfg.get("threads", 2), *flags(args)], owns_out=True)


def run_bench_backtest(ctx: StageContext) -> list[str]:
    return _cli(ctx, ["bench", "backtest", "--data", ctx.path(DATA), "--checkpoint", ctx.path(TS_MODEL),
                      "--out", ctx.stage_dir, *flags(ctx.cfg.get("args"))], owns_out=True)


def run_report(ctx: StageContext) -> list[str]:
    from stockr1.pipeline.report import write_report

    write_report(ctx.run_dir, SCRATCH_STAGES if ctx.cfg.get("from_scratch") else DEMO_STAGES)
    return ["(stockr1.pipeline.report.write_report)"]


_SFT_OUT = (f"{SFT}/policy", f"{SFT}/decoder/", f"{SFT}/qa.jsonl", f"{SFT}/config.yaml", f"{SFT}/thresholds.json")
DATA_STAGE = Stage("data", run_data, (), (f"{DATA}/manifest.json",), "build windows + context from the offline sample")
_AFTER_SFT: tuple[Stage, ...] = (
    Stage("grpo", run_grpo, (f"{SFT}/policy", f"{SFT}/decoder/", f"{SFT}/config.yaml"),
          (f"{GRPO}/policy", f"{GRPO}/decoder/", f"{GRPO}/summary.json"), "uncertainty-weighted GRPO"),
    Stage("bench_forecast", run_bench_forecast, (f"{DATA}/manifest.json", TS_MODEL), ("bench_forecast/metrics.json",),
          "TS encoder vs baselines (Table 2)"),
    Stage("bench_action", run_bench_action, (f"{SFT}/decoder/", f"{SFT}/thresholds.json"),
          ("bench_action/metrics.json",), "oracle gain + controllability of the policy's decoder"),
    Stage("bench_qa", run_bench_qa, (f"{SFT}/policy", f"{GRPO}/policy", f"{SFT}/qa.jsonl"),
          ("bench_qa/metrics.json", "bench_qa/intervals.json"), "QA accuracy per family, SFT vs u-GRPO"),
    Stage("bench_backtest", run_bench_backtest, (f"{DATA}/manifest.json", TS_MODEL), ("bench_backtest/metrics.json",),
          "z-score signal backtest (Table 6)"),
    Stage("report", run_report, ("data/manifest.json",), ("report.md",), "report.md with tables, plots and links"),
)
# `stockr1 demo` (default): the TS encoder and the SFT run (policy, its decoder, tokenizer) come from the
# shipped release; nothing is pretrained here
DEMO_STAGES: tuple[Stage, ...] = (
    DATA_STAGE,
    Stage("release", run_release, (), (*_SFT_OUT, TS_MODEL), "the shipped SFT run and TS encoder (configs/demo.yaml: release)"),
    *_AFTER_SFT,
)
# `stockr1 demo --from-scratch`: every model trained here (what `--release DIR` packs: ts + sft)
SCRATCH_STAGES: tuple[Stage, ...] = (
    DATA_STAGE,
    Stage("ts", run_ts, (f"{DATA}/manifest.json",), (TS_MODEL, TS_LAST), "pretrain the tiny TS encoder (Lightning CLI)"),
    Stage("action", run_action, (f"{DATA}/manifest.json", TS_MODEL), (ACTION_MODEL,),
          "standalone action-conditioned decoder, initialised from the encoder"),
    Stage("tokenizer", run_tokenizer, (), (TOKENIZER, POLICY_TINY), "offline tokenizer + tiny Qwen3 policy"),
    Stage("sft", run_sft, (TOKENIZER,), _SFT_OUT, "joint SFT (L_SFT + λ L_TS)"),
    *_AFTER_SFT,
)
