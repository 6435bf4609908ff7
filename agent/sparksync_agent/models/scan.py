"""Finding the models under a root: GGUF files and safetensors folders, with their files.

Layouts:

- the store and extra roots: ``NAME.gguf`` (a loose GGUF file, named by its
  stem), ``NAME/`` or ``ORG/NAME/`` holding GGUF files or a safetensors model
  (``config.json`` plus ``*.safetensors``); ``.partial/...`` holds copies in
  progress, found the same way and marked partial;
- the Hugging Face cache: ``models--ORG--NAME/snapshots/<commit>/``, the
  commit named by ``refs/main`` (else the newest snapshot); a repo with an
  ``.incomplete`` blob, or one a fetch is still filling, is partial.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from sparksync_agent.protocol import ModelFormat, RootKind, valid_model_name

log = logging.getLogger(__name__)

FETCHING_MARK = ".sparksync-fetching"  # in an HF repo folder while a fetch fills it
RECEIVING_MARK = ".sparksync-receiving"  # in a staging folder: the copy of the model it names
MODEL_SUFFIXES = (".gguf",)


@dataclass
class Found:
    name: str
    format: ModelFormat
    root: Path
    root_kind: RootKind
    directory: Path
    path: Path  # what an engine gets
    files: list[str] = field(default_factory=list)  # relative to directory
    partial: bool = False
    quantization: str | None = None


def scan_root(root: Path, kind: RootKind, staging: Path | None = None) -> list[Found]:
    if not root.is_dir():
        return []
    if kind is RootKind.hf_cache:
        return [f for f in (_hf_repo(root, d) for d in sorted(root.glob("models--*"))) if f is not None]
    found = _scan_tree(root, kind, root, partial=False)
    if staging is not None and staging.is_dir():
        # Only folders a receive marked: an empty one of a copy just begun is listed too.
        for mark in sorted(staging.glob(f"**/{RECEIVING_MARK}")):
            name = mark.parent.relative_to(staging).as_posix()
            model = model_folder(mark.parent, name, kind, root, partial=True)
            if model is not None:
                found.append(model)
    return found


def _scan_tree(base: Path, kind: RootKind, root: Path, partial: bool) -> list[Found]:
    found: list[Found] = []
    for entry in sorted(base.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix in MODEL_SUFFIXES and not partial:
            one = _gguf_file(entry, kind, root)
            if one is not None:
                found.append(one)
        elif entry.is_dir():
            model = model_folder(entry, entry.name, kind, root, partial)
            if model is not None:
                found.append(model)
                continue
            for inner in sorted(entry.iterdir()) if _listable(entry) else []:  # ORG/NAME
                if inner.is_dir() and not inner.name.startswith("."):
                    model = model_folder(inner, f"{entry.name}/{inner.name}", kind, root, partial)
                    if model is not None:
                        found.append(model)
    return found


def _listable(path: Path) -> bool:
    try:
        path.iterdir()
        return True
    except OSError:
        return False


def _gguf_file(path: Path, kind: RootKind, root: Path) -> Found | None:
    if not valid_model_name(path.stem):
        return None
    return Found(
        name=path.stem, format=ModelFormat.gguf, root=root, root_kind=kind, directory=path.parent,
        path=path, files=[path.name], quantization=gguf_file_type(path),
    )  # fmt: skip


def model_folder(
    folder: Path, name: str, kind: RootKind, root: Path, partial: bool = False
) -> Found | None:
    """The model a folder holds, or None when it holds none (partial: any files count)."""
    if not valid_model_name(name):
        return None
    # Look at the folder's own entries before walking it: a root set to a big tree ("/", a
    # home) would otherwise walk every folder under it on each listing.
    if not partial and not _holds_model(folder):
        return None
    files = _files(folder)
    if not files and not partial:
        return None
    top = {f for f in files if "/" not in f}  # what the folder itself holds tells its format
    ggufs = sorted(f for f in top if f.endswith(".gguf"))
    if "config.json" in top and any(f.endswith(".safetensors") for f in top):
        fmt, path, quant = ModelFormat.safetensors, folder, _config_quantization(folder / "config.json")
    elif ggufs:
        fmt, path, quant = ModelFormat.gguf, folder / ggufs[0], gguf_file_type(folder / ggufs[0])
    elif partial:
        fmt, path, quant = ModelFormat.safetensors, folder, None  # not known until the copy ends
    else:
        return None
    return Found(name, fmt, root, kind, folder, path, files, partial, quant)


def _holds_model(folder: Path) -> bool:
    """A GGUF file, or config.json beside safetensors, directly in ``folder``."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries if not e.name.startswith(".") and e.is_file()]
    except OSError:
        return False
    return any(n.endswith(".gguf") for n in names) or (
        "config.json" in names and any(n.endswith(".safetensors") for n in names)
    )


def _files(folder: Path) -> list[str]:
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue  # rsync's temporary files, our marks
        if path.is_file():
            out.append(rel.as_posix())
    return out


def _hf_repo(hub: Path, repo: Path) -> Found | None:
    parts = repo.name.split("--")
    if len(parts) < 2:
        return None
    name = "/".join(parts[1:])
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    snapshot: Path | None = None
    if ref.is_file():
        candidate = snapshots / ref.read_text().strip()
        snapshot = candidate if candidate.is_dir() else None
    if snapshot is None and snapshots.is_dir():
        dirs = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        snapshot = dirs[-1] if dirs else None
    fetching = (repo / FETCHING_MARK).exists() or any((repo / "blobs").glob("*.incomplete"))
    if snapshot is None:
        if not fetching:
            return None
        return Found(name, ModelFormat.safetensors, hub, RootKind.hf_cache, repo, repo, [], partial=True)
    found = model_folder(snapshot, name, RootKind.hf_cache, hub, partial=fetching)
    if found is None:
        return None
    found.partial = fetching
    return found


def _config_quantization(config: Path) -> str | None:
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    quant = data.get("quantization_config") or {}
    if isinstance(quant, dict) and quant.get("quant_method"):
        return str(quant["quant_method"])
    dtype = data.get("torch_dtype") or data.get("dtype")
    return str(dtype) if dtype else None


# --- GGUF: general.file_type from the header, without the gguf package -------------------------

_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 24: "IQ1_S", 25: "IQ4_NL", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4",
}  # fmt: skip
# Value types: sizes of the fixed ones; 8 is a string, 9 an array.
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def gguf_file_type(path: Path) -> str | None:
    """The GGUF's ``general.file_type`` as llama.cpp names it (Q4_K_M, F16...), or None."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"GGUF":
                return None
            version, _tensors, kvs = struct.unpack("<IQQ", fh.read(20))
            if version < 2:
                return None
            for _ in range(min(kvs, 4096)):
                key = _string(fh)
                vtype = struct.unpack("<I", fh.read(4))[0]
                if key == "general.file_type" and vtype in (4, 5):
                    value = struct.unpack("<I", fh.read(4))[0]
                    return _FILE_TYPES.get(value, f"type {value}")
                _skip(fh, vtype)
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return None
    return None


def _string(fh) -> str:
    (n,) = struct.unpack("<Q", fh.read(8))
    if n > 1 << 20:
        raise ValueError("implausible GGUF string")
    return fh.read(n).decode()


def _skip(fh, vtype: int) -> None:
    if vtype in _SIZES:
        fh.seek(_SIZES[vtype], 1)
    elif vtype == 8:
        (n,) = struct.unpack("<Q", fh.read(8))
        fh.seek(n, 1)
    elif vtype == 9:
        itype, count = struct.unpack("<IQ", fh.read(12))
        if itype in _SIZES:
            fh.seek(_SIZES[itype] * count, 1)
        else:
            for _ in range(count):
                _skip(fh, itype)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")
