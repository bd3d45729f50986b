"""The stage runner: an ordered list of stages, one directory and one ``.done`` marker each.

Run layout (``<run>`` = the run directory)::

    <run>/manifest.json        seed, config, data hash, versions, git commit, per-stage timings
    <run>/<stage>/             everything the stage writes (its CLI's ``--out``)
    <run>/<stage>/.done        JSON: outputs, argv, wall / CPU seconds, finish time
    <run>/<stage>/log.txt      the stage's stdout + stderr (a command that replaces its --out as a whole,
                               data build and the benches, logs to <run>/.<stage>.log.txt until it ends)

A stage whose ``.done`` exists is skipped. A stage that was interrupted has a directory but no
``.done``; rerunning calls its CLI again with ``resume=True``, which a training stage passes on as
``--resume`` (README, "Resume": it continues from the last complete checkpoint in its dir). ``fresh``
deletes the stage's directory first, so nothing is reused.
"""

from __future__ import annotations

import json
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DONE = ".done"


class StageInputError(RuntimeError):
    """A stage's input is missing (its producing stage has not run, or its output was deleted)."""


@dataclass(frozen=True)
class StageContext:
    """What a stage sees: the run dir, its own dir, the seed, its config section and whether it resumes."""

    run_dir: Path
    stage_dir: Path
    seed: int
    cfg: dict[str, Any]
    resume: bool
    log: Callable[[str], None] = print

    def path(self, rel: str) -> Path:
        """A path inside the run directory (``"ts/checkpoints/last.ckpt"``)."""
        return self.run_dir / rel


@dataclass(frozen=True)
class Stage:
    """One pipeline step.

    name:    its directory under the run dir and its ``--only`` / ``--from`` name
    run:     ``run(ctx) -> argv | None``; does the work (normally by calling a CLI), returns the argv it
             used (recorded in ``.done``)
    inputs:  run-relative paths that must exist before it starts (outputs of earlier stages)
    outputs: run-relative paths it must have written when it returns
    """

    name: str
    run: Callable[[StageContext], Sequence[str] | None]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    doc: str = ""


@dataclass
class StageResult:
    name: str
    status: str  # "done" (ran now) | "skipped" (already done)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    argv: list[str] = field(default_factory=list)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads) and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def read_done(stage_dir: Path) -> dict[str, Any] | None:
    marker = stage_dir / DONE
    if not marker.exists():
        return None
    try:
        return json.loads(marker.read_text())
    except json.JSONDecodeError:
        return None  # a marker cut short by a crash is not a finished stage


def producer_of(stages: Sequence[Stage], rel: str) -> str | None:
    """Name of the stage whose outputs contain ``rel`` (or a folder above it)."""
    for st in stages:
        if any(rel == out or rel.startswith(out.rstrip("/") + "/") for out in st.outputs):
            return st.name
    return None


def select(stages: Sequence[Stage], only: str | None = None, start: str | None = None) -> list[Stage]:
    """The stages to run: all, ``only`` one, or ``start`` and everything after it."""
    names = [s.name for s in stages]
    for name in (only, start):
        if name is not None and name not in names:
            raise ValueError(f"unknown stage {name!r}; stages are: {', '.join(names)}")
    if only is not None and start is not None:
        raise ValueError("use either --only or --from, not both")
    if only is not None:
        return [s for s in stages if s.name == only]
    if start is not None:
        return list(stages[names.index(start):])
    return list(stages)


class StageRunner:
    """Runs stages in order into one run directory; see the module docstring.

    cfg:      the whole pipeline config; each stage gets ``cfg.get(stage.name, {})``
    on_stage: called after every stage with the list of results so far (the manifest writer)
    """

    def __init__(self, stages: Sequence[Stage], run_dir: str | Path, seed: int, cfg: dict[str, Any],
                 on_stage: Callable[[list[StageResult]], None] | None = None,
                 log: Callable[[str], None] = print) -> None:
        names = [s.name for s in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate stage names in {names}")
        self.stages, self.run_dir, self.seed, self.cfg = list(stages), Path(run_dir), seed, cfg
        self.on_stage, self.log = on_stage, log

    def check_inputs(self, stage: Stage) -> None:
        missing = [rel for rel in stage.inputs if not (self.run_dir / rel).exists()]
        if missing:
            lines = []
            for rel in missing:
                prod = producer_of(self.stages, rel)
                hint = f" (written by stage '{prod}': run `stockr1 demo --only {prod}` first)" if prod else ""
                lines.append(f"  {self.run_dir / rel}{hint}")
            raise StageInputError(f"stage '{stage.name}' is missing its input(s):\n" + "\n".join(lines))

    def run(self, only: str | None = None, start: str | None = None, fresh: bool = False) -> list[StageResult]:
        """Run the selected stages. ``start`` (``--from``) reruns it and every later stage from scratch;
        ``fresh`` reruns the selected ones from scratch (their directories are deleted first)."""
        todo = select(self.stages, only, start)
        results: list[StageResult] = []
        for stage in todo:
            stage_dir = self.run_dir / stage.name
            done = read_done(stage_dir)
            if done is not None and start is None and not fresh:
                self.log(f"[demo] {stage.name}: done ({done.get('wall_s', 0):.0f}s), skipping (--fresh reruns it)")
                results.append(StageResult(stage.name, "skipped", done.get("wall_s", 0.0), done.get("cpu_s", 0.0),
                                           done.get("argv", [])))
                continue
            self.check_inputs(stage)
            if (fresh or start is not None or done is not None) and stage_dir.exists():
                # --from: inputs may have changed, so no stale progress; a finished stage: resuming is a no-op
                shutil.rmtree(stage_dir)
            resume = stage_dir.exists() and any(stage_dir.iterdir())
            stage_dir.mkdir(parents=True, exist_ok=True)
            self.log(f"[demo] {stage.name}: {'resuming' if resume else 'starting'}")
            ctx = StageContext(self.run_dir, stage_dir, self.seed, dict(self.cfg.get(stage.name) or {}), resume,
                               self.log)
            t0, c0 = time.perf_counter(), _cpu_seconds()
            argv = list(stage.run(ctx) or [])
            wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
            missing = [rel for rel in stage.outputs if not (self.run_dir / rel).exists()]
            if missing:
                raise RuntimeError(f"stage '{stage.name}' returned but did not write: "
                                   + ", ".join(str(self.run_dir / m) for m in missing))
            marker = {"stage": stage.name, "outputs": list(stage.outputs), "argv": argv, "wall_s": round(wall, 2),
                      "cpu_s": round(cpu, 2), "resumed": resume,
                      "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            (stage_dir / DONE).write_text(json.dumps(marker, indent=1))
            self.log(f"[demo] {stage.name}: finished in {wall:.0f}s wall, {cpu:.0f}s CPU")
            results.append(StageResult(stage.name, "done", wall, cpu, argv))
            if self.on_stage is not None:
                self.on_stage(results)
        return results


def stage_timings(run_dir: Path, stages: Sequence[Stage]) -> dict[str, dict[str, Any]]:
    """Per-stage wall / CPU seconds from the ``.done`` markers (finished stages only)."""
    out = {}
    for st in stages:
        done = read_done(Path(run_dir) / st.name)
        if done is not None:
            out[st.name] = {k: done.get(k) for k in ("wall_s", "cpu_s", "resumed", "finished_at")}
    return out
