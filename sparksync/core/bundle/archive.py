"""The bundle's archive format: one gzip-compressed tar.

Layout (flat, so the folder works directly as ``pip --find-links``)::

    sparksync-agent-0.1.0-linux-aarch64-py3.12/
        manifest.json
        pydantic_core-...-manylinux_2_17_aarch64.whl
        sparksync_agent-0.1.0-py3-none-any.whl
        ...

Why tar.gz rather than zip: every node has ``tar`` and Python's ``tarfile``,
a tar keeps one compressed stream (wheels are already zips, so it is about the
same size), and it can be hashed and checked in one sequential pass.
Entries are sorted and carry fixed owners and times, so the same wheels give
the same archive bytes.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sparksync.core.bundle.manifest import MANIFEST_NAME, BundleManifest, hash_stream


def root_name(archive_name: str) -> str:
    """The folder inside the archive: the file name without ``.tar.gz``."""
    return archive_name.removesuffix(".tar.gz")


def pack(archive: Path, manifest: BundleManifest, wheel_dir: Path) -> None:
    """Write ``archive`` holding ``manifest`` and the wheels it lists, taken from ``wheel_dir``."""
    root = root_name(archive.name)
    mtime = int(manifest.created_at.timestamp())
    with archive.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=mtime, filename="") as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            tar.addfile(_info(root, mtime, directory=True))
            data = manifest.model_dump_json(indent=2).encode()
            tar.addfile(_info(f"{root}/{MANIFEST_NAME}", mtime, size=len(data)), io.BytesIO(data))
            for entry in sorted(manifest.files, key=lambda f: f.name):
                with (wheel_dir / entry.name).open("rb") as fh:
                    tar.addfile(_info(f"{root}/{entry.name}", mtime, size=entry.size), fh)


def _info(name: str, mtime: int, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.mode = 0o755 if directory else 0o644
    info.size, info.mtime = size, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@dataclass
class Contents:
    """What one pass over an archive found: its folder, manifest text and every file's hash."""

    root: str | None = None
    manifest: bytes | None = None
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (sha256, size)
    problems: list[str] = field(default_factory=list)


def scan(archive: Path) -> Contents:
    """Read ``archive`` once, hashing each file and noting every entry a bundle must not hold.

    Raises ``tarfile.TarError``/``OSError``/``EOFError`` when it is not a readable tar.gz.
    """
    found = Contents()
    with tarfile.open(archive, mode="r:gz") as tar:
        for member in tar:
            name = _place(member, found)
            if name is None or not member.isfile():
                continue
            stream = tar.extractfile(member)
            assert stream is not None, "a regular file member always has one"
            if name == MANIFEST_NAME:
                with stream:
                    found.manifest = stream.read()
            else:
                found.files[name] = hash_stream(stream)
    return found


def _place(member: tarfile.TarInfo, found: Contents) -> str | None:
    """The file name of a safe member inside the bundle folder; None (and a problem) otherwise."""
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        found.problems.append(f"unsafe path {member.name!r} in the archive")
        return None
    if not (member.isfile() or member.isdir()):
        found.problems.append(f"{member.name!r} is a link or special file; a bundle holds plain files only")
        return None
    if found.root is None:
        found.root = path.parts[0]
    if path.parts[0] != found.root:
        found.problems.append(f"{member.name!r} lies outside the bundle folder {found.root!r}")
        return None
    if len(path.parts) == 1 and member.isdir():
        return None
    if len(path.parts) != 2 or member.isdir():
        found.problems.append(f"unexpected entry {member.name!r}; a bundle folder holds files only")
        return None
    if path.name in found.files or (path.name == MANIFEST_NAME and found.manifest is not None):
        found.problems.append(f"{path.name} appears more than once in the archive")
        return None
    return path.name


def unpack(archive: Path, dest: Path) -> Path:
    """Extract a bundle (verify it first) into ``dest``; return the bundle folder."""
    with tarfile.open(archive, mode="r:gz") as tar:
        first = tar.next()
        if first is None:
            raise tarfile.ReadError(f"{archive} holds nothing")
        root = first.name.split("/", 1)[0]
        if hasattr(tarfile, "data_filter"):
            # The "data" filter refuses links, devices and paths that leave dest.
            tar.extractall(dest, filter="data")
        else:  # Python < 3.10.12: no filters, but verify_bundle has refused such entries already
            tar.extractall(dest)
    return dest / root
