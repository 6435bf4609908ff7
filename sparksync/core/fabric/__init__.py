"""Forming the cluster's fabric: detect the CX-7 cabling, plan addresses, apply and roll back.

    graph = build_cabling(reports)        # node name -> FabricReport (GET /v1/fabric)
    topology = classify(graph)            # direct / ring / switch / mixed, with named problems
    plan = make_plan(topology, reports)   # per-link subnets, MTU 9000, per-node environment
    FabricStore().save_plan(plan)

Qt-free; the CLI (`sparksync cluster ...`) and the GUI are faces over it.
"""

from sparksync.core.fabric.cabling import CablingGraph, PortEnd, PortState, Segment, build_cabling
from sparksync.core.fabric.errors import (
    FabricApplyError,
    FabricPlanError,
    FabricSetupError,
    FabricStoreError,
    SubnetClashError,
    SudoRefusedError,
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
from sparksync.core.fabric.operations import (
    ApplyReport,
    Detection,
    FabricOperations,
    FabricProgress,
    NodeOutcome,
)
from sparksync.core.fabric.store import FabricStore, PlanState, StoredFabric, fabric_store_path
from sparksync.core.fabric.topology import (
    CX7_SPEED_MBPS,
    FabricKind,
    FabricProblem,
    FabricTopology,
    ProblemKind,
    Severity,
    classify,
)

__all__ = [
    "ApplyReport", "Detection", "FabricOperations", "FabricProgress", "NodeOutcome", "check_plan",
    "CX7_SPEED_MBPS", "DEFAULT_BASE", "DEFAULT_PREFIX", "ENV_KEYS", "CablingGraph", "FabricApplyError",
    "FabricKind", "FabricPlan", "FabricPlanError", "FabricProblem", "FabricSetupError", "FabricStore",
    "FabricStoreError", "FabricTopology", "NodePlan", "PlanState", "PlannedInterface", "PlannedLink", "PortEnd",
    "PortState", "ProblemKind", "Segment", "Severity", "StoredFabric", "SubnetClashError", "SudoRefusedError",
    "build_cabling", "classify", "fabric_store_path", "make_plan", "node_env", "ring_warning",
]  # fmt: skip
