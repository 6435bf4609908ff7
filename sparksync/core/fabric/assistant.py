"""The cluster assistant: one object over detect, plan, apply, mesh and check, and what to draw.

The GUI's Topology tab calls these methods in workers (each blocks on the
nodes) and draws ``drawing(...)``, a plain description of the cabling: a
node per place, an edge per cable (or per node's port on a switch), each
edge marked with the problems detection named and the acceptance figures of
its links. The tray reads ``fabric_health`` from the newest stored check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sparksync.core.fabric.check_results import FabricCheckReport, LinkCheck, Measurement, Verdict, worst

if TYPE_CHECKING:
    from sparksync.core.fabric.check import CheckOptions, CheckProgress
    from sparksync.core.fabric.mesh import MeshCheckReport, MeshProgress, MeshSetupResult
    from sparksync.core.fabric.operations import ApplyReport, Detection, FabricProgress
    from sparksync.core.fabric.plan import FabricPlan
    from sparksync.core.fabric.store import StoredFabric
    from sparksync.core.fleet.fleet import Fleet
    from sparksync.core.nodes.cluster_events import ClusterEvents

AnyProgress = Callable[[object], None]  # FabricProgress, MeshProgress or CheckProgress


@dataclass(frozen=True)
class StepEvent:
    """One line of per-node progress, whatever the step (the GUI lists them per node)."""

    node: str
    step: str
    state: str  # "running", "done", "failed"
    detail: str = ""


def as_step(event: object) -> StepEvent:
    from sparksync.core.fabric.operations import FabricProgress

    if isinstance(event, FabricProgress):
        state = {None: "running", True: "done", False: "failed"}[event.ok]
        return StepEvent(event.node, event.stage, state, event.message)
    return StepEvent(event.node, event.step, event.state, event.detail)  # type: ignore[attr-defined]


class ClusterAssistant:
    """Detect, plan, apply, mesh and check the fabric of the paired nodes (call each in a worker)."""

    def __init__(self, fleet: Callable[[], Fleet], on_progress: Callable[[StepEvent], None] | None = None, *,
                 line_rate_mbps: int | None = None, check_options: CheckOptions | None = None):
        self._fleet = fleet
        self.on_progress = on_progress
        self.line_rate_mbps = line_rate_mbps  # None: a CX-7 port's 200 Gb/s (detect's expected speed, the check's mark)
        self.check_options = check_options

    def _tell(self, event: object) -> None:
        if self.on_progress is not None:
            self.on_progress(as_step(event))

    def _names(self) -> list[str]:
        from sparksync.core.fabric.errors import FabricSetupError

        names = [n.name for n in self._fleet().nodes()]
        if len(names) < 2:
            raise FabricSetupError("A fabric needs two paired nodes or more: pair them in the Nodes tab first.")
        return names

    def stored(self) -> StoredFabric:
        from sparksync.core.fabric.store import FabricStore

        return FabricStore().load()

    def detect(self) -> Detection:
        from sparksync.core.fabric.operations import FabricOperations

        operations = FabricOperations(self._fleet(), self._tell)
        if self.line_rate_mbps is None:
            return operations.detect(self._names())
        return operations.detect(self._names(), self.line_rate_mbps)

    def plan(self, detection: Detection) -> FabricPlan:
        from sparksync.core.fabric.plan import make_plan
        from sparksync.core.fabric.store import FabricStore

        plan = make_plan(detection.topology, detection.reports)
        FabricStore().save_plan(plan)
        return plan

    def apply(self, plan: FabricPlan, sudo_password: str) -> ApplyReport:
        from sparksync.core.fabric.operations import FabricOperations
        from sparksync.core.fabric.store import FabricStore, PlanState

        report = FabricOperations(self._fleet(), self._tell).apply(plan, sudo_password)
        if report.ok:
            FabricStore().set_state(PlanState.applied)
        return report

    def mesh(self) -> MeshSetupResult:
        from sparksync.core.fabric.mesh import plan_mesh, setup_mesh
        from sparksync.core.fabric.node_shell import FleetShell

        fleet = self._fleet()
        return setup_mesh(FleetShell(fleet), plan_mesh(self.links(), fleet.registry), self._tell)

    def mesh_check(self) -> MeshCheckReport:
        from sparksync.core.fabric.mesh import check_mesh, plan_mesh
        from sparksync.core.fabric.node_shell import FleetShell

        fleet = self._fleet()
        return check_mesh(FleetShell(fleet), plan_mesh(self.links(), fleet.registry), self._tell)

    def check(self, options: CheckOptions | None = None) -> FabricCheckReport:
        from sparksync.core.fabric.check import CheckOptions, run_check
        from sparksync.core.fabric.check_history import FabricCheckHistory
        from sparksync.core.fabric.node_shell import FleetShell

        stored = self.stored()
        topology = stored.applied.topology.value if stored.applied else None
        options = options or self.check_options or CheckOptions()
        options = replace(options, topology=options.topology or topology)
        report = run_check(FleetShell(self._fleet()), self.links(), options, self._tell)
        FabricCheckHistory().add(report)
        return report

    def latest_check(self) -> FabricCheckReport | None:
        from sparksync.core.fabric.check_history import FabricCheckHistory

        return FabricCheckHistory().latest()

    def links(self):  # FabricLinks of the applied plan
        from sparksync.core.fabric.errors import FabricSetupError
        from sparksync.core.fabric.fabric_links import links_from_plan

        stored = self.stored()
        if stored.applied is None:
            raise FabricSetupError("No fabric plan is applied yet: detect, plan and apply it first.")
        ids = {n.node_id: n.name for n in self._fleet().nodes()}
        if self.line_rate_mbps is None:
            return links_from_plan(stored.applied, ids.get)
        return links_from_plan(stored.applied, ids.get, self.line_rate_mbps)


def fabric_health(report: FabricCheckReport | None) -> str | None:
    """A line for the tray when the newest check found the fabric degraded or failing; None when healthy."""
    if report is None or report.verdict not in (Verdict.degraded, Verdict.failed):
        return None
    flagged = [link for link in report.links if link.verdict in (Verdict.degraded, Verdict.failed)]
    worst = _slowest(report.problems)
    what = f"{len(flagged)} of {len(report.links)} links flagged" if flagged else "the cluster test flagged"
    word = "failing" if report.verdict is Verdict.failed else "degraded"
    return f"Fabric {word}: {what}" + (f" ({worst})" if worst else "")


def tell_degraded(events: ClusterEvents, report: FabricCheckReport | None) -> bool:
    """Tell ``events`` (the app's one door to notifications) once that ``report`` flagged links; False if not.

    One event per check, naming its flagged links and the worst figure, so a check that flags eight links is
    one notification, not eight.
    """
    if report is None or report.verdict not in (Verdict.degraded, Verdict.failed):
        return False
    flagged = [link for link in report.links if link.verdict in (Verdict.degraded, Verdict.failed)]
    shown = [f"{link.a} ↔ {link.b}" for link in flagged[:2]]
    if len(flagged) > 2:
        shown.append(f"{len(flagged) - 2} more")
    subject = ", ".join(shown) if shown else "the cluster test"
    why = _slowest(report.problems) or report.summary()
    events.fabric_link_degraded(subject, why)
    return True


def _slowest(problems: list[Measurement]) -> str:
    figures = [m for m in problems if m.value is not None and m.unit in ("Gb/s", "GB/s")]
    if figures:
        m = min(figures, key=lambda m: m.percent_of_line if m.percent_of_line is not None else 100.0)
        share = f", {m.percent_of_line:.0f} % of line rate" if m.percent_of_line is not None else ""
        return f"{m.test} {m.where} {m.value:.3g} {m.unit}{share}"
    return problems[0].text() if problems else ""


# --- what the Topology tab draws ---------------------------------------------------------------------


@dataclass
class DrawnEdge:
    key: str
    a: str  # a node
    b: str  # a node, or a switch's name
    label: str = ""
    problems: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    verdict: Verdict | None = None  # of the acceptance check, None: not checked

    headline: str = ""  # the one figure worth showing on the edge: the worst flagged one, else the slowest

    @property
    def marked(self) -> bool:
        return bool(self.problems) or self.verdict in (Verdict.degraded, Verdict.failed)


@dataclass
class Drawing:
    kind: str
    nodes: list[str]
    switches: list[str]
    edges: list[DrawnEdge]
    notes: list[str] = field(default_factory=list)  # problems not on one edge

    def edge(self, a: str, b: str) -> DrawnEdge | None:
        return next((e for e in self.edges if {e.a, e.b} == {a, b}), None)


def drawing_from_detection(detection: Detection, report: FabricCheckReport | None = None) -> Drawing:
    topology = detection.topology
    nodes = list(topology.graph.nodes)
    switches: list[str] = []
    edges: list[DrawnEdge] = []
    for number, segment in enumerate(topology.graph.segments, start=1):
        ends = list(segment.ends)
        problems = [p.message for p in topology.problems if p.segment == segment.key]
        speeds = sorted({s for e in ends if (s := topology.graph.ports[e].speed_mbps) is not None})
        speed = "/".join(f"{s / 1000:g}G" for s in speeds)
        if segment.is_cable:
            a, b = ends[0], ends[1]
            label = f"p{a.port}–p{b.port} {speed}".strip()
            edges.append(DrawnEdge(segment.key, a.node, b.node, label, problems))
        else:
            switch = f"switch {number}"
            switches.append(switch)
            for end in ends:
                edges.append(DrawnEdge(f"{segment.key}/{end.node}", end.node, switch, f"p{end.port} {speed}".strip(),
                                       [m for m in problems if end.node in m]))
    on_edge = {m for e in edges for m in e.problems}
    notes = [p.message for p in topology.problems if p.message not in on_edge]
    drawing = Drawing(topology.kind.value, nodes, switches, edges, notes)
    _add_figures(drawing, report)
    return drawing


def drawing_from_plan(plan: FabricPlan, report: FabricCheckReport | None = None,
                      names: dict[str, str] | None = None) -> Drawing:
    """The applied plan's cabling (cables and switch segments), when no detection was made in this run."""
    name = (names or {}).get
    nodes = [name(i) or n.name for i, n in plan.nodes.items()]
    segments: dict[str, list[str]] = {}
    for link in plan.links:
        members = [name(m.split(":", 1)[0]) or plan.nodes[m.split(":", 1)[0]].name for m in link.members]
        segments.setdefault(link.key.rsplit("#", 1)[0], members)
    switches, edges = [], []
    for number, (key, members) in enumerate(segments.items(), start=1):
        if len(members) == 2:
            edges.append(DrawnEdge(key, members[0], members[1]))
        else:
            switch = f"switch {number}"
            switches.append(switch)
            edges += [DrawnEdge(f"{key}/{m}", m, switch) for m in members]
    drawing = Drawing(plan.topology.value, nodes, switches, edges)
    _add_figures(drawing, report)
    return drawing


def _add_figures(drawing: Drawing, report: FabricCheckReport | None) -> None:
    if report is None:
        return
    edge_links: dict[str, list[LinkCheck]] = {}
    for link in report.links:
        a, b = link.nodes
        targets = [e for e in drawing.edges if {e.a, e.b} == {a, b}]
        if not targets:  # a switch: the figures go on both nodes' edges to it
            targets = [e for e in drawing.edges if e.b in drawing.switches and e.a in (a, b)]
        for edge in targets:
            edge.figures += _figure_lines(link)
            ran = [m.verdict for m in link.measurements if m.verdict is not Verdict.not_run]
            edge.verdict = _merge(edge.verdict, worst(ran) if ran else Verdict.not_run)
            edge_links.setdefault(edge.key, []).append(link)
    for edge in drawing.edges:
        edge.headline = _headline(edge_links.get(edge.key, []))
    for m in report.cluster:
        drawing.notes.append(m.text())


def _headline(links: list[LinkCheck]) -> str:
    """The edge's figure: its worst flagged measurement, else its slowest bandwidth, as % of line rate."""
    measured = [m for link in links for m in link.measurements]
    flagged = [m for m in measured if m.verdict in (Verdict.degraded, Verdict.failed)]
    if flagged:
        m = min(flagged, key=lambda m: m.percent_of_line if m.percent_of_line is not None else -1.0)
        if m.value is not None and m.unit in ("Gb/s", "GB/s"):
            return f"⚠ {m.test} {m.where}\n{m.value:.3g} {m.unit} ({m.percent_of_line or 0:.0f} % of line)"
        return f"⚠ {m.test} {m.where}\n{m.detail or m.verdict.value}"
    tcp = [m for m in measured if m.test == "iperf3" and m.value is not None]
    if not tcp:
        return ""
    m = min(tcp, key=lambda m: m.value or 0.0)
    return f"TCP ≥ {m.value:.3g} Gb/s\n({m.percent_of_line or 0:.0f} % of line)"


def _figure_lines(link: LinkCheck) -> list[str]:
    lines = []
    for m in link.measurements:
        if m.test in ("iperf3", "ib_write_bw") and m.value is not None:
            share = f" ({m.percent_of_line:.0f} %)" if m.percent_of_line is not None else ""
            flag = " ⚠" if m.verdict in (Verdict.degraded, Verdict.failed) else ""
            lines.append(f"{m.test} {m.where}: {m.value:.3g} {m.unit}{share}{flag}")
        elif m.verdict in (Verdict.degraded, Verdict.failed):
            lines.append(f"{m.test} {m.where}: {m.verdict.value}" + (f" – {m.detail}" if m.detail else ""))
    return lines


def _merge(old: Verdict | None, new: Verdict) -> Verdict:
    return new if old is None else worst([old, new])


__all__: Sequence[str] = (
    "ClusterAssistant", "Drawing", "DrawnEdge", "StepEvent", "as_step", "drawing_from_detection",
    "drawing_from_plan", "fabric_health",
)
