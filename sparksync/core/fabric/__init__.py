"""Forming the cluster's fabric: detect the CX-7 cabling, plan addresses, apply and roll back.

    graph = build_cabling(reports)        # node name -> FabricReport (GET /v1/fabric)
    topology = classify(graph)            # direct / ring / switch / mixed, with named problems
    plan = make_plan(topology, reports)   # per-link subnets, MTU 9000, per-node environment
    FabricStore().save_plan(plan)

Qt-free; the CLI (`sparksync cluster ...`) and the GUI are faces over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.fabric.assistant import (
        ClusterAssistant,
        Drawing,
        DrawnEdge,
        StepEvent,
        drawing_from_detection,
        drawing_from_plan,
        fabric_health,
        tell_degraded,
    )
    from sparksync.core.fabric.cabling import (
        CablingGraph,
        PortEnd,
        PortState,
        Segment,
        build_cabling,
    )
    from sparksync.core.fabric.check import (
        CheckOptions,
        CheckProgress,
        run_check,
    )
    from sparksync.core.fabric.check_history import (
        FabricCheckHistory,
    )
    from sparksync.core.fabric.check_results import (
        FabricCheckReport,
        Verdict,
    )
    from sparksync.core.fabric.errors import (
        FabricApplyError,
        FabricPlanError,
        FabricSetupError,
        FabricStoreError,
        SubnetClashError,
        SudoRefusedError,
    )
    from sparksync.core.fabric.fabric_links import (
        CX7_LINE_RATE_MBPS,
        FabricLinks,
        links_from_plan,
    )
    from sparksync.core.fabric.mesh import (
        MeshCheckReport,
        MeshProgress,
        check_mesh,
        plan_mesh,
        setup_mesh,
    )
    from sparksync.core.fabric.node_shell import (
        FleetShell,
    )
    from sparksync.core.fabric.operations import (
        ApplyReport,
        Detection,
        FabricOperations,
        FabricProgress,
        NodeOutcome,
    )
    from sparksync.core.fabric.plan import (
        DEFAULT_BASE,
        DEFAULT_PREFIX,
        ENV_KEYS,
        FabricPlan,
        NodePlan,
        PlannedInterface,
        PlannedLink,
        check_plan,
        make_plan,
        node_env,
        ring_warning,
    )
    from sparksync.core.fabric.store import (
        FabricStore,
        PlanState,
        StoredFabric,
        fabric_store_path,
    )
    from sparksync.core.fabric.topology import (
        CX7_SPEED_MBPS,
        FabricKind,
        FabricProblem,
        FabricTopology,
        ProblemKind,
        Severity,
        classify,
    )

_WHERE = {
    "ClusterAssistant": "assistant",
    "Drawing": "assistant",
    "DrawnEdge": "assistant",
    "StepEvent": "assistant",
    "drawing_from_detection": "assistant",
    "drawing_from_plan": "assistant",
    "fabric_health": "assistant",
    "tell_degraded": "assistant",
    "CablingGraph": "cabling",
    "PortEnd": "cabling",
    "PortState": "cabling",
    "Segment": "cabling",
    "build_cabling": "cabling",
    "CheckOptions": "check",
    "CheckProgress": "check",
    "run_check": "check",
    "FabricCheckHistory": "check_history",
    "FabricCheckReport": "check_results",
    "Verdict": "check_results",
    "FabricApplyError": "errors",
    "FabricPlanError": "errors",
    "FabricSetupError": "errors",
    "FabricStoreError": "errors",
    "SubnetClashError": "errors",
    "SudoRefusedError": "errors",
    "CX7_LINE_RATE_MBPS": "fabric_links",
    "FabricLinks": "fabric_links",
    "links_from_plan": "fabric_links",
    "MeshCheckReport": "mesh",
    "MeshProgress": "mesh",
    "check_mesh": "mesh",
    "plan_mesh": "mesh",
    "setup_mesh": "mesh",
    "FleetShell": "node_shell",
    "ApplyReport": "operations",
    "Detection": "operations",
    "FabricOperations": "operations",
    "FabricProgress": "operations",
    "NodeOutcome": "operations",
    "DEFAULT_BASE": "plan",
    "DEFAULT_PREFIX": "plan",
    "ENV_KEYS": "plan",
    "FabricPlan": "plan",
    "NodePlan": "plan",
    "PlannedInterface": "plan",
    "PlannedLink": "plan",
    "check_plan": "plan",
    "make_plan": "plan",
    "node_env": "plan",
    "ring_warning": "plan",
    "FabricStore": "store",
    "PlanState": "store",
    "StoredFabric": "store",
    "fabric_store_path": "store",
    "CX7_SPEED_MBPS": "topology",
    "FabricKind": "topology",
    "FabricProblem": "topology",
    "FabricTopology": "topology",
    "ProblemKind": "topology",
    "Severity": "topology",
    "classify": "topology",
}
__all__ = [
    "ApplyReport",
    "CX7_LINE_RATE_MBPS",
    "CX7_SPEED_MBPS",
    "CablingGraph",
    "CheckOptions",
    "CheckProgress",
    "ClusterAssistant",
    "DEFAULT_BASE",
    "DEFAULT_PREFIX",
    "Detection",
    "Drawing",
    "DrawnEdge",
    "ENV_KEYS",
    "FabricApplyError",
    "FabricCheckHistory",
    "FabricCheckReport",
    "FabricKind",
    "FabricLinks",
    "FabricOperations",
    "FabricPlan",
    "FabricPlanError",
    "FabricProblem",
    "FabricProgress",
    "FabricSetupError",
    "FabricStore",
    "FabricStoreError",
    "FabricTopology",
    "FleetShell",
    "MeshCheckReport",
    "MeshProgress",
    "NodeOutcome",
    "NodePlan",
    "PlanState",
    "PlannedInterface",
    "PlannedLink",
    "PortEnd",
    "PortState",
    "ProblemKind",
    "Segment",
    "Severity",
    "StepEvent",
    "StoredFabric",
    "SubnetClashError",
    "SudoRefusedError",
    "Verdict",
    "build_cabling",
    "check_mesh",
    "check_plan",
    "classify",
    "drawing_from_detection",
    "drawing_from_plan",
    "fabric_health",
    "fabric_store_path",
    "links_from_plan",
    "make_plan",
    "node_env",
    "plan_mesh",
    "ring_warning",
    "run_check",
    "setup_mesh",
    "tell_degraded",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
