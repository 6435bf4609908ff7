"""The checksum manifest inside every bundle (``manifest.json``).

The manifest says what the bundle is (agent and protocol version, target,
when it was made) and lists every wheel with its SHA-256 and size, so a bundle
that was truncated, tampered with or mixed up can be caught before a node
installs from it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, field_validator, model_validator

from sparksync.core.bundle.platforms import PLATFORMS, PYTHONS, Target

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1  # bump when a reader of the old format would misread a new bundle
AGENT_DISTRIBUTION = "sparksync-agent"
# nvidia-ml-py is pure Python, so the GPU extra costs nothing to carry; huggingface_hub
# (the hf extra) lets `sparksync model fetch` download on the node itself.
AGENT_EXTRAS = ("gpu", "hf")
_CHUNK = 1 << 20


class BundleFile(BaseModel):
    """One wheel in the bundle."""

    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)

    @field_validator("name")
    @classmethod
    def _plain_wheel_name(cls, name: str) -> str:
        # A name with a directory part could point outside the bundle when unpacked.
        if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(".whl"):
            raise ValueError(f"{name!r} is not a plain .whl file name")
        return name


class BundleManifest(BaseModel):
    """What a bundle holds and what it is for."""

    format_version: int
    agent_version: str
    protocol_version: str
    platform: Literal[tuple(PLATFORMS)]  # type: ignore[valid-type]
    python: Literal[PYTHONS]  # type: ignore[valid-type]
    created_at: AwareDatetime
    agent_wheel: str
    extras: list[str] = Field(default_factory=lambda: list(AGENT_EXTRAS))
    glibc_min: str | None = None  # the newest glibc any wheel needs; None when all are pure Python
    files: list[BundleFile]
    # The wheels a node installs (the agent's, its extras' and their dependencies'), as the build
    # resolved them for the target, so the node needs no resolver. None in bundles made before
    # it was recorded: those install with pip (see install.py).
    installs: list[str] | None = None

    @field_validator("files")
    @classmethod
    def _unique_names(cls, files: list[BundleFile]) -> list[BundleFile]:
        names = [f.name for f in files]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"listed more than once: {', '.join(duplicates)}")
        return files

    @model_validator(mode="after")
    def _installs_are_listed(self) -> BundleManifest:
        if self.installs is not None:
            listed = {f.name for f in self.files}
            unlisted = sorted(set(self.installs) - listed)
            if unlisted:
                raise ValueError(f"installs wheels that are not among the files: {', '.join(unlisted)}")
            if self.agent_wheel not in self.installs:
                raise ValueError(f"installs does not include the agent wheel {self.agent_wheel}")
        return self

    @property
    def target(self) -> Target:
        return Target(self.platform, self.python)

    def requirement(self) -> str:
        """What a node asks pip for: ``sparksync-agent[gpu]==0.1.0``."""
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{AGENT_DISTRIBUTION}{extras}=={self.agent_version}"

    def by_name(self) -> dict[str, BundleFile]:
        return {f.name: f for f in self.files}


def file_entry(path: Path) -> BundleFile:
    """The manifest line for one file on disk."""
    digest, size = hash_stream(path.open("rb"))
    return BundleFile(name=path.name, sha256=digest, size=size)


def hash_stream(stream) -> tuple[str, int]:
    """SHA-256 and byte count of a binary stream, read in chunks (wheels can be large); closes it."""
    digest, size = hashlib.sha256(), 0
    with stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)
