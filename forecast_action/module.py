"""Lightning training of the action-conditioned decoder: L_TS conditioned on the teacher action a*.

``ActionDecoderModule`` subclasses ``ts_encoder.module.TSForecastModule`` and keeps its optimiser and
schedule (``configure_optimizers``), input standardisation (``setup``) and checkpoint layout; the data
comes from ``ts_encoder.datamodule.WindowDataModule`` (batches ``{"x", "y", "idx"}``). What it adds:

- the action encoder e_ψ, shared with ``self.decoder`` (an ``ActionConditionedDecoder`` over the
  parent's ``self.model`` and ``self.normalizer``, so the same weights serve both views);
- a teacher-action table: a* = g(realised future) for every train/val window (``idx`` looks it up),
  with g's thresholds fitted on the train split in ``setup`` and stored as a hyper-parameter;
- the training loss is ``decoder_loss.DecoderLoss`` of the ``recipe`` hyper-parameter (the one home of
  the decoder loss, shared with joint SFT): L_TS under field dropout of a* plus the control loss on
  counterfactual actions; a checkpoint without ``recipe`` (before issue 21) trained L_TS under dropout
  ``p_none`` only, and resumes that way;
- validation logs L_TS with the full a* (``val/loss``), with no action (``val/loss_uncond``), their gap
  ``val/oracle_gap`` - the information the interface carries - the control loss on seeded
  counterfactual actions (``val/control``) and the recipe's objective ``val/objective`` = val/loss +
  control_weight · val/control (the checkpoint monitor: a decoder is chosen for following its action
  as well as for its oracle fit; with control_weight 0 it equals val/loss);
- ``fit_normalizer`` uses the no-action forecast, the uncertainty the LLM sees before it acts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from forecast_action.decoder import FILE_FORMAT as DECODER_FORMAT
from forecast_action.decoder import ActionConditionedDecoder
from forecast_action.decoder_loss import DecoderLoss, DecoderRecipe
from forecast_action.derive import ActionThresholds, actions_from_windows
from forecast_action.encoder import ActionBatch, ActionEncoderConfig, drop_fields, featurize
from forecast_action.forecaster import FILE_FORMAT as FORECASTER_FORMAT
from forecast_action.forecaster import Forecaster
from stockr1.artifact import CONFIG_FILE
from stockr1.types import Forecast, TrainWindows, Windows
from ts_encoder.config import LossWeights, TSEncoderConfig
from ts_encoder.loss import ts_loss
from ts_encoder.module import TSForecastModule
from ts_encoder.uncertainty import raw_uncertainty

# TSEncoder submodules trained with train_scope="action" (everything else is the history trunk)
ACTION_SCOPE = ("film", "scale_embed", "head_mu", "head_sigma", "head_high", "head_low")


class ActionDecoderModule(TSForecastModule):
    """``load_from_checkpoint(path)`` needs no arguments (configs and thresholds are hyper-parameters).

    init_encoder: what to start from (``load_encoder_state``: a saved TS encoder or decoder directory);
    FiLM keeps its identity init.
    pretrained_from: provenance only (the checkpoint stores ``init_encoder`` here, so reloading does not
    need the original file).
    train_scope: ``all`` trains everything; ``action`` freezes the history trunk (embeddings, attention
    blocks, ``ln_f``, the LLM projection ``proj``) and trains e_ψ, FiLM and the head side (``scale_embed``
    and the distributional heads) only. The
    second stage of the tiny recipe uses it: the representation h_ts the LLM reads stays exactly the
    pretrained one, and with no gradient through the trunk a step costs about a third.
    """

    def __init__(
        self,
        encoder: TSEncoderConfig | dict[str, Any] | None = None,
        loss_weights: LossWeights | dict[str, Any] | None = None,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        warmup_steps: int = 100,
        min_lr_ratio: float = 0.0,
        normalizer_fit_windows: int = 2048,
        val_samples: int = 100,
        fan_chart_windows: int = 0,
        action: dict[str, Any] | None = None,
        thresholds: dict[str, Any] | None = None,
        p_none: float = 0.2,
        init_encoder: str | None = None,
        pretrained_from: str | None = None,
        train_scope: str = "all",
        tool_samples: int = 16,
        recipe: dict[str, Any] | None = None,
    ) -> None:
        act_cfg = ActionEncoderConfig(**(action or {}))
        cfg = replace(TSEncoderConfig.from_any(encoder), cond_dim=act_cfg.cond_dim)
        super().__init__(encoder=cfg, loss_weights=loss_weights, lr=lr, weight_decay=weight_decay,
                         warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio,
                         normalizer_fit_windows=normalizer_fit_windows, val_samples=val_samples,
                         fan_chart_windows=fan_chart_windows)
        self.save_hyperparameters({
            **dict(self.hparams), "action": asdict(act_cfg), "thresholds": thresholds, "p_none": p_none,
            "init_encoder": None, "pretrained_from": init_encoder or pretrained_from, "train_scope": train_scope,
            "tool_samples": tool_samples, "recipe": recipe,
        })
        self.recipe = DecoderRecipe(**recipe) if recipe is not None else DecoderRecipe(p_none=p_none, control_weight=0.0)
        self._loss: DecoderLoss | None = None
        self.decoder = ActionConditionedDecoder(cfg, act_cfg, encoder=self.model, normalizer=self.normalizer,
                                                tool_samples=tool_samples)
        if init_encoder:
            encoder_state, action_state = load_encoder_state(init_encoder)
            self.decoder.load_encoder_state(encoder_state)
            if action_state:  # starting from an earlier action-decoder checkpoint (the head may be new)
                enc_part = {k: v for k, v in action_state.items() if not k.startswith("action_head.")}
                head_part = {k[len("action_head."):]: v for k, v in action_state.items()
                             if k.startswith("action_head.")}
                missing, unexpected = self.decoder.action_encoder.load_state_dict(enc_part, strict=False)
                if unexpected or (missing and len(missing) == len(self.decoder.action_encoder.state_dict())):
                    raise ValueError(f"action encoder state does not fit: missing {missing}, unexpected {unexpected}")
                if head_part:
                    self.decoder.action_head.load_state_dict(head_part)
        if train_scope not in ("all", "action"):
            raise ValueError(f"train_scope must be 'all' or 'action', got {train_scope!r}")
        if train_scope == "action":
            for name, p in self.model.named_parameters():
                p.requires_grad_(name.split(".")[0] in ACTION_SCOPE)
        self._teacher: dict[str, ActionBatch] = {}

    @property
    def thresholds(self) -> ActionThresholds | None:
        th = self.hparams.get("thresholds")
        return ActionThresholds.from_dict(th) if th else None

    # ---------------------------------------------------------------- data
    def setup(self, stage: str) -> None:
        super().setup(stage)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None or not getattr(dm, "windows", None):
            return
        if self.thresholds is None:  # fitted on the TRAIN split only; stored so g is frozen with the model
            if stage != "fit":
                raise RuntimeError("no action thresholds: fit the module first")
            self.hparams["thresholds"] = ActionThresholds.fit(dm.windows["train"]).to_dict()  # a TrainWindows
        splits = ("train", "val") if stage == "fit" else ("test",) if stage == "test" else ("val",)
        self._teacher.update({s: teacher_actions(dm.windows[s], self.thresholds) for s in splits})
        self._loss = DecoderLoss(self.recipe, self.thresholds, self.weights)

    def _actions(self, split: str, idx: Tensor) -> ActionBatch:
        if split not in self._teacher:
            raise RuntimeError("teacher actions are built in setup('fit'); train with a WindowDataModule")
        t = self._teacher[split]
        i = idx.cpu()
        return ActionBatch(t.codes[i], t.numeric[i], t.mask[i]).to(self.device)

    # ---------------------------------------------------------------- steps
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        if self._loss is None:
            raise RuntimeError("the decoder loss is built in setup('fit'); train with a WindowDataModule")
        res = self._loss(self.decoder, batch["x"], batch["y"], self._actions("train", batch["idx"]),
                         channels=batch.get("channels"))
        bs = batch["x"].shape[0]
        self.log("train/loss", res.total, prog_bar=True, on_step=True, on_epoch=True, batch_size=bs)
        self.log_dict({f"train/{k}": v for k, v in {**res.parts, "ts": res.ts, "control": res.control}.items()},
                      on_epoch=True, batch_size=bs)
        return res.total

    def _eval_step(self, batch: dict[str, Tensor], split: str, batch_idx: int = 0) -> None:
        ab = self._actions(split, batch["idx"])
        ch = batch.get("channels")
        cond, parts = ts_loss(self.decoder(batch["x"], ab, ch), batch["y"], self.weights)
        uncond, parts_u = ts_loss(self.decoder(batch["x"], drop_fields(ab, p_none=1.0), ch), batch["y"], self.weights)
        bs = batch["x"].shape[0]
        self.log_dict({f"{split}/loss": cond, f"{split}/loss_uncond": uncond, f"{split}/oracle_gap": uncond - cond},
                      prog_bar=split == "val", batch_size=bs)
        self.log_dict({f"{split}/{k}": v for k, v in parts.items()}, batch_size=bs)
        self.log_dict({f"{split}/{k}_uncond": v for k, v in parts_u.items()}, batch_size=bs)
        objective = cond
        if self.recipe.control_weight > 0 and self._loss is not None:  # seeded: the same requests every epoch
            gen = torch.Generator(device=self.device).manual_seed(batch_idx)
            ctrl = self._loss(self.decoder, batch["x"], batch["y"], ab, generator=gen, channels=ch).control
            self.log(f"{split}/control", ctrl, batch_size=bs)
            objective = cond + self.recipe.control_weight * ctrl
        self.log(f"{split}/objective", objective, batch_size=bs)

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val", batch_idx)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "test", batch_idx)

    def predict_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
        """The no-action forecast heads (conditioned forecasts go through ``forecast(.., actions=..)``)."""
        x = batch["x"]
        out = self.decoder(x, featurize([None] * x.shape[0], np.ones(x.shape[0])).to(self.device), batch.get("channels"))
        u = raw_uncertainty(out, self.decoder.ts_cfg.u_channels)
        u = self.normalizer(u) if bool(self.normalizer.fitted) else torch.full_like(u, float("nan"))
        return {"mu": out.mu, "sigma": out.sigma, "q_high": out.q_high, "q_low": out.q_low, "uncertainty": u,
                "idx": batch["idx"], **({"channels": batch["channels"]} if "channels" in batch else {})}

    def fit_normalizer(self, train: TrainWindows) -> None:
        """Normalise U by its train-split CDF under the no-action forecast (``decoder.fit_uncertainty``)."""
        self.decoder.fit_uncertainty(train, self.hparams.normalizer_fit_windows)

    @torch.no_grad()
    def forecast(self, windows: Windows, n_samples: int = 100, cond: Tensor | None = None, batch_size: int = 1024,
                 seed: int | None = 0, actions: list | None = None) -> Forecast:
        """Parent signature plus ``actions`` (one ForecastAction | None per window); ``cond`` is not used
        here - actions enter through e_ψ."""
        if cond is not None:
            raise ValueError("ActionDecoderModule.forecast takes `actions`, not a raw `cond` vector")
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        return self.decoder.forecast(windows, actions, n_samples, gen, batch_size)


def teacher_actions(windows: Windows, thresholds: ActionThresholds) -> ActionBatch:
    """featurised a* = g(realised future) for every window (CPU tensors)."""
    return featurize(actions_from_windows(windows, thresholds), windows.last_close)


def load_encoder_state(path: str | Path) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(TSEncoder state, action-encoder + action-head state) to start a decoder from: a ``Forecaster``
    saved directory (``stockr1 ts fit`` exports ``<checkpoints>/pretrained/``), an action decoder's saved
    directory (``stockr1 decoder`` writes ``OUT/decoder/``), or, read for older runs, a
    ``TSForecastModule`` / ``ActionDecoderModule`` Lightning checkpoint or a plain encoder state dict.
    The action part is empty when the source is a TS encoder."""
    p = Path(path)
    if p.is_dir():
        fmt = json.loads((p / CONFIG_FILE).read_text()).get("format") if (p / CONFIG_FILE).is_file() else None
        if fmt == FORECASTER_FORMAT:
            return Forecaster.from_pretrained(p).encoder.state_dict(), {}
        if fmt == DECODER_FORMAT:
            dec = ActionConditionedDecoder.from_pretrained(p)
            act = {k: v for k, v in dec.state_dict().items() if k.startswith(("action_encoder.", "action_head."))}
            return dec.encoder.state_dict(), {k.removeprefix("action_encoder."): v for k, v in act.items()}
        raise ValueError(f"init_encoder {p} is neither a saved TS encoder (Forecaster.save_pretrained) nor a saved "
                         f"action decoder (config.json format {fmt!r})")
    if not p.is_file():
        raise FileNotFoundError(f"init_encoder {p} does not exist (a saved TS encoder or decoder directory)")
    ckpt = torch.load(p, map_location="cpu", weights_only=False)
    state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else ckpt
    enc = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
    pre = "decoder.action_encoder."
    act = {k[len(pre):]: v for k, v in state.items() if k.startswith(pre)}
    head = {k[len("decoder."):]: v for k, v in state.items() if k.startswith("decoder.action_head.")}
    return enc or state, {**act, **head}
