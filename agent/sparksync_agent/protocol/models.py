"""Models on a node's disk: what the agent lists, and the operations that fetch, copy and verify them.

A model is a GGUF file (or a directory of GGUF shards) or a safetensors
directory with its ``config.json``. It lives under one of the node's model
roots: the Hugging Face cache (``$HF_HOME/hub``) or SparkSync's own models
folder (the *store*, where copies land). A copy first lands in the store's
staging folder and is listed ``partial`` until it has been verified against
the source's manifest and moved into place; nothing half-copied is ever
listed ``present``.

Long operations (a fetch from a hub, a push to another node over rsync) run
as jobs on the agent: the client starts one and follows its progress.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from sparksync_agent.protocol.base import WireModel

# A store name: "tiny", "org/name" (a Hugging Face repo id), never a path that climbs out.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$"
_NAME_RE = re.compile(MODEL_NAME_PATTERN)

USER_PATTERN = r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$"
REVISION_PATTERN = r"^[A-Za-z0-9._/-]{1,128}$"
ENDPOINT_PATTERN = r"^https?://[^\s]+$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"
# A path inside a model's folder: '/'-separated segments, none empty, "." or "..", no NUL; so a
# file name that /openapi.json allows can never climb out of the folder.
_SEGMENT = r"(?:[^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+)"
RELATIVE_PATH_PATTERN = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
# A host name or an address (IPv6 with its %zone too); never one that ssh would read as an option.
HOST_PATTERN = r"^[A-Za-z0-9_:\[][A-Za-z0-9._:%\[\]-]{0,254}$"
# What a model root may be: absolute, or under the agent user's home.
ROOT_PATTERN = r"^(/|~/|~$)"

# Requests carry these rules in their schema, so what /openapi.json says is what the agent
# accepts: anything else is the API's 422 invalid_request, whose message names the field
# and the rule, never the value (a field may hold a secret). The agent checks them again
# where it uses them (sparksync_agent.models.checks), for callers that skip validation.
ModelName = Annotated[str, Field(pattern=MODEL_NAME_PATTERN)]
# A name DELETE /v1/models/{name} can take: not one of the routes beside it (roots, jobs/...).
DELETABLE_NAME_REGEX = (
    r"(?!jobs/|(?:jobs|roots|receive|verify|finalize|reach)$)"
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?"
)
UserName = Annotated[str, Field(pattern=USER_PATTERN)]
HostName = Annotated[str, Field(pattern=HOST_PATTERN)]
RootPath = Annotated[str, Field(pattern=ROOT_PATTERN)]
RelativePath = Annotated[str, Field(pattern=RELATIVE_PATH_PATTERN)]


def _not_a_bool(value: object) -> object:
    # JSON Schema's integer takes 3.0 but never false: pydantic's lax int takes both, strict neither.
    if isinstance(value, bool):
        raise ValueError("a boolean is not an integer")
    return value


WireInt = Annotated[int, BeforeValidator(_not_a_bool)]


def valid_model_name(name: str) -> bool:
    return bool(_NAME_RE.match(name)) and ".." not in name.split("/")


class ModelFormat(str, Enum):
    gguf = "gguf"
    safetensors = "safetensors"


class ModelState(str, Enum):
    present = "present"  # complete, in place, its manifest known
    partial = "partial"  # a copy or fetch not finished (or not yet verified): never used by a workload


class RootKind(str, Enum):
    store = "store"  # SparkSync's models folder: copies land here
    hf_cache = "hf-cache"  # the Hugging Face hub cache (models--org--name/snapshots/...)
    extra = "extra"  # any other folder the user named


class ModelFile(WireModel):
    path: RelativePath = Field(description="Relative to the model's directory, '/'-separated.")
    size: WireInt = Field(ge=0)
    sha256: str | None = Field(None, description="Hex; None while it is not known (a partial copy).")


class ModelEntry(WireModel):
    name: str
    format: ModelFormat
    state: ModelState
    root: str = Field(description="The model root it lies under.")
    root_kind: RootKind
    directory: str = Field(description="The folder its files are relative to.")
    path: str = Field(description="What an engine is given: the GGUF file, or the safetensors folder.")
    size_bytes: int = Field(ge=0)
    quantization: str | None = Field(None, description="Where the files say it: GGUF file type, config.")
    files: list[ModelFile] = Field([])


class ModelRoot(WireModel):
    path: str
    kind: RootKind
    exists: bool
    free_bytes: int | None = None
    total_bytes: int | None = None
    writable: bool = False


class ModelList(WireModel):
    """Every model on the node, its roots and their free space."""

    roots: list[ModelRoot]
    models: list[ModelEntry]
    hashed_files: int = Field(0, description="Files hashed for this answer (the rest came from the cache).")


class RootsConfig(WireModel):
    """The node's model roots; empty fields mean the defaults (HF cache and SparkSync's folder)."""

    store: RootPath | None = Field(None, description="SparkSync's models folder; copies land here.")
    hf_cache: RootPath | None = Field(None, description="Default: $HF_HUB_CACHE, else $HF_HOME/hub.")
    extra: list[RootPath] = Field([])


# --- receiving a copy --------------------------------------------------------------------------


class ReceiveRequest(WireModel):
    """Get ready to receive ``name`` (``size_bytes`` in all): the agent answers where to write it."""

    name: ModelName
    size_bytes: WireInt = Field(ge=0)
    repair: bool = Field(False, strict=True, description="Move a present copy back to staging to repair it in place.")


class ReceiveReply(WireModel):
    name: str
    staging: str = Field(description="The folder to rsync into; listed as partial until finalized.")
    store: str
    free_bytes: int
    partial_bytes: int = Field(0, description="Bytes already there from an earlier, unfinished copy.")


class VerifyRequest(WireModel):
    name: ModelName
    files: list[ModelFile] = Field(description="The source's manifest: path, size and sha256 of each file.")
    staging: bool = Field(True, strict=True, description="Check the staged copy (else the present one).")
    cached: list[str] = Field(
        [], description="Files an earlier check of this copy hashed fresh: that hash counts while the file's "
        "size, mtime and inode are unchanged (a file rsync replaced is hashed again)."
    )


class VerifyReply(WireModel):
    name: str
    ok: bool
    mismatched: list[str] = Field([], description="Files whose size or sha256 differ.")
    missing: list[str] = Field([])
    extra: list[str] = Field([], description="Files that the source does not have.")
    hashed_bytes: int = 0


class FinalizeRequest(WireModel):
    name: ModelName
    format: ModelFormat
    files: list[ModelFile] = Field(description="The verified manifest, cached so the next listing is free.")


# --- jobs: fetch and push ----------------------------------------------------------------------


class JobKind(str, Enum):
    fetch = "fetch"
    push = "push"


class JobState(str, Enum):
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def finished(self) -> bool:
        return self is not JobState.running


class FetchRequest(WireModel):
    """Download a Hugging Face repo into this node's HF cache with huggingface_hub.

    ``token`` reaches the downloading process through its environment only
    (``HF_TOKEN``): it is never written to a file, a log or a command line,
    and never sent back.
    """

    repo: ModelName
    revision: str = Field("main", pattern=REVISION_PATTERN)
    # Not a SecretStr: the agent needs the value from the body; repr() never shows it, and
    # the field has no constraint, so no validation error can quote it.
    token: str | None = Field(None, repr=False)
    endpoint: str | None = Field(None, pattern=ENDPOINT_PATTERN, description="HF_ENDPOINT: a mirror or a local hub.")
    allow_patterns: list[str] = Field([])


class PushRequest(WireModel):
    """Copy a model from this node to another over rsync and ssh (the node-to-node mesh).

    With ``from_staging`` the files come from the copy this node is still
    receiving (the agent finds that folder by the model's name): a fan-out
    passes each verified file on while the next ones still arrive.

    ssh runs with BatchMode and StrictHostKeyChecking: this node's own key and
    its known_hosts (written from the client's pinned keys) are what let it in.
    """

    name: ModelName
    host: HostName
    port: WireInt = Field(22, ge=1, le=65535)
    user: UserName
    staging: str = Field(description="The target's staging folder (from its ReceiveReply).")
    files: list[RelativePath] = Field([], description="Only these files (default: all).")
    checksum: bool = Field(False, strict=True, description="Compare contents, not size and mtime (a repair).")
    from_staging: bool = Field(
        False, strict=True, description="Send from this node's own staging folder for the model (a copy it is "
        "still receiving, whose named files have been verified), not from its present copy; needs files."
    )
    identity_file: str | None = None
    known_hosts: str | None = None

    # The rule "from_staging needs files" in the schema too, so a request that /openapi.json
    # allows is one the agent accepts (a fuzzer holds the agent to that).
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"from_staging": {"const": False}}},
        {"properties": {"from_staging": {"const": True}, "files": {"minItems": 1}}, "required": ["from_staging", "files"]},
    ]})  # fmt: skip

    @model_validator(mode="after")
    def _staging_names_files(self) -> PushRequest:
        if self.from_staging and not self.files:
            raise ValueError("a push from the staging folder names its files")
        return self


class ReachRequest(WireModel):
    host: HostName
    port: WireInt = Field(22, ge=1, le=65535)
    user: UserName
    identity_file: str | None = None
    known_hosts: str | None = None


class ReachReply(WireModel):
    ok: bool
    detail: str = ""


class ModelJob(WireModel):
    id: str
    kind: JobKind
    name: str
    state: JobState
    bytes_done: int = 0
    bytes_total: int = 0
    literal_bytes: int | None = Field(None, description="push: bytes rsync actually sent (a resume sends less).")
    started_at: float
    finished_at: float | None = None
    message: str | None = Field(None, description="Why it failed, for people.")
    model: ModelEntry | None = Field(None, description="fetch: the model as it now lies in the HF cache.")


class JobList(WireModel):
    jobs: list[ModelJob]


DeleteScope = Literal["store", "hf-cache", "any"]
