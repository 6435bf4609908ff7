"""A real scale sweep: llama.cpp split over 1, 2 and 4 "nodes" with its RPC backend, measured by llama-benchy.

Each extra node is an ``rpc-server`` process on loopback, standing in for a
Spark: llama-server (``-ngl 99``) moves the model's layers onto the RPC
devices, so every token's layers run across the processes, as they would
across the fabric. The sweep brings the model up at each size, runs the
same profile through the pinned llama-benchy, stores each run under one
sweep id, and reports the three sizes. (The same on lab nodes, launched
through the agents, waits for the workloads supervisor.)
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import pytest

from sparksync.core.bench.context import RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.exports import export_text
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.scale import ScaleSweep, SweepTarget
from tests.engines.engine_procs import free_port, listener_traffic, running, wait_http_ready, wait_port_open

pytestmark = [pytest.mark.engine, pytest.mark.slow]

# 128 generated tokens: long enough that llama-benchy times them apart even on a busy machine (it drops a
# run's decode figure when all its tokens arrive in one read).
PROFILE = BenchProfile.build(pp=(64,), tg=(128,), runs=3, exact_tg=True)


def test_a_sweep_over_one_two_and_four_rpc_nodes_reports_three_sizes(llama_binaries, tiny_model, tmp_path):
    rpc_traffic: dict[int, list[int]] = {}

    @contextmanager
    def bring_up(nodes: int):
        with ExitStack() as stack:
            rpc_ports = []
            for i in range(nodes - 1):
                port = free_port()
                cmd = [str(llama_binaries.rpc_server), "-H", "127.0.0.1", "-p", str(port), "-t", "1"]
                wait_port_open(stack.enter_context(running(cmd, tmp_path / f"rpc-{nodes}-{i}.log", port)))
                rpc_ports.append(port)
            http_port = free_port()
            cmd = [str(llama_binaries.llama_server), "-m", str(tiny_model.gguf), "--alias", tiny_model.name,
                   "--host", "127.0.0.1", "--port", str(http_port), "-c", "2048", "-np", "1", "-t", "1"]
            if rpc_ports:
                cmd += ["--rpc", ",".join(f"127.0.0.1:{p}" for p in rpc_ports), "-ngl", "99"]
            server = stack.enter_context(running(cmd, tmp_path / f"server-{nodes}.log", http_port))
            wait_http_ready(server, "/health")
            names = tuple(f"node-{i}" for i in range(nodes))
            yield SweepTarget(Endpoint.parse(server.base_url), tiny_model.name, tiny_model.tokenizer_json,
                              RunContext(cluster_size=nodes, topology="single" if nodes == 1 else "switch",
                                         collective_backend=None if nodes == 1 else "rpc", engine="llama.cpp",
                                         nodes=names))
            rpc_traffic[nodes] = [listener_traffic(p).received for p in rpc_ports]

    history = HistoryStore()
    result = ScaleSweep(bring_up, history, available_nodes=4, profile=PROFILE).run()

    assert result.skipped == {}, result.skipped
    assert [r.context.cluster_size for r in result.records] == [1, 2, 4]
    assert [r.status for r in result.records] == ["complete"] * 3, [r.error for r in result.records]
    assert all(r.summary.decode_tps for r in result.records), [r.details.warnings for r in result.records]
    # The split was real: every rpc-server received the tensors and activations of its share.
    assert len(rpc_traffic[2]) == 1 and len(rpc_traffic[4]) == 3
    assert all(received > 0 for received in rpc_traffic[2] + rpc_traffic[4]), rpc_traffic
    report = result.report
    assert [row.cluster_size for row in report.rows] == [1, 2, 4]
    assert report.rows[0].speedup == pytest.approx(1.0)
    assert all(row.throughput > 0 and row.speedup > 0 and row.efficiency > 0 for row in report.rows)
    # Each size carries its own bound (read from the GGUF the local server names), as a percentage.
    assert all(row.decode_percent_of_bound is not None for row in report.rows)
    # llama.cpp's RPC splits by layers: held to the layer split's bound, which is never above one node's.
    assert [row.bound_model for row in report.rows] == ["1 node", "layers×2", "layers×4"]
    assert report.rows[2].decode_bound_tps < report.rows[1].decode_bound_tps < report.rows[0].decode_bound_tps
    assert {item.id for item in history.list_runs(sweep_id=result.sweep_id)} == {r.id for r in result.records}
    table = export_text(report, "md")
    assert "| 4 |" in table and "decode % of bound" in table
