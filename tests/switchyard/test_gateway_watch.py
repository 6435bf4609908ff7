"""Finding and scraping gateways through the real path: real gateways, real HTTP, real `serve` processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import psutil
import pytest

from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord
from sparksync.switchyard.announce import announced, announced_gateways, gateways_dir
from sparksync.switchyard.errors import SwitchyardError
from sparksync.switchyard.gateway_watch import GatewayWatch
from sparksync.switchyard.on_node import GATEWAY_RECIPE
from sparksync.switchyard.watched import add_watched, load_watched, remove_watched
from tests.switchyard.conftest import config_for, dead_url


def ask(client: httpx.Client, url: str, pool: str, stream: bool = True) -> None:
    body = {
        "model": "switchyard",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": stream,
        "stream_options": {"include_usage": True},
    }
    response = client.post(f"{url}/v1/chat/completions", json=body, headers={"X-Switchyard-Pool": pool})
    assert response.status_code == 200, response.text


def only_urls(*urls: str) -> GatewayWatch:
    """A watch over the given URLs only (no announcements, no workloads)."""
    return GatewayWatch(records=list, urls=lambda: list(urls), announced=list)


def test_scraped_figures_follow_the_traffic(fake, gateway):
    gw = gateway(config_for([fake("s1").url, fake("s2").url], [fake("l1").url]))
    watch = only_urls(gw.url)
    try:
        (first,), problems = watch.poll()
        assert problems == [] and first.problem is None and first.url == gw.url
        assert set(first.live.pools) == {"small", "large"} and first.live.requests == 0
        with httpx.Client(timeout=30) as client:
            for pool in ("small", "small", "small", "large"):
                ask(client, gw.url, pool)
        (reading,), _ = watch.poll()
        small, large = reading.live.pools["small"], reading.live.pools["large"]
        assert (small.requests, large.requests) == (3, 1)
        assert small.share == 0.75 and small.recent_share == 0.75 and large.recent_share == 0.25
        assert (small.output_tokens, large.output_tokens) == (21, 7)  # 7 tokens per answer
        assert large.tokens_per_s > 0  # the last answer, a moment ago, is inside the 10 s window
        assert small.ttft_recent and small.ttft_p50_s is not None and small.ttft_p50_s > 0
        assert (small.replicas_up, small.replicas, large.replicas_up, large.replicas) == (2, 2, 1, 1)
    finally:
        watch.close()


def test_unreachable_and_foreign_addresses_say_why(fake):
    replica = fake("not-a-gateway")
    watch = only_urls(dead_url(), replica.url)
    try:
        (dead, foreign), _ = watch.poll()
        assert dead.live is None and "does not answer" in dead.problem
        assert (
            foreign.live is None and "HTTP 404" in foreign.problem and "Switchyard gateway" in foreign.problem
        )
    finally:
        watch.close()


def test_a_gateway_that_wants_a_key_is_read_with_it(fake, gateway, monkeypatch, tmp_path):
    monkeypatch.setenv("SY_TEST_KEY", "sesame")
    config = config_for([fake("s").url], [fake("l").url], listen={"api_key_env": "SY_TEST_KEY"})
    gw = gateway(config)
    with announced(config, gw.url):
        watch = GatewayWatch(records=list, urls=list)
        try:
            (reading,), _ = watch.poll()
            assert reading.origin == "local" and reading.problem is None
            monkeypatch.delenv("SY_TEST_KEY")
            (reading,), _ = watch.poll()
            assert "wants an API key" in reading.problem
        finally:
            watch.close()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_announces_itself_while_it_listens(tmp_path, fake, stop):
    # Port 0: the gateway picks a free port, and the announcement names the real one.
    config = config_for([fake("s").url], [fake("l").url]).model_dump_json(exclude_defaults=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparksync", "switchyard", "serve", "--config-json", config],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, notes = time.monotonic() + 60, []
        while not notes and time.monotonic() < deadline and proc.poll() is None:
            notes = announced_gateways()
            time.sleep(0.05)
        assert notes, proc.stderr.read() if proc.poll() is not None else "no announcement"
        (note,) = notes
        assert note.pid == proc.pid and note.pools == ["small", "large"] and note.policy == "fixed_share"
        assert not note.url.endswith(":0")
        watch = GatewayWatch(records=list, urls=list)
        try:
            (reading,), _ = watch.poll()
            assert reading.url == note.url and reading.problem is None
            assert set(reading.live.pools) == {"small", "large"}
        finally:
            watch.close()
        # Ctrl-C, or SIGTERM (systemd, kill, a workload's stop): both unannounce the gateway.
        proc.send_signal(stop)
        assert proc.wait(20) == 0
        assert announced_gateways() == [] and list(gateways_dir().iterdir()) == []  # no temp file either
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_announcements_of_dead_processes_are_ignored_and_removed():
    gateways_dir().mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    stale = {
        "version": 1,
        "pid": child.pid,  # gone now
        "process_started": time.time(),
        "url": "http://127.0.0.1:9",
        "policy": "rules",
        "pools": ["a", "b"],
        "announced_at": time.time(),
    }
    reused = {**stale, "pid": psutil.Process().pid, "process_started": 1.0}  # our pid, another start time
    newer = {**stale, "version": 99, "pid": psutil.Process().pid}
    (gateways_dir() / "1-9.json").write_text(json.dumps(stale))
    (gateways_dir() / "2-9.json").write_text(json.dumps(reused))
    (gateways_dir() / "3-9.json").write_text(json.dumps(newer))
    (gateways_dir() / "4-9.json").write_text("{not json")
    assert announced_gateways() == []
    assert sorted(p.name for p in gateways_dir().glob("*.json")) == ["3-9.json", "4-9.json"]


def gateway_record(workload_id: str, node: str, port: int) -> WorkloadRecord:
    return WorkloadRecord(
        workload_id=workload_id,
        recipes=[GATEWAY_RECIPE],
        plan=Plan(groups=[Group(recipe=GATEWAY_RECIPE, nodes=[node])]),
        ranks=[RankRef(node=node, name="g0.0.head", group="g0", rank=0, role="head")],
        endpoints=[Endpoint(group="g0", node=node, host="127.0.0.1", port=port)],
    )


def test_gateways_on_nodes_are_read_from_the_workload_record(fake, gateway):
    """A launched gateway is reached through the reach (a tunnel in the app), held while it stays recorded."""
    gw = gateway(config_for([fake("s").url], [fake("l").url]))
    records = [gateway_record("switchyard-1", "spark-1", 8400)]
    opened, closed = [], []

    @contextmanager
    def reach(endpoint: Endpoint):
        opened.append(endpoint.node)
        try:
            yield gw.url  # where a tunnel to spark-1:8400 would listen
        finally:
            closed.append(endpoint.node)

    watch = GatewayWatch(reach=lambda: reach, records=lambda: records, urls=list, announced=list)
    try:
        (reading,), _ = watch.poll()
        assert reading.origin == "workload" and reading.label == "switchyard-1 on spark-1"
        assert reading.problem is None and set(reading.live.pools) == {"small", "large"}
        watch.poll()
        assert opened == ["spark-1"] and closed == []  # one way in, kept between polls
        records.clear()
        assert watch.poll() == ([], [])
        assert closed == ["spark-1"]
    finally:
        watch.close()


def test_a_workload_gateway_that_wants_a_key_says_the_app_has_none(fake, gateway, monkeypatch):
    """Its config went to the node inline: the app cannot know its key, and must not ask to export it."""
    monkeypatch.setenv("SY_NODE_KEY", "sesame")
    gw = gateway(config_for([fake("s").url], [fake("l").url], listen={"api_key_env": "SY_NODE_KEY"}))

    @contextmanager
    def reach(endpoint: Endpoint):
        yield gw.url

    records = [gateway_record("switchyard-1", "spark-1", 8400)]
    watch = GatewayWatch(reach=lambda: reach, records=lambda: records, urls=list, announced=list)
    try:
        (reading,), _ = watch.poll()
        assert reading.live is None and "switchyard-1 on spark-1" in reading.problem
        assert "has none for a gateway launched on a node" in reading.problem
        assert "export" not in reading.problem
    finally:
        watch.close()


def test_a_workload_gateway_without_a_way_to_the_nodes_says_so():
    watch = GatewayWatch(records=lambda: [gateway_record("w", "spark-2", 8400)], urls=list, announced=list)
    try:
        (reading,), _ = watch.poll()
        assert "no way to reach the nodes" in reading.problem
    finally:
        watch.close()


def test_watched_urls_are_kept_in_a_file():
    assert load_watched() == []
    assert add_watched(" http://10.0.0.5:8400/v1/ ") == "http://10.0.0.5:8400"
    add_watched("http://10.0.0.5:8400/metrics")
    add_watched("http://10.0.0.6:8400")
    assert load_watched() == ["http://10.0.0.5:8400", "http://10.0.0.6:8400"]
    remove_watched("http://10.0.0.5:8400")
    assert load_watched() == ["http://10.0.0.6:8400"]
    with pytest.raises(SwitchyardError, match="not a gateway address"):
        add_watched("10.0.0.7")


@pytest.mark.engine
def test_real_engines_behind_the_gateway_show_in_the_scrape(small_replicas, large_replica, gateway):
    config = config_for(
        [s.base_url for s in small_replicas],
        [large_replica.base_url],
        {"kind": "fixed_share", "large_share": 0.5},
    )
    gw = gateway(config)
    watch = only_urls(gw.url)
    try:
        watch.poll()
        with httpx.Client(timeout=120) as client:
            for _ in range(4):
                body = {
                    "model": "switchyard",
                    "messages": [{"role": "user", "content": "Say something."}],
                    "max_tokens": 6,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                assert client.post(f"{gw.url}/v1/chat/completions", json=body).status_code == 200
        (reading,), _ = watch.poll()
        small, large = reading.live.pools["small"], reading.live.pools["large"]
        # Fixed share 1/2: exactly every other request goes large.
        assert (small.requests, large.requests) == (2, 2)
        assert small.recent_share == 0.5 and large.share == 0.5
        assert small.output_tokens == 12 and large.output_tokens == 12  # 2 answers x 6 tokens each
        # Over the gateway's 10 s window: at most all 12 tokens; the last answer is surely inside it.
        assert 0 < large.tokens_per_s <= 1.2 and small.tokens_per_s <= 1.2
        assert large.ttft_recent and small.ttft_recent
        assert (small.replicas_up, large.replicas_up) == (2, 1)
    finally:
        watch.close()
