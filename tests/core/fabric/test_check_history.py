"""Fabric checks in the history: schema 5 (fabric_checks), migrated from 4, a renamed node's checks kept."""

from __future__ import annotations

import json
import sqlite3

from sparksync.core.bench import history as history_module
from sparksync.core.bench.history import MIGRATIONS, HistoryStore
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.check_results import FabricCheckReport, LinkCheck, Measurement, Verdict
from sparksync.core.nodes.registry import Registry
from tests.core.node_factory import paired_node


def report(tcp_gbps: float) -> FabricCheckReport:
    link = LinkCheck(key="n1:a--n2:a", a="n1:a", b="n2:a", a_address="10.100.0.1", b_address="10.100.0.2",
                     subnet="10.100.0.0/24", line_rate_gbps=200, mtu=9000, measurements=[
                         Measurement(test="iperf3", where="n1 -> n2", verdict=Verdict.degraded if tcp_gbps < 100
                                     else Verdict.passed, value=tcp_gbps, unit="Gb/s", mark=100,
                                     percent_of_line=tcp_gbps / 2),
                         Measurement(test="ib_write_bw", where="n1 -> n2", verdict=Verdict.not_run,
                                     detail="not run: install perftest")])
    return FabricCheckReport(topology="direct", nodes=["n1", "n2"], links=[link], duration_s=12.5)


def test_a_version_4_history_gets_the_fabric_checks_table_and_keeps_its_runs(tmp_path):
    path = tmp_path / "history.sqlite3"
    with sqlite3.connect(path) as conn:
        history_module.migrate(conn, path, MIGRATIONS[:4])  # as the previous SparkSync left it
        conn.execute("INSERT INTO runs (created_at, kind, status, model, cluster_size, nodes_json, node_ids_json) "
                     "VALUES ('2026-10-22T12:00:00+00:00', 'inference', 'complete', 'qwen', 1, '[]', '{}')")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
    store = HistoryStore(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5 == len(MIGRATIONS)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "fabric_checks" in tables and store.count() == 1
    checks = FabricCheckHistory(store)
    first, second = checks.add(report(150)), checks.add(report(40))
    rows = checks.list()
    assert [r.id for r in rows] == [second, first]
    assert (rows[0].verdict, rows[0].flagged, rows[0].not_run, rows[0].min_tcp_gbps) == ("degraded", 1, 1, 40)
    assert rows[1].verdict == "pass" and rows[1].duration_s == 12.5
    assert checks.get(first).links[0].figure("iperf3")[0].percent_of_line == 75
    assert checks.latest().links[0].figure("iperf3")[0].value == 40


def test_each_check_keeps_its_nodes_ids(tmp_path):
    registry = Registry()
    node = paired_node("n1")
    registry.add(node)
    store = HistoryStore(tmp_path / "h.sqlite3")
    check_id = FabricCheckHistory(store).add(report(150))
    with sqlite3.connect(store.path) as conn:
        (ids,) = conn.execute("SELECT node_ids_json FROM fabric_checks WHERE id = ?", (check_id,)).fetchone()
    assert json.loads(ids) == {"n1": node.node_id}
