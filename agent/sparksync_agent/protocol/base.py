"""Handshake, errors and the base of every wire model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Both versions (and the protocol's history) live in _version, so that `sparksync-agent
# version` and the supervisor answer without loading the wire models.
from sparksync_agent._version import PROTOCOL_VERSION
from sparksync_agent._version import __version__ as AGENT_VERSION  # noqa: F401 - part of the protocol's exports


def protocol_major(version: str) -> int:
    """The MAJOR part of a ``MAJOR.MINOR`` protocol version."""
    return int(version.split(".", 1)[0])


class WireModel(BaseModel):
    """Base of every wire model.

    Unknown fields are ignored so a newer MINOR peer can add fields; NaN and
    infinities are refused because JSON cannot carry them faithfully.
    """

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, frozen=False)


# --- handshake -------------------------------------------------------------


class Hello(WireModel):
    client_name: str = "sparksync"
    client_version: str = ""
    protocol_version: str = PROTOCOL_VERSION


class HelloReply(WireModel):
    agent_version: str
    protocol_version: str
    node_id: str
    run_id: str = Field(description="Changes on every agent start; sequence numbers restart with it.")
    sample_hz: float


class ErrorBody(WireModel):
    """The body of every 4xx/5xx answer: a stable code plus a sentence for people."""

    error: str
    message: str


