"""AgentClient's answers and errors, against a scripted fake agent (no sockets)."""

from __future__ import annotations

import json

import httpx
import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import (
    AgentAuthError,
    AgentRequestError,
    AgentUnreachableError,
    ProtocolMismatchError,
)
from sparksync_agent.protocol import PROTOCOL_VERSION
from tests.core.fake_agent import GOOD_TOKEN, error


def test_hello_sends_our_versions(fake, fake_client):
    reply = fake_client.hello()
    assert reply.run_id == "run-1"
    body = json.loads(fake.requests[-1].content)
    assert body["protocol_version"] == PROTOCOL_VERSION and body["client_name"] == "sparksync"


def test_snapshot_and_metrics(fake_client):
    assert fake_client.snapshot().info.hostname == "fake"
    assert "sparksync_up" in fake_client.metrics()


def test_wrong_token_is_an_auth_error_without_the_token(fake):
    secret = "not-the-right-token-xyz"
    with AgentClient("http://agent.test", secret, transport=fake.transport()) as client:
        with pytest.raises(AgentAuthError) as info:
            client.snapshot()
    assert "refused our token" in str(info.value) and secret not in str(info.value) and GOOD_TOKEN not in str(info.value)
    assert secret not in repr(client)


def test_409_names_both_versions(fake, fake_client):
    fake.routes[("POST", "/v1/hello")] = lambda _: error(
        409, "protocol_mismatch", "this agent speaks protocol 2.0 but the client speaks '1.0'"
    )
    with pytest.raises(ProtocolMismatchError) as info:
        fake_client.hello()
    assert "2.0" in str(info.value) and PROTOCOL_VERSION in str(info.value)


def test_client_checks_the_major_itself(fake, fake_client):
    fake.protocol_version = "2.3"  # an agent that forgot to refuse us
    with pytest.raises(ProtocolMismatchError) as info:
        fake_client.hello()
    assert "2.3" in str(info.value) and PROTOCOL_VERSION in str(info.value)


def test_a_newer_minor_is_fine(fake, fake_client):
    fake.protocol_version = PROTOCOL_VERSION.split(".")[0] + ".99"
    assert fake_client.hello().protocol_version.endswith(".99")


def test_other_4xx_carries_the_agents_message(fake, fake_client):
    fake.routes[("GET", "/v1/telemetry")] = lambda _: error(400, "unknown_since", "since 99 is newer than seq 5")
    with pytest.raises(AgentRequestError) as info:
        fake_client.telemetry(99)
    assert info.value.status == 400 and info.value.code == "unknown_since"
    assert "since 99 is newer than seq 5" in str(info.value)


def test_telemetry_passes_since_and_limit(fake, fake_client):
    seen = []
    fake.routes[("GET", "/v1/telemetry")] = lambda r: seen.append(dict(r.url.params)) or httpx.Response(
        200, json={"run_id": "run-1", "since": 3, "samples": [], "last_seq": 3}
    )
    fake_client.telemetry(3, limit=7)
    fake_client.telemetry(3)
    assert seen == [{"since": "3", "limit": "7"}, {"since": "3"}]


def test_unreadable_answer_is_a_protocol_mismatch(fake, fake_client):
    fake.routes[("GET", "/v1/snapshot")] = lambda _: httpx.Response(200, json={"info": {"hostname": 1}})
    with pytest.raises(ProtocolMismatchError, match="Snapshot"):
        fake_client.snapshot()


def test_non_json_error_body_still_explains(fake, fake_client):
    fake.routes[("GET", "/v1/status")] = lambda _: httpx.Response(502, text="Bad Gateway from the tunnel")
    with pytest.raises(AgentRequestError, match="failed while reading the agent status: Bad Gateway") as info:
        fake_client.status()
    assert info.value.status == 502 and "HTTP" not in str(info.value)  # the status for code, words for people


def test_a_labelled_client_names_its_node_not_the_tunnels_port(fake):
    fake.routes[("GET", "/v1/status")] = lambda _: httpx.Response(400, json={"error": "bad_request",
                                                                              "message": "no such model"})
    with AgentClient("http://127.0.0.1:36799", GOOD_TOKEN, transport=fake.transport(), label="spark-2") as client:
        with pytest.raises(AgentRequestError) as info:
            client.status()
    text = str(info.value)
    assert text == "the agent on spark-2 refused the request (reading the agent status): no such model"
    assert "127.0.0.1" not in text and "HTTP" not in text


def test_connection_refused_is_unreachable():
    import socket

    with socket.socket() as sock:  # a port nobody listens on: bind, never listen
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with AgentClient(f"http://127.0.0.1:{port}", GOOD_TOKEN, timeout=2) as client:
            with pytest.raises(AgentUnreachableError, match=f"127.0.0.1:{port}.*running"):
                client.hello()
