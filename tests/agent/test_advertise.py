"""The agent's mDNS advertisement: the TXT record, and real zeroconf on loopback and between namespaces."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from zeroconf import IPVersion, ServiceInfo, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from sparksync_agent import protocol
from sparksync_agent.advertise import (
    SERVICE_TYPE,
    Advertiser,
    fingerprints_from_txt,
    host_label,
    instance_name,
    parse_txt,
    short_key_type,
    txt_record,
)
from sparksync_agent.errors import AdvertiseError

ED25519 = "SHA256:" + "E" * 43
ECDSA = "SHA256:" + "C" * 43
RSA = "SHA256:" + "R" * 43
MEM = 128 * 10**9
EXPECTED_KEYS = {
    "txtvers", "node_id", "hostname", "agent_version", "protocol", "mem_total", "arch",
    "fp_ed25519", "fp_ecdsa", "fp_rsa",
}  # fmt: skip


def node_info(hostname: str = "spark-1a2b", fingerprints: dict[str, str] | None = None) -> protocol.NodeInfo:
    return protocol.NodeInfo(
        node_id=uuid.uuid4().hex,
        hostname=hostname,
        arch="aarch64",
        os="Linux",
        kernel="6.11.0-nvidia",
        cpu_count=20,
        boot_time=1_700_000_000.0,
        ssh_host_key_fingerprints=(
            {"ssh-ed25519": ED25519, "ecdsa-sha2-nistp256": ECDSA, "ssh-rsa": RSA}
            if fingerprints is None
            else fingerprints
        ),
    )


# --- pure parts --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key_type", "short"),
    [
        ("ssh-ed25519", "ed25519"),
        ("ED25519", "ed25519"),
        ("(ED25519)", "ed25519"),
        ("ecdsa-sha2-nistp256", "ecdsa"),
        ("ECDSA", "ecdsa"),
        ("ssh-rsa", "rsa"),
        ("rsa-sha2-512", "rsa"),
        ("ssh-dss", "dsa"),
        ("sk-ssh-ed25519@openssh.com", "ed25519"),
        ("", ""),
    ],
)
def test_short_key_type(key_type, short):
    assert short_key_type(key_type) == short


def test_txt_record_holds_every_field_and_nothing_secret():
    info = node_info()
    txt = txt_record(info, MEM)
    assert set(txt) == EXPECTED_KEYS  # a new key (an API port, a token) must be a deliberate change here
    assert txt["txtvers"] == "1"
    assert txt["node_id"] == info.node_id and txt["hostname"] == "spark-1a2b" and txt["arch"] == "aarch64"
    assert txt["agent_version"] == protocol.AGENT_VERSION and txt["protocol"] == protocol.PROTOCOL_VERSION
    assert txt["mem_total"] == str(MEM)
    assert fingerprints_from_txt(txt) == {"ed25519": ED25519, "ecdsa": ECDSA, "rsa": RSA}


def test_txt_record_takes_keygen_style_types_and_drops_non_sha256():
    info = node_info(fingerprints={"ED25519": ED25519, "RSA": "MD5:aa:bb", "": ECDSA})
    assert fingerprints_from_txt(txt_record(info, MEM)) == {"ed25519": ED25519}


def test_txt_entries_fit_mdns_limits():
    info = node_info(hostname="h" * 300)
    for key, value in txt_record(info, MEM).items():
        assert len(f"{key}={value}".encode()) <= 255


def test_txt_survives_zeroconf_encoding_round_trip():
    info = node_info()
    wire = ServiceInfo(SERVICE_TYPE, f"x.{SERVICE_TYPE}", port=22, properties=txt_record(info, MEM))
    assert parse_txt(wire.properties) == txt_record(info, MEM)


def test_parse_txt_is_lenient_with_what_the_network_sends():
    parsed = parse_txt({b"Node_ID": b"abc", b"flag": None, b"": b"x", b"bad": b"\xff"})
    assert parsed == {"node_id": "abc", "flag": "", "bad": "\ufffd"}


@pytest.mark.parametrize(
    ("hostname", "label"),
    [("spark-1a2b", "spark-1a2b"), ("spark-1a2b.local", "spark-1a2b"), ("GX10_Lab.example.com", "gx10-lab")],
)
def test_host_label(hostname, label):
    assert host_label(hostname) == label


def test_instance_name_is_one_short_label_that_keeps_the_node_id():
    info = node_info(hostname="a-very-long-hostname-" * 10)
    name = instance_name(info)
    assert len(name.encode()) <= 63 and "." not in name
    assert name.endswith("-" + info.node_id[:8])
    assert host_label("...", "abcdef0123") == "sparksync-abcdef01"


@pytest.mark.parametrize(
    ("interfaces", "port", "message"),
    [([], 22, "--interface"), (["not-an-ip"], 22, "IP address"), (["127.0.0.1"], 70000, "out of range")],
)
def test_bad_arguments_are_refused(interfaces, port, message):
    with pytest.raises(ValueError, match=message):
        Advertiser(node_info(), MEM, interfaces, ssh_port=port)


# --- real zeroconf on loopback ----------------------------------------------------


class Browser:
    """An AsyncServiceBrowser that records when each name was added and removed."""

    def __init__(self, interface: str) -> None:
        self.aiozc = AsyncZeroconf(interfaces=[interface], ip_version=IPVersion.V4Only)
        self.added: dict[str, asyncio.Event] = {}
        self.removed: dict[str, asyncio.Event] = {}
        self.browser = AsyncServiceBrowser(self.aiozc.zeroconf, SERVICE_TYPE, handlers=[self._on_change])

    def _on_change(self, zeroconf, service_type, name, state_change) -> None:
        events = self.added if state_change is ServiceStateChange.Added else self.removed
        events.setdefault(name, asyncio.Event()).set()

    async def wait(self, events: dict[str, asyncio.Event], name: str, timeout: float) -> None:
        await asyncio.wait_for(events.setdefault(name, asyncio.Event()).wait(), timeout)

    async def resolve(self, name: str) -> AsyncServiceInfo:
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        assert await info.async_request(self.aiozc.zeroconf, 3000), f"{name} did not resolve"
        return info

    async def close(self) -> None:
        await self.browser.async_cancel()
        await self.aiozc.async_close()


async def _advertise_on_loopback(info: protocol.NodeInfo) -> dict:
    threads_before = set(threading.enumerate())
    browser = Browser("127.0.0.1")
    advertiser = Advertiser(info, MEM, ["127.0.0.1"], ssh_port=2222)
    try:
        await advertiser.start()
        assert advertiser.advertising
        await browser.wait(browser.added, advertiser.name, 5)
        resolved = await browser.resolve(advertiser.name)
        await advertiser.stop()
        assert not advertiser.advertising
        threads_after_stop = set(threading.enumerate())
        await browser.wait(browser.removed, advertiser.name, 5)
    finally:
        await advertiser.stop()
        await browser.close()
    return {
        "port": resolved.port,
        "addresses": resolved.parsed_addresses(),
        "server": resolved.server,
        "txt": parse_txt(resolved.properties),
        "new_threads": threads_after_stop - threads_before,
    }


def test_loopback_advertise_resolve_and_goodbye():
    info = node_info()
    found = asyncio.run(_advertise_on_loopback(info))
    assert found["port"] == 2222  # the SSH port: the API port is never advertised
    assert found["addresses"] == ["127.0.0.1"]
    assert found["server"] == "spark-1a2b.local."
    assert found["txt"] == txt_record(info, MEM)
    assert not {key for key in found["txt"] if "token" in key or "port" in key or "secret" in key}
    assert found["new_threads"] == set()


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def _failed_start(info: protocol.NodeInfo) -> None:
    # 203.0.113.1 (TEST-NET-3) is on no interface of this machine.
    advertiser = Advertiser(info, MEM, ["127.0.0.1", "203.0.113.1"])
    expected = r"on 203\.0\.113\.1: no interface.*--interface with one of: .*127\.0\.0\.1"
    with pytest.raises(AdvertiseError, match=expected):
        await advertiser.start()
    assert not advertiser.advertising
    await advertiser.stop()
    await advertiser.stop()


def test_failed_start_leaves_no_socket_or_thread_and_stop_is_safe():
    threads, fds = set(threading.enumerate()), _open_fds()
    asyncio.run(_failed_start(node_info()))
    assert set(threading.enumerate()) == threads
    assert _open_fds() == fds


def test_stop_without_start_is_a_no_op():
    asyncio.run(Advertiser(node_info(), MEM, ["127.0.0.1"]).stop())


# --- between two lab nodes --------------------------------------------------------------

ADVERTISE_NODE = """
import asyncio, signal, sys
from sparksync_agent import protocol
from sparksync_agent.advertise import Advertiser
ip, node_id, hostname, mem = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
info = protocol.NodeInfo(node_id=node_id, hostname=hostname, arch="aarch64", os="Linux", kernel="lab",
                         cpu_count=20, boot_time=0.0, ssh_host_key_fingerprints={"ssh-ed25519": sys.argv[5]})
async def main():
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    advertiser = Advertiser(info, mem, [ip])
    await advertiser.start()
    print("advertising", flush=True)
    await stopping.wait()
    await advertiser.stop()
asyncio.run(main())
"""

BROWSE_NODE = """
import asyncio, json, sys
from zeroconf import IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf
from sparksync_agent.advertise import SERVICE_TYPE, parse_txt
ip, wanted, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
async def main():
    aiozc = AsyncZeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    added, removed = asyncio.Queue(), asyncio.Queue()
    def on_change(zeroconf, service_type, name, state_change):
        (added if state_change is ServiceStateChange.Added else removed).put_nowait(name)
    browser = AsyncServiceBrowser(aiozc.zeroconf, SERVICE_TYPE, handlers=[on_change])
    async def find():
        while True:
            info = AsyncServiceInfo(SERVICE_TYPE, await added.get())
            if await info.async_request(aiozc.zeroconf, 3000):
                txt = parse_txt(info.properties)
                if txt.get("node_id") == wanted:
                    return {"name": info.name, "port": info.port, "addresses": info.parsed_addresses(),
                            "server": info.server, "txt": txt}
    async def gone(name):
        while await removed.get() != name:
            pass
        return True
    try:
        found = await asyncio.wait_for(find(), timeout)
        print(json.dumps(found), flush=True)
        print(json.dumps({"removed": await asyncio.wait_for(gone(found["name"]), timeout)}), flush=True)
    except asyncio.TimeoutError:
        print(json.dumps(None), flush=True)
    finally:
        await browser.async_cancel()
        await aiozc.async_close()
asyncio.run(main())
"""


def start_advertising_node(lab, node, info: protocol.NodeInfo) -> subprocess.Popen:
    """The advertising side, as its own process inside ``node``; stops (with goodbye) on SIGTERM.

    Swap for ``sparksync-agent serve --advertise --interface IP`` once the daemon exists.
    """
    argv = [sys.executable, "-c", ADVERTISE_NODE, node.ip, info.node_id, info.hostname, str(MEM), ED25519]
    return lab.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def start_browsing_node(lab, node, node_id: str, timeout_s: float) -> subprocess.Popen:
    argv = [sys.executable, "-c", BROWSE_NODE, node.ip, node_id, str(timeout_s)]
    return lab.popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.lab
def test_node_resolves_another_nodes_advertisement_across_namespaces(lab_factory):
    lab = lab_factory(2)
    advertising, browsing = lab.nodes
    info = node_info(hostname=f"lab-{advertising.name}", fingerprints={"ssh-ed25519": ED25519})
    started = time.monotonic()
    browser = start_browsing_node(lab, browsing, info.node_id, timeout_s=6)
    agent = start_advertising_node(lab, advertising, info)

    found = json.loads(lab.read_line(browser, 10) or "null")
    if not found:
        agent.terminate()
        pytest.fail(f"node 2 found nothing; the advertiser's stderr: {agent.communicate(timeout=5)[1]!r}")
    assert found["addresses"] == [advertising.ip]
    assert found["port"] == 22
    assert found["server"] == f"lab-{advertising.name}.local."
    assert found["txt"] == txt_record(info, MEM)

    agent.send_signal(signal.SIGTERM)
    assert agent.wait(5) == 0
    assert json.loads(lab.read_line(browser, 10)) == {"removed": True}  # the goodbye crossed the bridge
    assert browser.wait(5) == 0
    assert time.monotonic() - started < 10
