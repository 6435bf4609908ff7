"""Every gateway the app knows, scraped: what the dashboard's Switchyard view shows.

Where the gateways come from, read again at every poll:

- **this computer:** ``sparksync switchyard serve`` announces itself while it
  listens (``announce``);
- **nodes:** a gateway started with ``sparksync switchyard launch --node`` is
  a workload (recipe ``switchyard-gateway``) in the workload record; it is
  reached like any workload endpoint, through a ``Reach`` (an SSH tunnel in
  the app), kept open while the workload stays recorded;
- **by URL:** the addresses the user added (``watched``).

``poll()`` blocks (files, tunnels, HTTP): call it from a worker. Each
gateway's scrapes of the last ``window_s`` seconds are kept, so the figures
"since the last scrape" cover a steady window however often it polls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads.reach import Reach
from sparksync.core.workloads.workload_store import Endpoint, WorkloadRecord, WorkloadStore
from sparksync.switchyard.announce import announced_gateways, api_key_of
from sparksync.switchyard.errors import SwitchyardError
from sparksync.switchyard.live_metrics import (
    GatewayLive,
    NotAGatewayError,
    Scrape,
    live_figures,
    parse_metrics,
)
from sparksync.switchyard.on_node import GATEWAY_RECIPE
from sparksync.switchyard.watched import load_watched

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 2.0
WINDOW_S = 10.0
HISTORY_S = 600.0  # tokens/s kept per pool for the plot: the last ten minutes


@dataclass(frozen=True)
class GatewayPlace:
    """A gateway found, before it is scraped."""

    key: str  # stable while the gateway runs: "local:<pid>:<url>", "workload:<id>:<group>", "url:<url>"
    label: str  # for people
    origin: str  # "local", "workload" or "url"
    url: str | None = None  # None for a workload until it is reached
    api_key: str | None = field(default=None, repr=False)
    endpoint: Endpoint | None = None


@dataclass(frozen=True)
class GatewayReading:
    key: str
    label: str
    origin: str
    url: str | None
    at: float  # wall-clock time of the reading
    live: GatewayLive | None = None
    problem: str | None = None  # why there are no figures, in words
    # pool -> (wall-clock times, tokens/s) over the last HISTORY_S, oldest first
    rates: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)


class KeyWantedError(SwitchyardError):
    """The gateway's /metrics answered 401: it wants an API key the watch did not send (or a right one)."""


def scrape(client: httpx.Client, url: str, api_key: str | None = None, at: float | None = None) -> Scrape:
    """Read ``url``/metrics once; SwitchyardError (NotAGatewayError) in words when that fails."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = client.get(f"{url}/metrics", headers=headers)
    except httpx.HTTPError as exc:
        raise SwitchyardError(
            f"the gateway at {url} does not answer ({type(exc).__name__}: {exc or 'no detail'}); "
            "is it still running?"
        ) from None
    if response.status_code == 401:
        raise KeyWantedError(
            f"the gateway at {url} wants an API key for /metrics; export the key in the environment "
            "variable its listen.api_key_env names before starting SparkSync"
        )
    if response.status_code != 200:
        raise NotAGatewayError(
            f"{url}/metrics answered HTTP {response.status_code}; is {url} a Switchyard gateway?"
        )
    try:
        return parse_metrics(response.text, time.monotonic() if at is None else at)
    except NotAGatewayError as exc:
        raise NotAGatewayError(f"{url}: {exc}") from None


class GatewayWatch:
    """Finds the gateways and scrapes each (``poll``); ``close`` ends the tunnels it opened."""

    def __init__(
        self,
        reach: Callable[[], Reach] | None = None,
        records: Callable[[], Sequence[WorkloadRecord]] | None = None,
        urls: Callable[[], Sequence[str]] = load_watched,
        *,
        announced: Callable[[], list] = announced_gateways,
        timeout_s: float = SCRAPE_TIMEOUT_S,
        window_s: float = WINDOW_S,
    ):
        self._make_reach = reach
        self._reach: Reach | None = None
        self._records = records if records is not None else WorkloadStore().list
        self._urls, self._announced = urls, announced
        self.window_s, self._timeout_s = window_s, timeout_s
        self._client: httpx.Client | None = None  # made in the first poll: it reads CA files
        self._held: dict[tuple[str, str, int], tuple[ExitStack, str]] = {}
        self._scrapes: dict[str, deque[Scrape]] = {}
        self._rates: dict[str, dict[str, deque[tuple[float, float]]]] = {}  # gateway -> pool -> (t, tok/s)
        self._lock = threading.Lock()  # poll() in a worker, close() from the owner

    def places(self) -> tuple[list[GatewayPlace], list[str]]:
        """The gateways known now, and the problems met looking for them (in words)."""
        found: list[GatewayPlace] = []
        problems: list[str] = []
        for part in (self._local, self._workloads, self._watched):
            try:
                found += part()
            except SparkSyncError as exc:
                problems.append(str(exc))
        unique: dict[str, GatewayPlace] = {}
        for place in found:  # a gateway announced here and also added by URL shows once
            unique.setdefault(place.url or place.key, place)
        return list(unique.values()), problems

    def poll(self) -> tuple[list[GatewayReading], list[str]]:
        """Every known gateway's figures now, and the problems met finding them."""
        with self._lock:
            places, problems = self.places()
            self._close_except({_held_key(p.endpoint) for p in places if p.endpoint is not None})
            readings = [self._read(place) for place in places]
            known = {p.key for p in places}
            for key in [k for k in self._scrapes if k not in known]:
                del self._scrapes[key]
            for key in [k for k in self._rates if k not in known]:
                del self._rates[key]
            return readings, problems

    def close(self) -> None:
        with self._lock:
            self._close_except(set())
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- finding -------------------------------------------------------------------------

    def _local(self) -> list[GatewayPlace]:
        return [
            GatewayPlace(
                f"local:{n.pid}:{n.url}", f"this computer (pid {n.pid})", "local", n.url, api_key_of(n)
            )
            for n in self._announced()
        ]

    def _workloads(self) -> list[GatewayPlace]:
        places = []
        for record in self._records():
            if GATEWAY_RECIPE not in record.recipes:
                continue
            for endpoint in record.endpoints:
                label = f"{record.workload_id} on {endpoint.node}"
                key = f"workload:{record.workload_id}:{endpoint.group}"
                places.append(GatewayPlace(key, label, "workload", endpoint=endpoint))
        return places

    def _watched(self) -> list[GatewayPlace]:
        return [GatewayPlace(f"url:{u}", "added by address", "url", u) for u in self._urls()]

    # --- reading ---------------------------------------------------------------------------

    def _read(self, place: GatewayPlace) -> GatewayReading:
        url = place.url
        try:
            if place.endpoint is not None:
                url = self._reached(place.endpoint)
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout_s, trust_env=False)
            assert url is not None, "a place has a URL or an endpoint"
            now = scrape(self._client, url, place.api_key)
        except SparkSyncError as exc:
            self._scrapes.pop(place.key, None)
            return GatewayReading(
                place.key, place.label, place.origin, url, time.time(), problem=_why(place, exc)
            )
        kept = self._scrapes.setdefault(place.key, deque())
        while kept and kept[0].at < now.at - self.window_s:
            kept.popleft()
        live = live_figures(now, kept[0] if kept else None)
        kept.append(now)
        at = time.time()
        rates = self._remember_rates(place.key, live, at)
        return GatewayReading(place.key, place.label, place.origin, url, at, live=live, rates=rates)

    def _remember_rates(
        self, key: str, live: GatewayLive, at: float
    ) -> dict[str, tuple[list[float], list[float]]]:
        pools = self._rates.setdefault(key, {})
        for name, pool in live.pools.items():
            kept = pools.setdefault(name, deque())
            kept.append((at, pool.tokens_per_s))
            while kept[0][0] < at - HISTORY_S:
                kept.popleft()
        return {name: ([t for t, _ in kept], [r for _, r in kept]) for name, kept in pools.items()}

    def _reached(self, endpoint: Endpoint) -> str:
        key = _held_key(endpoint)
        if key in self._held:
            return self._held[key][1]
        if self._make_reach is None:
            raise SwitchyardError(
                f"the gateway on {endpoint.node} runs as a workload, and this view has no way to "
                "reach the nodes; open it from the app with the node paired"
            )
        if self._reach is None:
            self._reach = self._make_reach()
        stack = ExitStack()
        try:
            url = stack.enter_context(self._reach(endpoint))
        except BaseException:
            stack.close()
            raise
        self._held[key] = (stack, url)
        return url

    def _close_except(self, keep: set[tuple[str, str, int]]) -> None:
        for key in [k for k in self._held if k not in keep]:
            stack, url = self._held.pop(key)
            log.info("the gateway workload at %s (%s) left the record; closing its way in", key, url)
            stack.close()


def _why(place: GatewayPlace, exc: SparkSyncError) -> str:
    if isinstance(exc, KeyWantedError) and place.origin == "workload":
        # Its config went to the node inline; the record does not say where its key comes from.
        return (
            f"the gateway {place.label} wants an API key for /metrics, and the app has none for a "
            "gateway launched on a node; launch it without listen.api_key_env/api_key_file to see "
            "its figures here"
        )
    return str(exc)


def _held_key(endpoint: Endpoint) -> tuple[str, str, int]:
    return (endpoint.node, endpoint.host, endpoint.port)
