"""The Topology tab as the cluster assistant, over a scripted core: drawing, problems, plan, apply, progress, figures."""

from __future__ import annotations

import threading
import time

import pytest

from sparksync.core.fabric import FabricPlan, StoredFabric, PlanState, build_cabling, classify, make_plan
from sparksync.core.fabric.assistant import StepEvent, fabric_health
from sparksync.core.fabric.check_results import FabricCheckReport, LinkCheck, Measurement, Verdict
from sparksync.core.fabric.operations import ApplyReport, Detection, NodeOutcome
from tests.core.fabric.reports import Cabling

pytestmark = pytest.mark.gui

NODES = ["n1", "n2", "n3", "n4"]


def detection(speeds=None) -> Detection:
    cabling = Cabling(NODES).ring()
    cabling.speed_mbps.update(speeds or {})
    reports = cabling.reports()
    return Detection(reports, classify(build_cabling(reports)), 0.4)


def check_report(slow: str | None = "n3") -> FabricCheckReport:
    links = []
    for i, a in enumerate(NODES):
        b = NODES[(i + 1) % len(NODES)]
        gbps = 40.0 if slow in (a, b) else 150.0
        verdict = Verdict.degraded if gbps < 100 else Verdict.passed
        links.append(LinkCheck(
            key=f"{a}--{b}", a=f"{a}:enp1s0f1np1", b=f"{b}:enp1s0f0np0", a_address="10.0.0.1", b_address="10.0.0.2",
            subnet="10.0.0.0/24", line_rate_gbps=200, mtu=9000, measurements=[
                Measurement(test="iperf3", where=f"{a} -> {b}", verdict=verdict, value=gbps, unit="Gb/s", mark=100,
                            percent_of_line=gbps / 2, detail="below 100 Gb/s" if verdict is Verdict.degraded else ""),
                Measurement(test="ib_write_bw", where=f"{a} -> {b}", verdict=Verdict.not_run,
                            detail="not run: install perftest")]))
    return FabricCheckReport(topology="ring", nodes=NODES, links=links, duration_s=31.0)


class ScriptedAssistant:
    """The core's ClusterAssistant, answering from fixtures, telling progress from its worker thread."""

    def __init__(self, stored: StoredFabric, latest: FabricCheckReport | None, found: Detection):
        self._stored, self._latest, self._found = stored, latest, found
        self.on_progress = None
        self.calls: list[tuple] = []
        self.threads: set[str] = set()

    def _step(self, name: str, step: str) -> None:
        self.threads.add(threading.current_thread().name)
        for node in NODES:
            self.on_progress(StepEvent(node, step, "running"))
            self.on_progress(StepEvent(node, step, "done", f"{node} {step} ok"))
        self.calls.append((name,))

    def stored(self):
        self.threads.add(threading.current_thread().name)
        return self._stored

    def latest_check(self):
        return self._latest

    def detect(self):
        self._step("detect", "detect")
        return self._found

    def plan(self, found):
        self.calls.append(("plan", found))
        reports = found.reports
        return make_plan(found.topology, reports)

    def apply(self, plan, password):
        self._step("apply", "apply")
        self.calls.append(("password", password))
        return ApplyReport("apply", plan.plan_id, {n: NodeOutcome(n, True) for n in NODES}, 1.0)

    def check(self):
        self._step("check", "iperf3")
        return check_report()

    def mesh(self):
        self._step("mesh", "config")
        return type("R", (), {"keys": {n: "k" for n in NODES}})()

    def mesh_check(self):
        self._step("mesh check", "check")
        return type("R", (), {"ok": True, "checked": [1] * 24, "failed": []})()


def stored_plan(applied: bool) -> StoredFabric:
    found = detection()
    plan = make_plan(found.topology, found.reports)
    return StoredFabric(plan=plan, state=PlanState.applied if applied else PlanState.planned,
                        applied=plan if applied else None)


@pytest.fixture
def assistant(qtbot):
    from sparksync.gui.topology.cluster_assistant import ClusterAssistantView

    def make(core):
        view = ClusterAssistantView(lambda: None, core=core)
        qtbot.addWidget(view)
        view.resize(1280, 760)
        return view

    return make


def test_the_stored_plan_and_newest_check_are_drawn_and_a_degraded_fabric_is_told(qtbot, assistant):
    core = ScriptedAssistant(stored_plan(applied=True), check_report(), detection())
    view = assistant(core)
    told = []
    view.fabric_health_changed.connect(told.append)
    view.show()
    qtbot.waitUntil(lambda: view.canvas.drawing is not None and view.report is not None, timeout=10_000)
    assert "MainThread" not in core.threads  # every read ran in a worker
    drawing = view.canvas.drawing
    assert sorted(drawing.nodes) == NODES and len(drawing.edges) == 4
    marked = sorted(e.key for e in drawing.edges if view.canvas.is_marked(e.key))
    assert len(marked) == 2 and all("n3" in key for key in marked)
    label = view.canvas.label_of(marked[0])
    assert "⚠ iperf3" in label and "40 Gb/s (20 % of line)" in label
    assert told == [fabric_health(check_report())] and told[0].startswith("Fabric degraded: 2 of 4 links flagged")
    rows = view.figure_rows()
    assert ["n2 ↔ n3 (enp1s0f1np1)", "iperf3", "n2 -> n3", "40 Gb/s", "20 %",
            "degraded: below 100 Gb/s"] in rows
    assert any(r[1] == "ib_write_bw" and r[5] == "not run: install perftest" for r in rows)
    healthy = [e for e in drawing.edges if e.key not in marked]
    assert all(view.canvas.label_of(e.key) == "TCP ≥ 150 Gb/s\n(75 % of line)" for e in healthy)
    assert view.buttons["check"].isEnabled() and view.buttons["mesh"].isEnabled()
    assert not view.apply_button.isEnabled()  # already applied


def test_detect_marks_problems_plan_shows_then_apply_asks_the_password_once(qtbot, assistant):
    core = ScriptedAssistant(StoredFabric(), None, detection({("n2", 0): 100_000}))
    view = assistant(core)
    view.show()
    qtbot.waitUntil(lambda: view._loaded and not view.jobs.busy(), timeout=10_000)
    assert not view.buttons["plan"].isEnabled() and not view.apply_button.isEnabled()
    qtbot.mouseClick(view.buttons["detect"], __import__("PySide6.QtCore", fromlist=["Qt"]).Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.detection is not None, timeout=10_000)
    assert any("100" in view.problems.item(i).text() for i in range(view.problems.count()))
    slow = [e for e in view.canvas.drawing.edges if e.problems]
    assert slow and all(view.canvas.is_marked(e.key) for e in slow)
    assert [state for _step, state in view.progress_of("n2")] == ["running", "done"]
    view.make_plan()
    qtbot.waitUntil(lambda: view.plan is not None, timeout=10_000)
    assert "enp1s0f0np0" in view.plan_text.toPlainText() and "NCCL_IB_HCA=" in view.plan_text.toPlainText()
    assert view.apply_button.isEnabled()
    asked = []
    view.ask_password = lambda: asked.append(1) or "s3cret"
    view.apply()
    qtbot.waitUntil(lambda: view.applied, timeout=10_000)
    assert asked == [1] and ("password", "s3cret") in core.calls
    assert view.buttons["check"].isEnabled() and not view.apply_button.isEnabled()
    view.check()
    qtbot.waitUntil(lambda: view.report is not None, timeout=10_000)
    assert view.side_tabs.currentWidget() is view.figures and view.health is not None
    assert [state for step, state in view.progress_of("n4")] == ["running", "done"]


def test_a_cancelled_password_applies_nothing(qtbot, assistant):
    core = ScriptedAssistant(stored_plan(applied=False), None, detection())
    view = assistant(core)
    view.show()
    qtbot.waitUntil(lambda: view.plan is not None, timeout=10_000)
    view.ask_password = lambda: None
    view.apply()
    time.sleep(0.2)
    assert not view.jobs.busy() and ("apply",) not in core.calls
