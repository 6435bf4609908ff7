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


@pytest.fixture
def sweep_pools(fake):  # noqa: F811
    from tests.switchyard.suite_answers import bfcl_scripts
    from tests.switchyard.test_sweep import CASES as SUITE
    from tests.switchyard.test_sweep import LARGE_DELAY_S

    small, large = bfcl_scripts(SUITE, large_delay_s=LARGE_DELAY_S)
    return fake("small", small), fake("large", large)


def test_the_sweeps_page_charts_a_stored_sweep_beside_the_published_points(qtbot, panel, sweep_pools, tmp_path):
    from sparksync.switchyard.eval.history import SweepHistory
    from sparksync.switchyard.eval.sweep import SweepSpec, run_sweep
    from tests.switchyard.test_sweep import CASES as SUITE
    from tests.switchyard.test_sweep import ONE_STREAM

    small, large = sweep_pools
    config = config_for([small.url], [large.url], policy={"kind": "fixed_share", "large_share": 1})
    report = run_sweep(config, SUITE, SweepSpec.parse("large_share=1,1/2,0"), ONE_STREAM, case_file="bfcl")
    sweep_id = SweepHistory(HistoryStore(panel.history_path)).add(report)
    sweeps = panel.switchyard.sweeps
    with qtbot.waitSignal(sweeps.sweeps_loaded, timeout=WAIT_MS) as listed:
        panel.show()
    assert [item.id for item in listed.args[0]] == [sweep_id]
    assert [sweeps.table.item(0, c).text() for c in (2, 3, 4, 5)] == ["fixed_share", "large_share=1,1/2,0", "6",
                                                                      "100.0"]  # fmt: skip
    assert not sweeps.png_button.isEnabled()
    with qtbot.waitSignal(sweeps.sweep_shown, timeout=WAIT_MS):
        sweeps.table.selectRow(0)
    chart = sweeps.chart
    assert chart.data is not None and chart.data.parity_score == 100
    assert chart.labels[:2] == ["published: 1.5x at 1/2 large", "published: 3.0x at 1/4 large"]
    assert "large_share=1 (anchor)" in chart.labels and any(t.startswith("large_share=0 (0% large") for t in chart.labels)
    assert "no setting kept large-only's score (100)" in sweeps.details.toPlainText()
    assert sweeps.png_button.isEnabled() and sweeps.csv_button.isEnabled()
    for export, name in ((sweeps.export_png, "sweep.png"), (sweeps.export_csv, "sweep.csv")):
        with qtbot.waitSignal(sweeps.exported, timeout=WAIT_MS) as written:
            export(tmp_path / name)
        assert written.args[0] == str(tmp_path / name) and (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
