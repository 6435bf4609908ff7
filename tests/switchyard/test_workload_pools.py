"""Pools that follow running workloads: config, endpoint choice, reaches opened and closed, a live gateway."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.reach import DirectReach, direct_url, workload_endpoints
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore
from sparksync.switchyard.config import parse_config
from sparksync.switchyard.errors import ConfigError
from sparksync.switchyard.gateway import Gateway
from sparksync.switchyard.server import GatewayThread
from sparksync.switchyard.workload_pools import WorkloadPools


def record(workload_id: str, recipe: str, *heads: tuple[str, str, int]) -> WorkloadRecord:
    """A workload of one replica per (node, host, port), each a group of its own."""
    groups = [f"{recipe}-{i + 1}" for i in range(len(heads))]
    ranks = [
        RankRef(node=node, name=f"{g}.0.llama-server", group=g, rank=0, role="llama-server")
        for g, (node, _, _) in zip(groups, heads)
    ]
    endpoints = [
        Endpoint(group=g, node=node, host=host, port=port) for g, (node, host, port) in zip(groups, heads)
    ]
    plan = Plan(groups=[Group(recipe=recipe, nodes=[node]) for node, _, _ in heads])
    return WorkloadRecord(
        workload_id=workload_id, recipes=[recipe], plan=plan, ranks=ranks, endpoints=endpoints
    )


def config(small: dict, large: dict, **extra):
    return parse_config({
        "listen": {"host": "127.0.0.1", "port": 0},
        "pools": {"small": small, "large": large},
        "policy": {"kind": "fixed_share", "large_share": 0, "small": "small", "large": "large"},
        "health": {"interval_s": 0.2, "timeout_s": 0.5},
        **extra,
    })  # fmt: skip


class FakeReach:
    """Hands out http://<node>-<port> and counts what is open; nodes in ``down`` cannot be reached."""

    def __init__(self):
        self.open: set[tuple[str, int]] = set()
        self.opened = 0
        self.down: set[str] = set()

    @contextmanager
    def __call__(self, endpoint: Endpoint):
        if endpoint.node in self.down:
            raise SparkSyncError(f"{endpoint.node} does not answer")
        key = (endpoint.node, endpoint.port)
        self.open.add(key)
        self.opened += 1
        try:
            yield f"http://{endpoint.node}-{endpoint.port}"
        finally:
            self.open.discard(key)


# --- the config ---------------------------------------------------------------------------------


def test_a_pool_is_either_urls_or_a_workload():
    cfg = config({"workload": "tiny-small"}, {"urls": ["http://127.0.0.1:9"]})
    assert cfg.workload_pools() == {"small": "tiny-small"}
    for bad in ({"urls": ["http://a:1"], "workload": "w"}, {}):
        with pytest.raises(ConfigError, match="either urls .* or workload"):
            config(bad, {"urls": ["http://127.0.0.1:9"]})


def test_a_gateway_given_workload_pools_but_no_way_to_read_them_refuses():
    cfg = config({"workload": "tiny-small"}, {"urls": ["http://127.0.0.1:9"]})
    with pytest.raises(ConfigError, match="pools small follow workloads"):
        Gateway(cfg)


# --- which endpoints, and how they are reached ------------------------------------------------------


def test_a_selector_is_a_workload_id_a_recipe_or_a_group():
    one = record("small-1", "tiny-small", ("n1", "127.0.0.1", 8080), ("n2", "127.0.0.1", 8080))
    two = record("small-2", "tiny-small", ("n3", "127.0.0.1", 8081))
    big = record("big-1", "tiny-large", ("n4", "127.0.0.1", 8080))
    records = [one, two, big]
    assert [e.node for e in workload_endpoints(records, "tiny-small")] == ["n1", "n2", "n3"]
    assert [e.node for e in workload_endpoints(records, "small-2")] == ["n3"]
    assert [e.node for e in workload_endpoints(records, "tiny-small-2")] == ["n2"]
    assert workload_endpoints(records, "nothing") == []


def test_direct_urls_use_the_node_address_and_refuse_a_loopback_engine():
    wildcard = Endpoint(group="g", node="n1", host="127.0.0.1", port=8080, listen="0.0.0.0")
    assert direct_url(wildcard, {"n1": "10.0.0.5"}) == "http://10.0.0.5:8080"
    recorded_before = Endpoint(group="g", node="n1", host="0.0.0.0", port=8080)  # no listen field
    assert direct_url(recorded_before, {"n1": "10.0.0.5"}) == "http://10.0.0.5:8080"
    assert direct_url(Endpoint(group="g", node="n1", host="10.1.1.1", port=81), {}) == "http://10.1.1.1:81"
    with pytest.raises(WorkloadError, match="only that node can reach"):
        direct_url(Endpoint(group="g", node="n1", host="127.0.0.1", port=8080), {"n1": "10.0.0.5"})
    with pytest.raises(WorkloadError, match="no address is known for node 'n1'"):
        direct_url(wildcard, {})


def test_replicas_follow_the_workloads_as_they_start_and_stop():
    records = [record("small-1", "tiny-small", ("n1", "127.0.0.1", 8080))]
    reach = FakeReach()
    source = WorkloadPools(
        config({"workload": "tiny-small"}, {"urls": ["http://big:1"]}), lambda: records, reach
    )

    assert source.resolve() == {"small": ["http://n1-8080"], "large": ["http://big:1"]}
    assert source.resolve()["small"] == ["http://n1-8080"] and reach.opened == 1  # kept open, not reopened

    records.append(record("small-2", "tiny-small", ("n2", "127.0.0.1", 8080)))
    assert source.resolve()["small"] == ["http://n1-8080", "http://n2-8080"]
    del records[0]  # the first workload was stopped
    assert source.resolve()["small"] == ["http://n2-8080"]
    assert reach.open == {("n2", 8080)}  # its way in was closed

    source.close()
    assert reach.open == set()


def test_an_unreachable_replica_is_left_out_and_tried_again_next_round():
    records = [record("s", "tiny-small", ("n1", "127.0.0.1", 8080), ("n2", "127.0.0.1", 8080))]
    reach = FakeReach()
    reach.down = {"n2"}
    source = WorkloadPools(config({"workload": "s"}, {"urls": ["http://big:1"]}), lambda: records, reach)
    assert source.resolve()["small"] == ["http://n1-8080"]
    reach.down = set()
    assert source.resolve()["small"] == ["http://n1-8080", "http://n2-8080"]
    source.close()


# --- through a running gateway, over the workload record file -----------------------------------------


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def wait_until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        pause.wait(0.05)


def ask(gw: GatewayThread) -> httpx.Response:
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=30, trust_env=False)


def test_a_gateway_routes_to_the_workloads_in_the_record_and_follows_a_restart(fake, _servers, tmp_path):
    first, second, large = fake("first"), fake("second"), fake("large")
    store = WorkloadStore(tmp_path / "workloads.json")
    store.add(record("small-a", "tiny-small", ("n1", "0.0.0.0", port_of(first.url))))
    cfg = config({"workload": "tiny-small", "model": "tiny"}, {"urls": [large.url]})
    source = WorkloadPools(cfg, store.list, DirectReach({"n1": "127.0.0.1", "n2": "127.0.0.1"}))
    gw = GatewayThread(cfg, source)
    _servers.append(gw)
    gw.start()

    answer = ask(gw)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "answer from first"
    assert first.bodies[-1]["model"] == "tiny"

    # The workload is stopped and another one of the same recipe starts elsewhere: the pool follows.
    store.remove("small-a")
    store.add(record("small-b", "tiny-small", ("n2", "0.0.0.0", port_of(second.url))))
    wait_until(lambda: [r.url for r in gw.gateway.pools["small"].replicas] == [second.url], "the new replica")
    assert ask(gw).json()["choices"][0]["message"]["content"] == "answer from second"
    assert not large.bodies
