"""Discovery between network namespaces: nine "machines" publish, a tenth browses and scans.

Every publisher and the browser run as their own processes inside their lab
node, bound to that node's address, exactly as separate machines would.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab.netlab import Lab, LabNode

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
AGENTS = 8

# One lab machine: "agent" runs our agent's real Advertiser plus what Avahi
# would publish (_ssh._tcp) and an SSH banner on port 22; "bare" is a Spark
# with no agent yet (_ssh._tcp and _workstation._tcp only).
PUBLISH_NODE = """
import asyncio, signal, sys
from zeroconf import IPVersion, ServiceInfo
from zeroconf.asyncio import AsyncZeroconf
from sparksync_agent import protocol
from sparksync_agent.advertise import Advertiser
ip, host, role, fp = sys.argv[1:5]

async def banner(reader, writer):
    writer.write(b"SSH-2.0-OpenSSH_9.6p1 lab\\r\\n")
    await writer.drain()
    writer.close()

async def main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    aiozc = AsyncZeroconf(interfaces=[ip], ip_version=IPVersion.V4Only)
    infos = [ServiceInfo("_ssh._tcp.local.", f"{host}._ssh._tcp.local.", port=22, server=f"{host}.local.",
                         parsed_addresses=[ip])]
    if role == "bare":
        name = f"{host} [02:00:00:00:00:09]._workstation._tcp.local."
        infos.append(ServiceInfo("_workstation._tcp.local.", name, port=9, server=f"{host}.local.",
                                 parsed_addresses=[ip]))
    sent = [await aiozc.async_register_service(i, cooperating_responders=True) for i in infos]
    await asyncio.gather(*sent)
    advertiser = server = None
    if role == "agent":
        info = protocol.NodeInfo(node_id=host + "-id", hostname=host, arch="aarch64", os="Linux",
                                 kernel="lab", cpu_count=20, boot_time=0.0,
                                 ssh_host_key_fingerprints={"ssh-ed25519": fp})
        advertiser = Advertiser(info, 128 * 10**9, [ip])
        await advertiser.start()
        server = await asyncio.start_server(banner, ip, 22)
    print("ready", flush=True)
    await stop.wait()
    if server:
        server.close()
    if advertiser:
        await advertiser.stop()
    await aiozc.async_close()

asyncio.run(main())
"""

# Cold start: how long until every expected host is in the merged list.
TIME_DISCOVERY = """
import json, sys, time
from sparksync.core.discovery import Discovery
from sparksync.core.discovery.model import normalize_host
ip, expected = sys.argv[1], json.loads(sys.argv[2])
started = time.monotonic()
with Discovery([ip]) as discovery:
    done = discovery.wait_until(
        lambda ns: {normalize_host(n.hostname): n.kind for n in ns if normalize_host(n.hostname) in expected}
        == expected and all(len(n.sources) >= 2 for n in ns), 10)
    elapsed = time.monotonic() - started
    nodes = [n.model_dump(mode="json") for n in discovery.nodes()]
print(json.dumps({"done": done, "elapsed_s": elapsed, "nodes": nodes}))
"""


def fingerprint(i: int) -> str:
    return "SHA256:" + f"labnode{i:02d}".ljust(43, "x")


def python(lab: Lab, node: LabNode, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return lab.exec(node, [sys.executable, *argv], cwd=REPO, **kwargs)


def start_publisher(lab: Lab, node: LabNode, host: str, role: str, fp: str = "-") -> subprocess.Popen:
    argv = [sys.executable, "-c", PUBLISH_NODE, node.ip, host, role, fp]
    return lab.popen(node, argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def lab_machines(lab_factory):
    """Eight agent nodes, one bare Spark, and a tenth node that browses."""
    lab = lab_factory(AGENTS + 2)
    hosts = {node.name: f"spark-lab{node.index:02d}" for node in lab.nodes[: AGENTS + 1]}
    publishers = [
        start_publisher(lab, node, hosts[node.name], "agent", fingerprint(node.index))
        for node in lab.nodes[:AGENTS]
    ]
    bare = lab.nodes[AGENTS]
    publishers.append(start_publisher(lab, bare, hosts[bare.name], "bare"))
    for proc in publishers:
        line = lab.read_line(proc, 20)
        assert line == "ready\n", proc.stderr.read1().decode() if proc.poll() is not None else line
    time.sleep(1.1)  # let the announcements' one-second multicast rate limit pass, as on a network up a while
    yield lab, hosts, publishers
    for proc in publishers:
        proc.send_signal(signal.SIGTERM)


def test_browser_in_its_own_namespace_finds_agents_and_the_bare_spark(lab_machines):
    lab, hosts, _ = lab_machines
    browser = lab.nodes[-1]
    expected = {host: "agent" for host in list(hosts.values())[:AGENTS]} | {
        hosts[lab.nodes[AGENTS].name]: "spark"
    }
    done = python(lab, browser, ["-c", TIME_DISCOVERY, browser.ip, json.dumps(expected)])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    elapsed = report["elapsed_s"]
    print(f"\ndiscovery of {AGENTS} agents + 1 bare Spark across namespaces, cold start: {elapsed:.3f} s")
    assert report["done"], report["nodes"]
    by_host = {n["hostname"].removesuffix(".local"): n for n in report["nodes"]}
    for node in lab.nodes[:AGENTS]:
        found = by_host[hosts[node.name]]
        assert found["addresses"] == [node.ip] and found["sources"] == ["sparksync", "ssh"]
        assert found["host_key_fingerprints"] == {"ed25519": fingerprint(node.index)}
    bare = by_host[hosts[lab.nodes[AGENTS].name]]
    assert bare["kind"] == "spark" and bare["sources"] == ["ssh", "workstation"]


def test_cli_in_a_namespace_browses_and_scans_its_subnet(lab_machines):
    lab, hosts, _ = lab_machines
    browser = lab.nodes[-1]
    subnet = browser.ip.rsplit(".", 1)[0] + ".0/28"  # .1-.14: the lab's ten nodes and four empty addresses
    argv = ["-m", "sparksync", "node", "discover", "--json", "--interface", browser.ip, "--timeout", "2",
            "--scan", subnet, "--scan-timeout", "0.5"]  # fmt: skip
    done = python(lab, browser, argv)
    assert done.returncode == 0, done.stderr
    by_host = {n["hostname"].removesuffix(".local"): n for n in json.loads(done.stdout)}
    for node in lab.nodes[:AGENTS]:  # each agent node also answered the scan on port 22
        found = by_host[hosts[node.name]]
        assert found["kind"] == "agent" and found["sources"] == ["sparksync", "ssh", "scan"]
        assert found["ssh_banner"] == "SSH-2.0-OpenSSH_9.6p1 lab"
    assert "scan" not in by_host[hosts[lab.nodes[AGENTS].name]]["sources"]  # no sshd there
    assert len(json.loads(done.stdout)) == AGENTS + 1


def test_cli_in_a_namespace_refuses_an_interface_it_does_not_have(lab_factory):
    lab = lab_factory(1)
    done = python(lab, lab.nodes[0], ["-m", "sparksync", "node", "discover", "--interface", "192.0.2.2"])
    assert done.returncode == 2
    assert (
        f"no interface of this machine that is up has that address. Use one of: {lab.nodes[0].ip}, 127.0.0.1."
        in done.stderr
    )


@pytest.mark.parametrize(
    ("host", "hint"),
    [("node9.example.invalid", "name server could not be reached"), ("spark-zzzz.local", "over mDNS")],
)
def test_names_that_do_not_resolve_in_a_namespace_without_dns(lab_factory, host, hint):
    """The real resolver, where no name server is reachable: nothing leaves the lab."""
    lab = lab_factory(1)
    (node,) = lab.nodes
    script = (
        "import sys\nfrom sparksync.core.discovery import resolve_host, HostNotFoundError\n"
        f"try:\n    resolve_host({host!r}, interfaces=[{node.ip!r}])\nexcept HostNotFoundError as exc:\n"
        "    print(exc)\n    sys.exit(3)\n"
    )
    started = time.monotonic()
    done = python(lab, node, ["-c", script])
    assert done.returncode == 3, done.stderr
    assert f"cannot resolve host name {host!r}" in done.stdout and hint in done.stdout
    assert time.monotonic() - started < 15
