"""The agent's fabric: the read-only report, and apply and rollback through the root helper."""

from __future__ import annotations

import threading
from pathlib import Path

from sparksync_agent.fabric.report import FabricInspector
from sparksync_agent.fabric.sudo import run_helper
from sparksync_agent.protocol import FabricReport, FabricResult, NodeFabricPlan


class FabricService:
    """One apply or rollback at a time; reports may run beside them."""

    def __init__(self, node_id: str, state_dir: Path, inspector: FabricInspector | None = None):
        self.node_id = node_id
        self.state_dir = state_dir
        self.inspector = inspector or FabricInspector(node_id)
        self._changing = threading.Lock()

    def report(self, probe: bool = True) -> FabricReport:
        return self.inspector.report(probe)

    def apply(self, plan: NodeFabricPlan, password: str) -> FabricResult:
        with self._changing:
            return run_helper("apply", self.node_id, password, self.state_dir, plan=plan)

    def rollback(self, password: str, last: bool = False) -> FabricResult:
        with self._changing:
            return run_helper("rollback", self.node_id, password, self.state_dir, last=last)
