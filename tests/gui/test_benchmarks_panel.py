"""The Benchmarks tab offscreen, over a history filled through the core's own recording API.

The last tests drive a real llama-benchy from the tab's Run path against the
fake OpenAI server (tests/core/bench/fixtures.py): progress, the stored run,
and Cancel keeping a partial run.
"""

from __future__ import annotations

import json

import pytest

from sparksync.core.bench.bounds import run_bounds
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.recording import store
from sparksync.core.bench.runner import BenchRequest
from sparksync.core.bench.telemetry import TelemetrySummary
from sparksync.core.planner.model import ModelSpec
from tests.core.bench.records import inference_run
from tests.engines.conftest import _tiny_models_dir, _tiny_tokenizer, llama_binaries, tiny_model  # noqa: F401
from tests.engines.engine_procs import free_port, running, wait_http_ready

pytestmark = pytest.mark.gui

QWEN_27B = ModelSpec(name="Qwen3.8-27B-NVFP4", params=27e9, quant="nvfp4", layers=64, kv_heads=8, head_dim=128,
                     hidden=5120, attention_heads=64)
WAIT_MS = 20_000


def bounded(record):
    """``record`` with the planner's bounds, as recording.inference_record stores them."""
    bounds = run_bounds(QWEN_27B, record.profile, record.context.cluster_size)
    summary = record.summary.model_copy(update={"decode_bound_tps": bounds.headline.decode_tps,
                                                "prefill_bound_tps": bounds.headline.prefill_tps})
    return record.model_copy(update={"bounds": bounds, "summary": summary})


@pytest.fixture
def history(tmp_path):
    """A sweep at 1, 2 and 4 nodes (the published 27 B figures' shape), a partial run and a lone run."""
    store_ = HistoryStore(tmp_path / "bench.sqlite3")
    telemetry = TelemetrySummary(peak_memory_bytes=int(98.2e9), mean_link_bytes_per_s=2.5e9, energy_joules=12_300,
                                 sample_count=120, nodes=("spark-1", "spark-2"), seconds=60)
    ids = {}
    for minutes, (size, decode, prefill) in enumerate([(1, 11.86, 1500.0), (2, 21.0, 2200.0), (4, 36.5, 2600.0)]):
        record = bounded(inference_run(size, decode, prefill, minutes=minutes, sweep_id="sweep-a",
                                       topology="switch"))
        if size == 2:
            record = record.model_copy(update={"context": record.context.model_copy(update={"telemetry": telemetry})})
        ids[size] = store(store_, record).id
    ids["partial"] = store(store_, inference_run(1, 10.0, 1400.0, minutes=10, status="partial",
                                                 label="cancelled")).id
    ids["lone"] = store(store_, inference_run(8, 52.58, 2910.0, minutes=11, topology="ring")).id
    return store_, ids


@pytest.fixture
def panel(qtbot, history):
    from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel

    widget = BenchmarksPanel(history[0].path)
    qtbot.addWidget(widget)
    widget.resize(1300, 800)
    with qtbot.waitSignal(widget.runs_loaded, timeout=WAIT_MS):
        widget.show()  # the first show reads the history, in a worker
    yield widget
    widget.cancel_run()
    assert widget.wait(60)


def cell(panel, row: int, column: str) -> str:
    return panel.runs.text(row, column)


def test_runs_are_listed_newest_first_with_partial_runs_marked(panel, history):
    _, ids = history
    assert panel.runs.rowCount() == 5
    assert [item.id for item in panel.runs.items] == [ids["lone"], ids["partial"], ids[4], ids[2], ids[1]]
    assert cell(panel, 1, "status") == "⚠ partial"
    assert cell(panel, 0, "tok/s") == "52.58" and cell(panel, 0, "topology") == "ring"
    assert cell(panel, 4, "% of bound").endswith(" % (1 node)")  # the sweep runs carry the planner's bound, named
    assert cell(panel, 0, "% of bound") == "—"  # this one has none


def test_a_run_shows_its_figures_beside_the_bound_and_its_telemetry(qtbot, panel, history):
    _, ids = history
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS) as shown:
        panel.runs.select_id(ids[2])
    record = shown.args[0]
    text = panel.details.toPlainText()
    assert record.id == ids[2]
    percent = f"{record.summary.decode_percent_of_bound:.1f} %"
    assert f"decode 21.00 tok/s ({percent} of the bound" in text
    assert "decode % of bound" in text and "TTFT 100.0 ms" in text
    assert "peak memory 98.2 GB" in text and "mean fabric traffic 20 Gb/s per node" in text
    assert "energy 12.30 kJ" in text and "60 s of spark-1, spark-2" in text


def test_a_partial_run_says_so(qtbot, panel, history):
    _, ids = history
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS):
        panel.runs.select_id(ids["partial"])
    assert "partial run" in panel.details.toPlainText()
    assert "none was recorded" in panel.details.toPlainText()


def test_a_sweep_run_opens_the_sweeps_scaling_chart(qtbot, panel, history):
    _, ids = history
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS):
        panel.runs.select_id(ids[4])
    assert panel.views.currentIndex() == 0  # a selected run opens in Details
    with qtbot.waitSignal(panel.scaling_shown, timeout=WAIT_MS) as shown:
        panel.views.setCurrentIndex(1)  # the Scaling tab is the one way to the chart
    report = shown.args[0]
    assert [r.cluster_size for r in report.rows] == [1, 2, 4]
    xs, ys = panel.chart.curves["decode"].getData()
    assert list(xs) == [1, 2, 4] and list(ys) == pytest.approx([11.86, 21.0, 36.5])
    _, speedups = panel.chart.curves["decode speed-up"].getData()
    assert speedups[-1] == pytest.approx(36.5 / 11.86)
    assert "bound (planner)" in panel.chart.curves and "prefill speed-up" in panel.chart.curves
    headers = [panel.scaling_table.horizontalHeaderItem(c).text() for c in range(panel.scaling_table.columnCount())]
    efficiency = panel.scaling_table.item(2, headers.index("efficiency")).text()
    assert efficiency == f"{36.5 / (4 * 11.86):.1%}"


def test_a_run_outside_a_sweep_says_how_to_get_a_chart(qtbot, panel, history):
    _, ids = history
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS):
        panel.runs.select_id(ids["lone"])
    with qtbot.waitSignal(panel.error_raised, timeout=WAIT_MS) as error:
        panel.views.setCurrentIndex(1)
    assert "scale sweep" in error.args[0]


def test_the_toolbar_has_no_second_way_to_scaling_or_compare(panel):
    from PySide6.QtWidgets import QPushButton

    texts = {b.text() for b in panel.findChildren(QPushButton)}
    assert "Scaling" not in texts and "Compare" not in texts
    assert [panel.views.tabText(i) for i in range(panel.views.count())] == ["Details", "Scaling", "Compare",
                                                                             "Switchyard"]  # fmt: skip


def test_two_runs_compare_side_by_side(qtbot, panel, history):
    _, ids = history
    panel.views.setCurrentIndex(2)
    with qtbot.waitSignal(panel.comparison_shown, timeout=WAIT_MS) as shown:
        panel.runs.select_ids([ids["lone"], ids[1]])
    comparison = shown.args[0]
    line = next(ln for ln in comparison.lines if ln.metric == "decode tok/s")
    assert line.ratio == pytest.approx(52.58 / 11.86)
    rows = {panel.compare_table.item(r, 0).text(): r for r in range(panel.compare_table.rowCount())}
    assert panel.compare_table.item(rows["decode tok/s"], 3).text() == f"{52.58 / 11.86:.2f}x"
    assert panel.compare_table.item(rows["topology"], 1).text() == "switch"
    assert panel.compare_table.item(rows["topology"], 2).text() == "ring"


def test_exports_write_csv_json_markdown_and_a_png_of_the_chart(qtbot, panel, history, tmp_path):
    _, ids = history
    with qtbot.waitSignal(panel.scaling_shown, timeout=WAIT_MS):
        panel.show_scaling([ids[1]])
    written = {}
    for fmt in ("csv", "json", "md", "png"):
        with qtbot.waitSignal(panel.exported, timeout=WAIT_MS) as done:
            panel.export_to(fmt, tmp_path / f"scaling.{fmt}")
        written[fmt] = done.args[0]
    assert written["csv"].read_text().splitlines()[0].startswith("nodes,run,status")
    assert [r["cluster_size"] for r in json.loads(written["json"].read_text())["rows"]] == [1, 2, 4]
    assert "## Scaling of qwen" in written["md"].read_text()
    png = written["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000  # a drawn chart, not an empty image


def test_a_run_exports_as_markdown_with_its_bound(qtbot, panel, history, tmp_path):
    _, ids = history
    with qtbot.waitSignal(panel.run_shown, timeout=WAIT_MS):
        panel.open_run(ids[1])
    with qtbot.waitSignal(panel.exported, timeout=WAIT_MS) as done:
        panel.export_to("md", tmp_path / "run.md")
    text = done.args[0].read_text()
    assert f"## Run {ids[1]}: qwen" in text and "decode % of bound" in text


def test_the_run_dialog_refuses_bad_input_in_plain_words(qtbot, panel):
    dialog = panel.open_run_dialog()
    dialog.model.setText("qwen")
    dialog.accept()  # no tokenizer
    assert "tokenizer" in dialog.problem.text() and dialog.isVisible()
    dialog.tokenizer.setText("/models/qwen/tokenizer.json")
    dialog.endpoint.setText("not a url")
    dialog.accept()
    assert "http" in dialog.problem.text()
    dialog.endpoint.setText("http://10.0.0.5:8000")
    dialog.profile.setCurrentText("custom")
    dialog.pp.setText("512, 2048")
    dialog.api_key.setText("k-1")
    request = dialog.build_request()
    assert request.endpoint.base_url == "http://10.0.0.5:8000/v1" and request.profile.pp == (512, 2048)
    assert request.endpoint.api_key == "k-1"
    dialog.reject()


# --- a real llama-benchy run from the tab ------------------------------------------------

TINY = BenchProfile.build(pp=(64,), tg=(4,), runs=2)


def _request(server, tokenizer, profile=TINY) -> BenchRequest:
    return BenchRequest(Endpoint.parse(server.base_url), server.settings.model, tokenizer, profile)


@pytest.mark.slow
def test_run_drives_llama_benchy_with_progress_and_stores_the_run(qtbot, panel, history, fake_server,
                                                                  tokenizer_json):
    progress = []
    with qtbot.waitSignal(panel.run_finished, timeout=180_000) as done:
        job = panel.start_run(_request(fake_server, tokenizer_json))
        job.progressed.connect(progress.append)
        assert panel.cancel_button.isVisible() and not panel.run_button.isEnabled()
    record = done.args[0]
    assert record.status == "complete", record.error
    assert record.summary.decode_tps and record.summary.decode_tps > 0
    assert progress and progress[-1].fraction == 1.0 and panel.progress.value() == panel.progress.maximum()
    assert HistoryStore(history[0].path).get(record.id).status == "complete"
    qtbot.waitUntil(lambda: any(item.id == record.id for item in panel.runs.items), timeout=WAIT_MS)
    assert f"Run {record.id}" in panel.details.toPlainText()
    assert not panel.cancel_button.isVisible() and panel.run_button.isEnabled()


@pytest.mark.slow
def test_cancel_stops_the_run_and_keeps_what_finished_as_partial(qtbot, panel, make_fake, tokenizer_json):
    server = make_fake(token_delay_s=0.02)
    # Streams: 2 preflight, warmup + 3 runs of tg 16, then tg 32's warmup: Cancel during tg 32's first run.
    profile = BenchProfile.build(pp=(128,), tg=(16, 32), runs=3)
    with qtbot.waitSignal(panel.run_finished, timeout=180_000) as done:
        job = panel.start_run(_request(server, tokenizer_json, profile))
        qtbot.waitUntil(lambda: server.counters.streams_finished >= 2 + 5, timeout=120_000)
        panel.cancel_run()  # the button's slot, from the GUI thread
    record = done.args[0]
    assert job.runner.cancel_requested
    assert record.status == "partial" and record.error.startswith("cancelled after 3 of 6"), record.error
    assert "partial" in panel.progress_label.text()
    qtbot.waitUntil(lambda: bool(panel.runs.items) and panel.runs.items[0].id == record.id, timeout=WAIT_MS)
    assert cell(panel, 0, "status") == "⚠ partial"


def test_a_run_that_cannot_start_says_why(qtbot, panel, tokenizer_json):
    request = BenchRequest(Endpoint.parse("http://127.0.0.1:9/v1"), "qwen", tokenizer_json, TINY)
    with qtbot.waitSignal(panel.error_raised, timeout=60_000) as error:
        panel.start_run(request)
    assert "127.0.0.1:9" in error.args[0]
    assert panel.run_button.isEnabled()


def test_the_windows_benchmarks_tab_lists_the_default_history(qtbot, window):
    """In the app, the tab reads the history in SPARKSYNC_HOME the first time it is shown."""
    stored = store(HistoryStore(), inference_run(1, 11.86, 1500.0))
    with qtbot.waitSignal(window.benchmarks.runs_loaded, timeout=WAIT_MS) as loaded:
        window.tabs.setCurrentWidget(window.benchmarks)
    assert [item.id for item in loaded.args[0]] == [stored.id]
    assert window.benchmarks.wait(30)


# The tiny model decodes a token in about 0.25 ms: 32 tokens took 7 ms, often all read by llama-benchy at
# once on a busy machine, and it then has no decode time to divide by (decode_tps None). 512 tokens span
# over 100 ms, many reads apart, like tests/core/bench's engine tests (which use long outputs too).
LONG_TG = 512


@pytest.mark.engine
@pytest.mark.slow
def test_run_against_a_real_llama_server(qtbot, panel, llama_binaries, tiny_model, tmp_path):  # noqa: F811
    """The whole path from the tab: real llama-server (tiny model, CPU), real llama-benchy, stored run."""
    port = free_port()
    cmd = [str(llama_binaries.llama_server), "-m", str(tiny_model.gguf), "--alias", tiny_model.name,
           "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-np", "2", "-t", "1"]
    with running(cmd, tmp_path / "llama-server.log", port) as engine:
        wait_http_ready(engine, "/health")
        profile = BenchProfile.build(pp=(256,), tg=(LONG_TG,), runs=2, exact_tg=True)
        request = BenchRequest(Endpoint.parse(engine.base_url), tiny_model.name, tiny_model.tokenizer_json, profile)
        with qtbot.waitSignal(panel.run_finished, timeout=240_000) as done:
            panel.start_run(request)
    record = done.args[0]
    assert record.status == "complete", (record.error, record.details.log_tail)
    assert record.summary.decode_tps and record.summary.prefill_tps, record.details.warnings
    assert record.result["benchmarks"][0]["prompt_size"] == 256
    assert record.context.engine_version  # llama.cpp's build, read from the server as `bench run` does
    qtbot.waitUntil(lambda: bool(panel.runs.items) and panel.runs.items[0].id == record.id, timeout=WAIT_MS)
    assert cell(panel, 0, "status") == "complete"


@pytest.mark.slow
def test_a_run_from_the_window_draws_its_tokens_per_second_on_the_dashboard(qtbot, window, fake_server,
                                                                             tokenizer_json):
    from sparksync.core.telemetry.dashboard_series import CLUSTER, tokens_series

    panel = window.benchmarks
    with qtbot.waitSignal(panel.run_finished, timeout=180_000) as done:
        panel.start_run(_request(fake_server, tokenizer_json, BenchProfile.build(pp=(64,), tg=(16,), runs=2)))
    assert done.args[0].status == "complete"
    assert window.model.latest(CLUSTER, tokens_series("benchmark")) > 0
    assert panel.wait(30)


@pytest.mark.slow
def test_run_last_repeats_the_newest_run(qtbot, panel, fake_server, tokenizer_json):
    with qtbot.waitSignal(panel.run_finished, timeout=180_000) as first:
        panel.start_run(_request(fake_server, tokenizer_json))
    with qtbot.waitSignal(panel.run_finished, timeout=180_000) as again:
        panel.run_last()
    a, b = first.args[0], again.args[0]
    assert b.id != a.id and b.status == "complete"
    assert (b.endpoint, b.model, b.profile, b.details.tokenizer) == (a.endpoint, a.model, a.profile,
                                                                     a.details.tokenizer)


def test_run_last_with_no_run_says_so(qtbot, tmp_path):
    from sparksync.gui.benchmarks.benchmarks_panel import BenchmarksPanel

    empty = BenchmarksPanel(tmp_path / "empty.sqlite3")
    qtbot.addWidget(empty)
    with qtbot.waitSignal(empty.error_raised, timeout=WAIT_MS) as error:
        empty.run_last()
    assert "no benchmark has run yet" in error.args[0]
    assert empty.wait(10)
