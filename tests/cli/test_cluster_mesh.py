"""`sparksync cluster mesh | check` without nodes: refusals, the stored checks' listing, the text of a report."""

from __future__ import annotations

import json

from click.testing import CliRunner

from sparksync.cli.cluster_mesh import check_text, mesh_text
from sparksync.cli.main import cli
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.mesh import MeshCheckReport, MeshPairResult
from tests.gui.test_cluster_assistant import check_report


def test_mesh_and_check_refuse_without_an_applied_plan():
    for args in (["cluster", "mesh"], ["cluster", "mesh", "check"], ["cluster", "check"]):
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 2 and "sparksync cluster plan" in done.output, args  # the fabric's errors: 2


def test_the_stored_checks_are_listed_newest_first():
    history = FabricCheckHistory()
    first, second = history.add(check_report(slow=None)), history.add(check_report(slow="n3"))
    done = CliRunner().invoke(cli, ["cluster", "check", "--list", "--json"])
    rows = json.loads(done.output)
    assert [(r["id"], r["verdict"]) for r in rows] == [(second, "degraded"), (first, "pass")]
    text = CliRunner().invoke(cli, ["cluster", "check", "--list"]).output
    assert "degraded" in text.splitlines()[0] and "slowest TCP 40 Gb/s" in text


def test_a_report_reads_link_by_link_with_its_figures_and_what_did_not_run():
    text = check_text(check_report(slow="n3"), 7)
    assert "DEGRADED n2:enp1s0f1np1 (10.0.0.1) <-> n3:enp1s0f0np0 (10.0.0.2), line rate 200 Gb/s" in text
    assert "iperf3 n2 -> n3: degraded 40 Gb/s (20 % of line rate): below 100 Gb/s" in text
    assert "ib_write_bw n1 -> n2: not run: install perftest" in text
    assert "PASS     n1:enp1s0f1np1" in text  # what did not run leaves a link's verdict to what did
    assert text.splitlines()[-1].startswith("Fabric check 7: degraded")
    report = MeshCheckReport((MeshPairResult("n1", "n2", "10.0.0.2", True),
                              MeshPairResult("n1", "n3", None, False, "no fabric link between them"),
                              MeshPairResult("n2", "n1", "10.0.0.1", False, "Host key verification failed.")))
    lines = mesh_text(report).splitlines()
    assert lines[1] == "FAILED  n2 -> n1 at 10.0.0.1: Host key verification failed."
    assert "1 ordered pair(s) share no fabric link" in lines[2] and lines[-1].endswith("1 of 2 failed (2 ssh logins over the fabric).")
