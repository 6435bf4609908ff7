"""The live list: browse mDNS for nodes and keep a merged table, with listeners.

``Discovery`` browses ``_sparksync._tcp`` (our agent), ``_ssh._tcp`` and
``_workstation._tcp`` (Avahi, on every DGX OS machine) on an explicit list of
IPv4 addresses. Every service heard becomes a sighting; the table is the
merge of all sightings (see merge.py). A node disappears when its last
service goes away: at once on a goodbye packet, and when it falls silent,
once its records' TTL runs out. zeroconf alone would notice silence only when
the PTR record expires (75 minutes by default, never under ~19), so every
``refresh_interval_s`` each service is resolved again: that reads the cache
while the SRV and address records (TTL 120 s) are fresh and asks the network
only once they have expired. No answer then means the host is gone.

Threads: zeroconf runs its own event loop thread; resolving happens there.
Listeners are plain callables ``listener(event, node)`` with event "added",
"updated" or "removed", called in order from that thread (or from the thread
that calls ``add``). They must return quickly and must not block: the GUI
forwards them to a Qt signal. Discovery sends nothing but mDNS.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from sparksync_agent.advertise import SERVICE_TYPE as AGENT_SERVICE_TYPE
from sparksync_agent.advertise import parse_txt
from zeroconf import DNSQuestionType, ServiceStateChange, Zeroconf
from zeroconf import Error as ZeroconfError
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo

from sparksync.core.discovery.errors import DiscoveryError
from sparksync.core.discovery.interfaces import check_interfaces, default_interfaces, open_zeroconf
from sparksync.core.discovery.manual import resolve_host
from sparksync.core.discovery.merge import Sighting, merge, sighting_from_agent_txt, sighting_from_node
from sparksync.core.discovery.model import DiscoveredNode, Source, is_ip
from sparksync.core.base.listeners import Listeners

log = logging.getLogger(__name__)

SERVICE_TYPES: dict[str, Source] = {
    AGENT_SERVICE_TYPE: "sparksync",
    "_ssh._tcp.local.": "ssh",
    "_workstation._tcp.local.": "workstation",
}
RESOLVE_TIMEOUT_S = 3.0
REFRESH_INTERVAL_S = 10.0
# Ask for multicast answers (QM) from the first query on. zeroconf's default
# first query asks for a unicast answer (QU), which the kernel hands to only
# one of the sockets bound to port 5353 on this machine: with Avahi (or any
# other mDNS stack) running here, that is often not ours, and the node then
# shows up only at the next query, a second later.
_QUESTION_TYPE = DNSQuestionType.QM
_LOOP_CALL_TIMEOUT_S = 10.0

Event = Literal["added", "updated", "removed"]
Listener = Callable[[Event, DiscoveredNode], None]
SightingId = tuple[str, str]  # (service type, service name), or ("added", "<node key> <source>")


def sighting_from_info(source: Source, info: AsyncServiceInfo, seen: float) -> Sighting:
    addresses = info.parsed_addresses()
    if source == "sparksync":
        return sighting_from_agent_txt(
            parse_txt(info.properties), info.server, addresses, info.port or 22, seen
        )
    server = (info.server or "").rstrip(".")
    names = (server,) if server and not is_ip(server) else ()
    # _workstation's port is 9 ("discard"), not SSH: only _ssh says where sshd listens.
    port = info.port if source == "ssh" else None
    return Sighting(source, names, tuple(addresses), seen, port)


class Discovery:
    """Browse mDNS on ``interfaces`` (default: this machine's non-loopback IPv4 addresses).

    Use as a context manager or call ``start()``/``stop()``. ``nodes()`` is the
    merged table; after ``stop()`` it keeps the last table and sends no events.
    """

    def __init__(
        self,
        interfaces: list[str] | None = None,
        *,
        resolve_timeout_s: float = RESOLVE_TIMEOUT_S,
        refresh_interval_s: float = REFRESH_INTERVAL_S,
    ):
        self.interfaces = check_interfaces(interfaces) if interfaces is not None else default_interfaces()
        self.resolve_timeout_s = resolve_timeout_s
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._sightings: dict[SightingId, Sighting] = {}
        self._table: dict[str, DiscoveredNode] = {}
        self._listeners: Listeners[Listener] = Listeners()
        self._zc: Zeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._resolving: dict[SightingId, asyncio.Task] = {}
        self._refresher: asyncio.Task | None = None

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._zc is not None

    def start(self) -> Discovery:
        with self._lock:
            if self._zc is not None:
                return self
            try:
                zc = self._zc = open_zeroconf(self.interfaces)
            except (OSError, ZeroconfError) as exc:
                raise DiscoveryError(
                    f"cannot browse mDNS on {', '.join(self.interfaces)}: {exc}. Check that these interfaces "
                    "are up and allow multicast, or add nodes by name or address instead."
                ) from exc
        try:
            assert zc.loop is not None, "open_zeroconf starts it with its loop running"
            asyncio.run_coroutine_threadsafe(self._async_start(zc), zc.loop).result(_LOOP_CALL_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        log.info("browsing mDNS on %s", ", ".join(self.interfaces))
        return self

    def stop(self) -> None:
        """Stop browsing and close zeroconf's sockets and thread. Safe to call twice."""
        with self._lock:
            zc, self._zc = self._zc, None
        if zc is None:
            return
        try:
            if zc.loop is not None and zc.loop.is_running():
                asyncio.run_coroutine_threadsafe(self._async_stop(), zc.loop).result(_LOOP_CALL_TIMEOUT_S)
        finally:
            zc.close()
        log.info("stopped browsing mDNS")

    def __enter__(self) -> Discovery:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _async_start(self, zc: Zeroconf) -> None:
        handlers = [self._on_service_state_change]
        self._browser = AsyncServiceBrowser(
            zc, list(SERVICE_TYPES), handlers=handlers, question_type=_QUESTION_TYPE
        )
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever(zc))

    async def _async_stop(self) -> None:
        if self._browser is not None:
            await self._browser.async_cancel()
            self._browser = None
        tasks = list(self._resolving.values()) + ([self._refresher] if self._refresher else [])
        self._refresher = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._resolving.clear()

    # --- the table ---------------------------------------------------------------------

    def nodes(self) -> list[DiscoveredNode]:
        with self._lock:
            return list(self._table.values())

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, node)`` on every change; returns a function that unsubscribes."""
        return self._listeners.add(listener)

    def add(self, node: DiscoveredNode, source: Source = "manual") -> None:
        """Put a node found another way (typed by the user, or a scan hit) into the table.

        It merges with what mDNS says about the same machine and stays until
        ``forget`` removes it: no TTL applies to it.
        """
        self._put(("added", f"{node.key} {source}"), sighting_from_node(node, source))

    def add_host(self, host: str, port: int = 22) -> DiscoveredNode:
        """Resolve a typed name or address (see manual.resolve_host), add it, and return the merged entry."""
        node = resolve_host(host, port, interfaces=self.interfaces, zeroconf=self._zc)
        self.add(node)
        with self._lock:
            merged = (
                n
                for n in self._table.values()
                if "manual" in n.sources and set(node.addresses) <= set(n.addresses)
            )
            return next(merged, node)

    def forget(self, key: str) -> None:
        """Drop what ``add`` put in under ``key`` (mDNS entries come and go on their own)."""
        with self._lock:
            added = [i for i in self._sightings if i[0] == "added" and i[1].split(" ", 1)[0] == key]
            for sighting_id in added:
                self._put(sighting_id, None)

    def wait_until(self, predicate: Callable[[list[DiscoveredNode]], bool], timeout: float) -> bool:
        """Block until ``predicate(nodes)`` holds (True) or ``timeout`` seconds pass (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(list(self._table.values())), timeout)

    def _put(self, sighting_id: SightingId, sighting: Sighting | None) -> None:
        with self._lock:
            if sighting is None:
                if self._sightings.pop(sighting_id, None) is None:
                    return
            else:
                self._sightings[sighting_id] = sighting
            old, self._table = self._table, {node.key: node for node in merge(self._sightings.values())}
            self._changed.notify_all()
            # Still under the lock, so every listener sees events in the order they happened.
            for event, node in _diff(old, self._table):
                self._notify(event, node)

    def _notify(self, event: Event, node: DiscoveredNode) -> None:
        for listener in self._listeners.snapshot():
            try:
                listener(event, node)
            except Exception:  # one broken listener must not stop discovery or the others
                log.exception("discovery listener %r failed on %s %s", listener, event, node.key)

    # --- mDNS events (in zeroconf's event loop) ------------------------------------------

    def _on_service_state_change(
        self, zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
    ) -> None:
        sighting_id = (service_type, name)
        pending = self._resolving.pop(sighting_id, None)
        if pending is not None:
            pending.cancel()
        if self._zc is None:  # stopping: the table stays as it was
            return
        if state_change is ServiceStateChange.Removed:
            log.debug("mDNS: %s went away", name)
            self._put(sighting_id, None)
            return
        task = asyncio.get_running_loop().create_task(self._resolve(zeroconf, service_type, name))
        self._resolving[sighting_id] = task

    async def _resolve(self, zeroconf: Zeroconf, service_type: str, name: str, refresh: bool = False) -> None:
        sighting_id = (service_type, name)
        info = AsyncServiceInfo(service_type, name)
        try:
            found = await info.async_request(zeroconf, self.resolve_timeout_s * 1000, _QUESTION_TYPE)
            if self._zc is None:
                return
            if found:
                self._put(sighting_id, sighting_from_info(SERVICE_TYPES[service_type], info, time.time()))
            elif refresh:
                log.info("mDNS: %s no longer answers; dropping it", name)
                self._put(sighting_id, None)
            else:
                log.debug("mDNS: %s did not resolve within %.1f s", name, self.resolve_timeout_s)
        except Exception:  # a malformed record from the network must not end browsing
            log.exception("mDNS: could not use what %s advertised", name)
        finally:
            if self._resolving.get(sighting_id) is asyncio.current_task():
                del self._resolving[sighting_id]

    async def _refresh_forever(self, zeroconf: Zeroconf) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.refresh_interval_s)
            with self._lock:
                known = [sighting_id for sighting_id in self._sightings if sighting_id[0] in SERVICE_TYPES]
            for sighting_id in known:
                if sighting_id not in self._resolving:
                    task = loop.create_task(self._resolve(zeroconf, *sighting_id, refresh=True))
                    self._resolving[sighting_id] = task


def _diff(
    old: dict[str, DiscoveredNode], new: dict[str, DiscoveredNode]
) -> list[tuple[Event, DiscoveredNode]]:
    events: list[tuple[Event, DiscoveredNode]] = [("removed", old[key]) for key in old if key not in new]
    for key, node in new.items():
        if key not in old:
            events.append(("added", node))
        elif _changed(old[key], node):
            events.append(("updated", node))
    return events


def _changed(old: DiscoveredNode, new: DiscoveredNode) -> bool:
    # A refresh that only moves last_seen is not news: listeners would churn every interval.
    return old.model_copy(update={"last_seen": new.last_seen}) != new
