"""Models on every node, through the fleet: each node's listing, and the model × node matrix.

``ModelNodes`` is thin on purpose: every call goes through ``Fleet.call``
(this computer's local agent like any paired node's), so the copy, the
fetch, the CLI and the GUI all reach the agents one way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from sparksync_agent.protocol import ModelEntry, ModelList, ModelState, RootKind

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.this_computer import LOCAL_NODE_NAME, is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.nodes.registry import PairedNode

T = TypeVar("T")
CellState = Literal["present", "partial", "missing", "unknown"]


class ModelNodes:
    """The nodes as far as models go: names, their agents, their listings."""

    def __init__(self, fleet: Fleet):
        self.fleet = fleet

    def names(self, names: Iterable[str] | None = None) -> list[str]:
        return self.fleet.names(names)

    def call(self, node: str, action: Callable[[AgentClient], T]) -> T:
        return self.fleet.call(node, action)

    def paired(self, node: str) -> PairedNode | None:
        """The registry entry of a paired node; None for this computer."""
        return None if is_local(node) else self.fleet.nodes([node])[0]

    def node_id(self, node: str) -> str:
        if is_local(node):
            return self.fleet.local.hello()[1].node_id
        return self.fleet.nodes([node])[0].node_id

    def listing(self, node: str, manifests: bool = True) -> ModelList:
        return self.call(node, lambda c: c.models(manifests))

    def listings(self, nodes: Sequence[str], manifests: bool = True) -> dict[str, ModelList | SparkSyncError]:
        """Every node's listing at once; a node that cannot answer has its error instead."""
        return parallel(list(nodes), lambda n: self.listing(n, manifests))


def parallel(nodes: Sequence[str], action: Callable[[str], T]) -> dict[str, T | SparkSyncError]:
    if not nodes:
        return {}

    def catching(node: str) -> T | SparkSyncError:
        try:
            return action(node)
        except SparkSyncError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="models-node") as pool:
        futures = {node: pool.submit(catching, node) for node in nodes}
        return {node: future.result() for node, future in futures.items()}


# --- the matrix --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    state: CellState
    size_bytes: int | None = None
    path: str | None = None  # where the node's engines find it
    root_kind: str | None = None
    format: str | None = None


@dataclass(frozen=True)
class NodeColumn:
    name: str
    free_bytes: int | None = None  # on the store's disk: where copies land
    store: str | None = None
    error: str | None = None


@dataclass
class ModelMatrix:
    nodes: list[NodeColumn]
    models: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # a present copy's size, per model

    def cell(self, model: str, node: str) -> Cell:
        return self.cells.get((model, node), Cell("missing"))

    def missing_on(self, model: str, nodes: Iterable[str]) -> list[str]:
        return [n for n in nodes if self.cell(model, n).state != "present"]

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [vars(n) for n in self.nodes],
            "models": [
                {
                    "name": m,
                    "size_bytes": self.sizes.get(m),
                    "nodes": {n.name: vars(self.cell(m, n.name)) for n in self.nodes},
                }
                for m in self.models
            ],
        }


def build_matrix(listings: dict[str, ModelList | SparkSyncError]) -> ModelMatrix:
    columns: list[NodeColumn] = []
    cells: dict[tuple[str, str], Cell] = {}
    sizes: dict[str, int] = {}
    names: set[str] = set()
    for node, answer in listings.items():
        if isinstance(answer, SparkSyncError):
            columns.append(NodeColumn(node, error=str(answer)))
            continue
        store = next((r for r in answer.roots if r.kind is RootKind.store), None)
        columns.append(NodeColumn(node, store.free_bytes if store else None, store.path if store else None))
        for entry in answer.models:
            names.add(entry.name)
            old = cells.get((entry.name, node))
            if old is not None and old.state == "present":
                continue  # a present copy beats a partial one on the same node
            cells[(entry.name, node)] = _cell(entry)
            if entry.state is ModelState.present:
                sizes.setdefault(entry.name, entry.size_bytes)
    for node, answer in listings.items():
        if isinstance(answer, SparkSyncError):
            for name in names:
                cells[(name, node)] = Cell("unknown")
    return ModelMatrix(columns, sorted(names), cells, sizes)


def _cell(entry: ModelEntry) -> Cell:
    return Cell(
        state="present" if entry.state is ModelState.present else "partial",
        size_bytes=entry.size_bytes, path=entry.path, root_kind=entry.root_kind.value, format=entry.format.value,
    )  # fmt: skip


def node_label(node: str) -> str:
    return LOCAL_NODE_NAME if is_local(node) else node
