"""Run manifests: what a reader needs to reproduce a result (seed, config, data hash, versions, commit)."""

from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "lightning", "transformers", "peft", "trl", "numpy", "pandas", "arch", "statsforecast")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(repo: Path | None = None) -> str:
    """The current commit, with ``-dirty`` when the work tree has uncommitted changes."""
    cwd = repo or Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_manifest(path: Path, **fields: Any) -> dict[str, Any]:
    """Write ``fields`` plus package versions and the git commit as JSON; return what was written."""
    manifest = {**fields, "versions": package_versions(), "git_commit": git_commit()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return manifest
