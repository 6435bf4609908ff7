"""A synchronous client for one agent's HTTP API.

It is Qt-free and blocking on purpose: the CLI calls it directly and the GUI
runs it in a worker thread. The token travels only in the Authorization
header; it is never logged and never part of an error message.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias, TypeVar, Union

import httpx
from httpx_sse import SSEError, connect_sse
from pydantic import BaseModel

from sparksync import __version__
from sparksync.core.agents.answers import check_answer, parse_answer, unreachable
from sparksync.core.base.errors import ProtocolMismatchError
from sparksync.core.agents.stream import TelemetryStream
from sparksync.core.base.backoff import Backoff
from sparksync_agent.protocol import (
    PROTOCOL_VERSION,
    AgentStatus,
    EngineReport,
    FabricApply,
    FabricReport,
    FabricResult,
    FabricRollback,
    FetchRequest,
    FinalizeRequest,
    Hello,
    HelloReply,
    LogLine,
    LogPage,
    NodeFabricPlan,
    ModelEntry,
    ModelJob,
    ModelList,
    PushRequest,
    RankLaunch,
    RankStart,
    RankStatus,
    ReachReply,
    ReachRequest,
    ReceiveReply,
    ReceiveRequest,
    RootsConfig,
    Snapshot,
    TelemetryPage,
    VerifyReply,
    VerifyRequest,
    WorkloadList,
    WorkloadStatus,
    protocol_major,
)

M = TypeVar("M", bound=BaseModel)

DEFAULT_TIMEOUT = 5.0
HASHING_TIMEOUT_S = 3600.0  # a listing or a verify hashes the files it has not seen: minutes for 100s of GB
# The agent pings idle streams; this much silence means a dead link, which
# the stream then treats as a dropped connection and reconnects.
DEFAULT_STREAM_READ_TIMEOUT = 30.0
LOG_STREAM_RETRIES = 5


@dataclass(frozen=True)
class LogGap:
    """The agent no longer held ``lost`` lines after ``since`` (a slow or late reader)."""

    lost: int
    since: int


# A log stream yields lines, gaps, and finally the process's status once it has ended.
LogItem: TypeAlias = Union[LogLine, LogGap, RankStatus]


class AgentClient:
    """Talks to the agent at ``base_url`` (e.g. ``http://127.0.0.1:PORT``)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        stream_read_timeout: float = DEFAULT_STREAM_READ_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        label: str | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        # Who the user knows this agent as ("spark-2", "this computer"): errors name it, not the tunnel's
        # loopback port, which means nothing to them.
        self.label = label
        self.timeout = timeout
        self.stream_read_timeout = stream_read_timeout
        self._streams: set[TelemetryStream] = set()
        self._lock = threading.Lock()
        # trust_env=False: a proxy from the environment must never see our
        # loopback or tunnel traffic, and with it the bearer token.
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
            trust_env=False,
        )

    def __repr__(self) -> str:  # never show the token
        return f"AgentClient({self.base_url!r})"

    @property
    def where(self) -> str:
        """How errors name the agent: "on spark-2", or "at http://127.0.0.1:PORT" without a label."""
        return f"on {self.label}" if self.label else f"at {self.base_url}"

    # --- requests ----------------------------------------------------------

    def hello(self) -> HelloReply:
        """Exchange versions; raises ProtocolMismatchError when the MAJORs differ."""
        body = Hello(client_version=__version__).model_dump(mode="json")
        reply = self._call("POST", "/v1/hello", HelloReply, "saying hello", json=body)
        if not _same_major(reply.protocol_version):
            raise ProtocolMismatchError(
                f"the agent {self.where} speaks protocol {reply.protocol_version} "
                f"(agent {reply.agent_version}), this client speaks {PROTOCOL_VERSION}. "
                "Update SparkSync or the agent so both speak the same MAJOR version."
            )
        return reply

    def snapshot(self) -> Snapshot:
        return self._call("GET", "/v1/snapshot", Snapshot, "reading the snapshot")

    def status(self) -> AgentStatus:
        return self._call("GET", "/v1/status", AgentStatus, "reading the agent status")

    def telemetry(self, since: int, limit: int | None = None) -> TelemetryPage:
        """Samples with ``seq > since``, oldest first (at most ``limit``)."""
        params = {"since": since} if limit is None else {"since": since, "limit": limit}
        return self._call("GET", "/v1/telemetry", TelemetryPage, "reading telemetry", params=params)

    def metrics(self) -> str:
        """The agent's Prometheus text exposition."""
        return self._send("GET", "/metrics", "reading metrics").text

    def stream(
        self, since: int = 0, *, run_id: str | None = None, backoff: Backoff | None = None
    ) -> TelemetryStream:
        """Live samples with ``seq > since``; see :class:`TelemetryStream`.

        Pass the ``run_id`` that ``since`` belongs to so that a restarted agent
        is noticed (the stream then starts over from 0). The stream reconnects
        by itself; ``close()`` (of the stream or of this client) stops it from
        any thread.
        """
        stream = TelemetryStream(self, since, backoff, run_id=run_id, on_close=self._forget)
        with self._lock:
            self._streams.add(stream)
        return stream

    # --- workloads -----------------------------------------------------------

    def start_rank(self, workload_id: str, launch: RankLaunch) -> RankStatus:
        """Start one rank on this agent's node; returns once its process runs (state 'starting')."""
        body = RankStart(workload_id=workload_id, launch=launch).model_dump(mode="json")
        what = f"starting {launch.process_name} of workload {workload_id}"
        return self._call("POST", "/v1/workloads", RankStatus, what, json=body)

    def workloads(self) -> WorkloadList:
        return self._call("GET", "/v1/workloads", WorkloadList, "listing workloads")

    def workload(self, workload_id: str) -> WorkloadStatus:
        return self._call(
            "GET", f"/v1/workloads/{workload_id}", WorkloadStatus, f"reading workload {workload_id}"
        )

    def stop_workload(self, workload_id: str, grace_s: float = 10.0) -> WorkloadStatus:
        """SIGTERM every process of the workload on this node, SIGKILL after ``grace_s``; waits for the end."""
        # The answer comes once every process has ended: allow the grace plus a margin.
        timeout = httpx.Timeout(self.timeout, read=grace_s + self.timeout + 10.0)
        return self._call(
            "POST", f"/v1/workloads/{workload_id}/stop", WorkloadStatus, f"stopping workload {workload_id}",
            params={"grace_s": grace_s}, timeout=timeout,
        )  # fmt: skip

    def forget_workload(self, workload_id: str) -> None:
        """Drop a finished workload from the agent's list."""
        self._send("DELETE", f"/v1/workloads/{workload_id}", f"forgetting workload {workload_id}")

    def logs(
        self, workload_id: str, name: str | None = None, since: int = 0, limit: int | None = None
    ) -> LogPage:
        """Log lines with ``seq > since``, oldest first; ``name`` picks the process when there are several."""
        params = {k: v for k, v in {"name": name, "since": since, "limit": limit}.items() if v is not None}
        return self._call(
            "GET",
            f"/v1/workloads/{workload_id}/logs",
            LogPage,
            f"reading logs of {workload_id}",
            params=params,
        )

    def log_stream(
        self, workload_id: str, name: str | None = None, since: int | None = None
    ) -> Iterator[LogItem]:
        """Live log lines (``seq > since``; default: only new ones), resuming after a dropped connection.

        Ends after yielding the process's final :class:`RankStatus` once it has ended.
        """
        last, failures = since, 0
        while True:
            try:
                for item in self._log_events(workload_id, name, last):
                    failures = 0
                    if isinstance(item, LogLine):
                        last = item.seq
                    yield item
                    if isinstance(item, RankStatus):
                        return
                return  # the agent ended the stream (it is shutting down)
            except (httpx.TransportError, SSEError) as exc:
                failures += 1
                if failures > LOG_STREAM_RETRIES:
                    raise unreachable(self.where, f"streaming logs of {workload_id}", exc) from exc
                time.sleep(min(5.0, 0.25 * 2**failures))

    def _log_events(self, workload_id: str, name: str | None, since: int | None) -> Iterator[LogItem]:
        params = {k: v for k, v in {"name": name, "since": since}.items() if v is not None}
        path = f"/v1/workloads/{workload_id}/logs/stream"
        with connect_sse(self._http, "GET", path, params=params, timeout=self.stream_timeout()) as source:
            check_answer(source.response, self.where, f"streaming logs of {workload_id}")
            for event in source.iter_sse():
                if event.event == "line":
                    yield LogLine.model_validate_json(event.data)
                elif event.event == "lost":
                    yield LogGap(**json.loads(event.data))
                elif event.event == "end":
                    yield RankStatus.model_validate_json(event.data)

    # --- engines -----------------------------------------------------------

    def engines(self, refresh: bool = False) -> EngineReport:
        """Which engines the node can run, and what the others lack (``refresh``: check again now)."""
        timeout = httpx.Timeout(self.timeout, read=self.timeout + 60.0)  # detection runs subprocesses
        return self._call(
            "GET",
            "/v1/engines",
            EngineReport,
            "detecting engines",
            params={"refresh": refresh},
            timeout=timeout,
        )

    # --- fabric ------------------------------------------------------------

    def fabric(self, probe: bool = True) -> FabricReport:
        """The node's CX-7 ports and, with ``probe``, the MACs that answer on each (about a second)."""
        timeout = httpx.Timeout(self.timeout, read=self.timeout + 15.0)
        return self._call("GET", "/v1/fabric", FabricReport, "reading the fabric", params={"probe": probe},
                          timeout=timeout)

    def fabric_apply(self, plan: NodeFabricPlan, sudo_password: str) -> FabricResult:
        """The node's part of a plan, applied by its root helper through sudo (the password is used once)."""
        body = FabricApply(plan=plan, sudo_password=sudo_password).model_dump(mode="json")
        return self._call("POST", "/v1/fabric/apply", FabricResult, f"applying fabric plan {plan.plan_id}",
                          json=body, timeout=self._helper_timeout())

    def fabric_rollback(self, sudo_password: str, last: bool = False) -> FabricResult:
        """Back to the fabric before SparkSync (``last``: undo only the last apply)."""
        body = FabricRollback(sudo_password=sudo_password, last=last).model_dump(mode="json")
        return self._call("POST", "/v1/fabric/rollback", FabricResult, "rolling the fabric back", json=body,
                          timeout=self._helper_timeout())

    def _helper_timeout(self) -> httpx.Timeout:
        # sudo, netplan generate and netplan apply: the helper may take a minute or two.
        return httpx.Timeout(self.timeout, read=self.timeout + 200.0)
    # --- models ------------------------------------------------------------
    def models(self, manifests: bool = True) -> ModelList:
        """The models on the node, its model roots and their free space (sha256 per file, cached)."""
        timeout = httpx.Timeout(self.timeout, read=HASHING_TIMEOUT_S)
        return self._call(
            "GET", "/v1/models", ModelList, "listing models", params={"manifests": manifests}, timeout=timeout
        )
    def model_roots(self) -> RootsConfig:
        return self._call("GET", "/v1/models/roots", RootsConfig, "reading the model roots")
    def set_model_roots(self, roots: RootsConfig) -> RootsConfig:
        body = roots.model_dump(mode="json")
        return self._call("PUT", "/v1/models/roots", RootsConfig, "setting the model roots", json=body)
    def receive_model(self, request: ReceiveRequest) -> ReceiveReply:
        body = request.model_dump(mode="json")
        return self._call("POST", "/v1/models/receive", ReceiveReply, f"preparing to receive {request.name}", json=body)
    def verify_model(self, request: VerifyRequest) -> VerifyReply:
        timeout = httpx.Timeout(self.timeout, read=HASHING_TIMEOUT_S)
        body = request.model_dump(mode="json")
        return self._call(
            "POST", "/v1/models/verify", VerifyReply, f"verifying {request.name}", json=body, timeout=timeout
        )
    def finalize_model(self, request: FinalizeRequest) -> ModelEntry:
        body = request.model_dump(mode="json")
        return self._call("POST", "/v1/models/finalize", ModelEntry, f"finalizing {request.name}", json=body)
    def delete_model(self, name: str, partial: bool = False) -> None:
        self._send("DELETE", f"/v1/models/{name}", f"deleting {name}", params={"partial": partial})
    def model_reach(self, request: ReachRequest) -> ReachReply:
        timeout = httpx.Timeout(self.timeout, read=self.timeout + 20.0)  # an ssh attempt on the node
        body = request.model_dump(mode="json")
        return self._call("POST", "/v1/models/reach", ReachReply, f"trying ssh to {request.host}", json=body,
                          timeout=timeout)  # fmt: skip
    def fetch_model(self, request: FetchRequest) -> ModelJob:
        """Start a download on the node; the token travels in this request's body only."""
        body = request.model_dump(mode="json")
        return self._call("POST", "/v1/models/jobs/fetch", ModelJob, f"fetching {request.repo}", json=body)
    def push_model(self, request: PushRequest) -> ModelJob:
        body = request.model_dump(mode="json")
        return self._call(
            "POST", "/v1/models/jobs/push", ModelJob, f"copying {request.name} to {request.host}", json=body
        )
    def model_job(self, job_id: str, wait_s: float = 0.0) -> ModelJob:
        """The job now, or, with ``wait_s``, once it ends or ``wait_s`` has passed (whichever is first)."""
        if not wait_s:
            return self._call("GET", f"/v1/models/jobs/{job_id}", ModelJob, f"reading model job {job_id}")
        timeout = httpx.Timeout(self.timeout, read=wait_s + self.timeout)
        return self._call("GET", f"/v1/models/jobs/{job_id}", ModelJob, f"reading model job {job_id}",
                          params={"wait_s": wait_s}, timeout=timeout)  # fmt: skip
    def cancel_model_job(self, job_id: str) -> ModelJob:
        return self._call("POST", f"/v1/models/jobs/{job_id}/cancel", ModelJob, f"cancelling model job {job_id}")

    # --- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Stop every open stream, then release the connections."""
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.close()
        self._http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --- plumbing shared with TelemetryStream --------------------------------

    @property
    def http(self) -> httpx.Client:
        return self._http

    def stream_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.timeout, read=self.stream_read_timeout)

    def _call(self, method: str, path: str, model: type[M], what: str, **kwargs) -> M:
        return parse_answer(self._send(method, path, what, **kwargs), model, self.where, what)

    def _send(self, method: str, path: str, what: str, **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(self.where, what, exc) from exc
        return check_answer(response, self.where, what)

    def _forget(self, stream: TelemetryStream) -> None:
        with self._lock:
            self._streams.discard(stream)


def _same_major(version: str) -> bool:
    try:
        return protocol_major(version) == protocol_major(PROTOCOL_VERSION)
    except ValueError:
        return False
