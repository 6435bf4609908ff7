"""The summary table deploy prints at the end, and the JSON of each result."""

from __future__ import annotations

from sparksync.core.deploy.many import summary_table
from sparksync.core.deploy.model import DeployResult, Outcome

RESULTS = [
    DeployResult("spark-01", Outcome.DEPLOYED, "0.1.1", "systemd-user", 12.34, previous_version="0.1.0"),
    DeployResult("n2", Outcome.UNCHANGED, "0.1.1", "supervised", 1.0),
    DeployResult("n3", Outcome.ROLLED_BACK, "0.1.0", "supervised", 30.0, "rolled back to 0.1.0: it crashed"),
    DeployResult("n4", Outcome.FAILED, None, None, 0.5, "n4: python3 was not found on the node"),
]


def test_one_row_per_node_with_aligned_columns_and_a_count():
    lines = summary_table(RESULTS).splitlines()
    assert lines[0].split() == ["NODE", "RESULT", "VERSION", "SERVICE", "TIME", "REASON"]
    assert lines[1].split() == ["spark-01", "deployed", "0.1.1", "systemd-user", "12.3s"]
    assert lines[3].split()[:5] == ["n3", "rolled-back", "0.1.0", "supervised", "30.0s"]
    assert lines[3].endswith("rolled back to 0.1.0: it crashed")
    assert lines[4].split()[:5] == ["n4", "failed", "-", "-", "0.5s"]
    assert len({line.index("RESULT") if i == 0 else None for i, line in enumerate(lines[:1])}) == 1
    starts = {line[lines[0].index("RESULT") :].split()[0] for line in lines[1:5]}
    assert starts == {"deployed", "unchanged", "rolled-back", "failed"}  # the column lines up
    assert lines[-1] == "2 of 4 node(s) run the agent; see REASON"


def test_all_good_says_so():
    assert summary_table(RESULTS[:2]).splitlines()[-1] == "2 of 2 node(s) run the agent"


def test_result_json():
    assert RESULTS[0].as_json() == {
        "node": "spark-01", "outcome": "deployed", "ok": True, "version": "0.1.1",
        "service_mode": "systemd-user", "seconds": 12.34, "reason": None, "previous_version": "0.1.0", "notes": [],
    }  # fmt: skip
    assert not RESULTS[2].ok and not RESULTS[3].ok and RESULTS[1].ok
