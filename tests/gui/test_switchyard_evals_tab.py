"""The Benchmarks panel's Switchyard tab over evals played for real through the gateway and stored in SQLite.

The replicas are the scripted OpenAI servers of tests/switchyard (the lab test
plays the same cases against real llama.cpp pools); what is checked here is
that what `switchyard eval` stores reaches the panel: the list, the headline
and each case's outcome.
"""

from __future__ import annotations

import pytest

from sparksync.core.bench.history import HistoryStore
from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel
from sparksync.switchyard.eval.cases import example_cases_path
from sparksync.switchyard.eval.history import EvalHistory
from sparksync.switchyard.eval.play import play
from tests.switchyard.conftest import _servers, config_for, fake  # noqa: F401  (fixtures)
from tests.switchyard.test_eval import CASES, pools  # noqa: F401  (fixture)

pytestmark = pytest.mark.gui
WAIT_MS = 20_000


@pytest.fixture
def panel(qtbot, tmp_path):
    widget = BenchmarksPanel(tmp_path / "bench.sqlite3")
    qtbot.addWidget(widget)
    yield widget
    widget.wait()


def _stored_eval(pools, path, policy: dict) -> int:  # noqa: F811
    small, large = pools
    report = play(config_for([small.url], [large.url], policy=policy), CASES, example_cases_path(),
                  concurrency=4, max_tokens=64)
    return EvalHistory(HistoryStore(path)).add(report)


def test_the_tab_lists_stored_evals_and_opens_one(qtbot, panel, pools, tmp_path):  # noqa: F811
    first = _stored_eval(pools, panel.history_path, {"kind": "cascade"})
    second = _stored_eval(pools, panel.history_path, {"kind": "rules"})
    tab = panel.switchyard
    with qtbot.waitSignal(tab.evals_loaded, timeout=WAIT_MS) as listed:
        panel.show()
    assert [item.id for item in listed.args[0]] == [second, first]  # newest first
    table = tab.table
    assert table.rowCount() == 2
    newest = listed.args[0][0]
    assert [table.item(0, c).text() for c in (0, 2, 3, 4, 5)] == [str(second), "rules", "21", "4",
                                                                   f"{newest.score_gateway:.1f}"]
    # The cascade escalates every wrong small answer, so it keeps the large model's score.
    assert [table.item(1, c).text() for c in (2, 5, 6, 9)] == ["cascade", "100.0", "100.0", "yes"]
    assert table.item(1, 8).text().endswith("x")  # the throughput gain over large-only
    with qtbot.waitSignal(tab.eval_shown, timeout=WAIT_MS) as shown:
        table.selectRow(1)
    report = shown.args[0]
    assert report.policy == "cascade"
    text = tab.details.toPlainText()
    assert report.gain.summary in text and "at score parity (100 against 100)" in text
    assert "large only: each case" in text and CASES.cases[0].id in text


def test_an_empty_history_says_how_to_fill_it(qtbot, panel):
    with qtbot.waitSignal(panel.switchyard.evals_loaded, timeout=WAIT_MS):
        panel.show()
    assert panel.switchyard.table.rowCount() == 0
    assert "sparksync switchyard eval --cases FILE" in panel.switchyard.details.toPlainText()


def test_refresh_picks_up_an_eval_stored_meanwhile(qtbot, panel, pools):  # noqa: F811
    with qtbot.waitSignal(panel.switchyard.evals_loaded, timeout=WAIT_MS):
        panel.show()
    eval_id = _stored_eval(pools, panel.history_path, {"kind": "fixed_share", "large_share": 0.25})
    with qtbot.waitSignal(panel.switchyard.evals_loaded, timeout=WAIT_MS) as listed:
        panel.refresh_button.click()
    assert [item.id for item in listed.args[0]] == [eval_id]
