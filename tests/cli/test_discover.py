"""``sparksync node discover`` end to end: real mDNS on loopback, real scans, CliRunner and a real process."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.discovery import DiscoveredNode
from sparksync.core.discovery.model import normalize_host
from tests.core.mdns_publisher import (
    Publisher,
    agent_info,
    doc_address,
    fingerprint,
    ssh_service,
    unique_host,
)
from tests.core.test_discovery_scan import FakeServer


@pytest.fixture
def publisher():
    pub = Publisher("127.0.0.1")
    yield pub
    pub.close()


@pytest.fixture
def ssh_banner_server():
    # An address of its own, so entries other tests publish on 127.0.0.1 cannot make it ambiguous.
    server = FakeServer("ssh", (f"127.0.0.{secrets.randbelow(150) + 100}",))
    yield server
    server.close()


def run(*args: str):
    return CliRunner().invoke(cli, ["node", "discover", *args], catch_exceptions=False)


def parse(output: str) -> dict[str, DiscoveredNode]:
    nodes = [DiscoveredNode.model_validate(item) for item in json.loads(output)]
    return {normalize_host(node.hostname): node for node in nodes}


def test_json_lists_agent_spark_and_plain_hosts(publisher):
    agent_host, spark_host, plain_host = unique_host("spark"), unique_host("gx10"), unique_host("box")
    fp = fingerprint()
    publisher.advertise_agent(agent_info(agent_host, {"ssh-ed25519": fp}))
    publisher.register(
        ssh_service(agent_host, ["127.0.0.1"]),
        ssh_service(spark_host, [doc_address()]),
        ssh_service(plain_host, [doc_address(), "203.0.113.9"]),
    )
    result = run("--json", "--interface", "127.0.0.1", "--timeout", "2.5")
    assert result.exit_code == 0, result.output
    nodes = parse(result.stdout)
    assert nodes[agent_host].kind == "agent" and nodes[agent_host].sources == ["sparksync", "ssh"]
    assert nodes[agent_host].host_key_fingerprints == {"ed25519": fp}
    assert nodes[spark_host].kind == "spark" and nodes[spark_host].likely_spark
    assert nodes[plain_host].kind == "ssh" and len(nodes[plain_host].addresses) == 2


def test_table_output(publisher):
    host = unique_host("spark")
    publisher.register(ssh_service(host, [doc_address()], port=2200))
    result = run("--interface", "127.0.0.1", "--timeout", "1.5")
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split()[:4] == ["KIND", "SPARK", "HOSTNAME", "ADDRESSES"]
    (row,) = [r for r in rows if f"{host}.local" in r]
    assert row.split()[:2] == ["spark", "likely"] and " 2200 " in row


def test_scan_hits_merge_with_mdns_entries(publisher, ssh_banner_server):
    host, address = unique_host("box"), ssh_banner_server.address
    publisher.register(ssh_service(host, [address], port=ssh_banner_server.port))
    result = run("--json", "--interface", "127.0.0.1", "--timeout", "1.5",
                 "--scan", address, "--port", str(ssh_banner_server.port))  # fmt: skip
    assert result.exit_code == 0, result.output
    node = parse(result.stdout)[host]
    assert node.sources == ["ssh", "scan"] and node.addresses == [address]
    assert node.ssh_banner.startswith("SSH-2.0-")


def test_scan_only_without_mdns(ssh_banner_server):
    started = time.monotonic()
    subnet = ssh_banner_server.address.rsplit(".", 1)[0] + ".0/24"
    result = run("--json", "--no-mdns", "--scan", subnet, "--port", str(ssh_banner_server.port),
                 "--scan-timeout", "0.3")  # fmt: skip
    assert result.exit_code == 0, result.output
    (node,) = json.loads(result.stdout)
    assert (
        node["addresses"] == [ssh_banner_server.address]
        and node["sources"] == ["scan"]
        and node["kind"] == "ssh"
    )
    assert time.monotonic() - started < 2.5  # no mDNS wait


def test_nothing_found_says_what_to_try(ssh_banner_server):
    result = run("--no-mdns", "--scan", "127.0.0.1", "--port", "1", "--scan-timeout", "0.5")
    assert result.exit_code == 0 and result.stdout == ""
    assert "No nodes found" in result.stderr and "--scan" in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--interface", "203.0.113.77"], 2, "cannot browse on 203.0.113.77"),
        (["--interface", "127.0.0.1", "--scan", "10.0.0.0/16"], 2, "at most 1024"),
        (["--no-mdns"], 2, "--no-mdns leaves nothing to do"),
        (["--no-mdns", "--scan", "user@host"], 8, "not a valid host name"),
    ],
)
def test_errors_are_one_clear_line(args, code, message):
    result = run(*args)
    assert result.exit_code == code
    assert message in result.stderr and "Traceback" not in result.output


def test_real_process_with_explicit_interface(publisher):
    host = unique_host("spark")
    publisher.register(ssh_service(host, [doc_address()]))
    # The timeout counts from the command's start, imports included; mDNS on loopback answers in 1-2 s.
    argv = ["node", "discover", "--json", "--interface", "127.0.0.1", "--timeout", "4"]
    done = subprocess.run(
        [sys.executable, "-m", "sparksync", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert parse(done.stdout)[host].kind == "spark"


def test_stream_prints_each_node_as_a_json_line_while_it_still_browses(publisher):
    """``--json --stream``: the node's line arrives while the command is still listening, not at its end."""
    host = unique_host("spark")
    publisher.register(ssh_service(host, [doc_address()]))
    argv = ["node", "discover", "--json", "--stream", "--interface", "127.0.0.1", "--timeout", "20"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparksync", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        seen = []
        for line in proc.stdout:
            item = json.loads(line)
            seen.append(item)
            if normalize_host(item["node"]["hostname"]) == host:
                still_running = proc.poll() is None
                break
        else:
            raise AssertionError(f"no line for {host}: {seen}; {proc.stderr.read()}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert still_running  # printed as found, with most of the 20 s still to go
    assert item["event"] == "added" and 0 <= item["elapsed_s"] < 20
    assert DiscoveredNode.model_validate(item["node"]).kind == "spark"


def test_found_nodes_are_told_on_stderr_and_the_table_comes_at_the_end(publisher):
    host = unique_host("spark")
    publisher.register(ssh_service(host, [doc_address()]))
    result = run("--interface", "127.0.0.1", "--timeout", "1.5")
    assert result.exit_code == 0, result.output
    assert f"found {host}.local" in result.stderr
    assert any(f"{host}.local" in row for row in result.stdout.splitlines()[1:])


def test_stream_without_json_prints_rows(publisher):
    host = unique_host("spark")
    publisher.register(ssh_service(host, [doc_address()]))
    result = run("--stream", "--interface", "127.0.0.1", "--timeout", "1.5")
    assert result.exit_code == 0, result.output
    (row,) = [r for r in result.stdout.splitlines() if f"{host}.local" in r and r.startswith("added")]
    assert row.split()[3:5] == ["spark", "likely"]
