"""Handshake, errors and the base of every wire model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sparksync_agent._version import __version__ as AGENT_VERSION  # noqa: F401 - part of the protocol's exports

# 1.1: workloads, logs, engines; Sample.workloads; Snapshot.engines
# 1.2: the fabric: GET /v1/fabric (ports, cabling probe), POST /v1/fabric/apply and /rollback
# 1.3: models: /v1/models (list, roots, delete), receive/verify/finalize, reach, jobs (fetch, push)
# 1.4: TokensSource.slots_path, .decode_gauge, .busy_gauge (decode tokens/s while llama.cpp and SGLang
#      generate; their counters grow only when a request ends)
# 1.5: a resume point (since) the agent never produced is a 409 unknown_since (was 400;
#      clients accept both); every answer is declared in /openapi.json; a 405 names Allow.
#      The model requests carry their rules in the schema (names, users, hosts, revisions,
#      endpoints, absolute roots; integers and booleans are not coerced from each other), so
#      what breaks one is a 422 invalid_request, not a 400; a copy that will not fit is a
#      409 no_space (was 507); DELETE /v1/models/{name} never takes a name another models
#      route serves (jobs/..., roots, receive, verify, finalize, reach).
# 1.6: PushRequest.from_staging: a node passes on the files of a copy it is still receiving.
PROTOCOL_VERSION = "1.6"


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


