"""Test helper: publish mDNS services on loopback from a zeroconf of its own.

The publisher is a separate Zeroconf instance (its own sockets and event-loop
thread) bound to one address, so a ``Discovery`` under test hears it exactly
as it would hear another machine. ``close()`` sends goodbyes and joins the
thread; use it through a fixture.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid

from zeroconf import IPVersion, ServiceInfo, Zeroconf

from sparksync_agent import protocol
from sparksync_agent.advertise import Advertiser

SSH_TYPE = "_ssh._tcp.local."
WORKSTATION_TYPE = "_workstation._tcp.local."
MEM = 128 * 10**9
_CALL_TIMEOUT_S = 15


def unique_host(prefix: str) -> str:
    """A host name no other test (or other test run on this machine) uses."""
    return f"{prefix}-{secrets.token_hex(3)}"


def doc_address() -> str:
    """A random TEST-NET-2 address (RFC 5737): only ever data in a record, never connected to."""
    return f"198.51.100.{secrets.randbelow(254) + 1}"


def fingerprint() -> str:
    return "SHA256:" + secrets.token_urlsafe(32)[:43]


def ssh_service(host: str, addresses: list[str], port: int = 22) -> ServiceInfo:
    """What Avahi publishes for sshd: instance named after the host, SRV to ``host.local.``."""
    return ServiceInfo(
        SSH_TYPE, f"{host}.{SSH_TYPE}", port=port, server=f"{host}.local.", parsed_addresses=addresses
    )


def workstation_service(host: str, addresses: list[str]) -> ServiceInfo:
    name = f"{host} [00:11:22:{secrets.token_hex(1)}:{secrets.token_hex(1)}:{secrets.token_hex(1)}]"
    return ServiceInfo(
        WORKSTATION_TYPE,
        f"{name}.{WORKSTATION_TYPE}",
        port=9,
        server=f"{host}.local.",
        parsed_addresses=addresses,
    )


def agent_info(hostname: str, fingerprints: dict[str, str]) -> protocol.NodeInfo:
    return protocol.NodeInfo(
        node_id=uuid.uuid4().hex,
        hostname=hostname,
        arch="aarch64",
        os="Linux",
        kernel="6.11.0-nvidia",
        cpu_count=20,
        boot_time=1_700_000_000.0,
        ssh_host_key_fingerprints=fingerprints,
    )


class Publisher:
    """Registers services on ``interface`` (default 127.0.0.1) until closed."""

    def __init__(self, interface: str = "127.0.0.1") -> None:
        self.interface = interface
        # Built in a thread with no running asyncio loop, so it starts its own loop thread.
        self.zc = Zeroconf(interfaces=[interface], ip_version=IPVersion.V4Only)
        self._services: list[ServiceInfo] = []
        self._agents: list[Advertiser] = []

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.zc.loop).result(_CALL_TIMEOUT_S)

    def register(self, *infos: ServiceInfo) -> None:
        """Announce all at once; names are unique per test, so probing is skipped to save ~1.7 s each."""

        async def announce() -> None:
            sent = [await self.zc.async_register_service(info, cooperating_responders=True) for info in infos]
            await asyncio.gather(*sent)

        self._run(announce())
        self._services.extend(infos)

    def unregister(self, info: ServiceInfo) -> None:
        """Send the goodbye (TTL 0) for ``info``."""

        async def goodbye() -> None:
            await (await self.zc.async_unregister_service(info))

        self._services.remove(info)
        self._run(goodbye())

    def vanish(self, info: ServiceInfo) -> None:
        """Stop answering for ``info`` without a goodbye, as a host that loses power."""

        async def drop() -> None:
            self.zc.registry.async_remove(info)

        self._services.remove(info)
        self._run(drop())

    def advertise_agent(self, info: protocol.NodeInfo, ssh_port: int = 22) -> Advertiser:
        """Our real agent's advertiser (with its RFC 6762 probing), run in this publisher's loop."""
        advertiser = Advertiser(info, MEM, [self.interface], ssh_port=ssh_port)
        self._agents.append(advertiser)
        self._run(advertiser.start())
        return advertiser

    def stop_agent(self, advertiser: Advertiser) -> None:
        self._agents.remove(advertiser)
        self._run(advertiser.stop())

    def close(self) -> None:
        try:
            while self._agents:
                self.stop_agent(self._agents[-1])
            while self._services:
                self.unregister(self._services[-1])
        finally:
            self.zc.close()
