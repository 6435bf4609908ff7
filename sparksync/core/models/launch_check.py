"""Before a workload starts: is its model on every node of the placement, and where on each?

A recipe may name its model by its store name instead of a path:
``store:NAME`` always, or a plain ``NAME`` (``tiny``, ``org/name``) that some
node lists. Each node then gets its own path (its store, its HF cache...).
A node that lacks it is named before anything starts, with the time a copy
would take: at the fabric bandwidth the newest ``sparksync cluster check``
measured with iperf3 (the history's ``fabric_checks``) when there is one,
else at the copy rates measured so far; the sentence says which.
``copy_model=True`` copies it
there first (``ModelCopy``: verified, fanned out). A name that no node has is
left as it is (an engine such as vLLM may download a hub id itself).

The launches are built with a placeholder path, which each node's rank then
has replaced by that node's own path, so the engine's flags stay the
engine's own (``-m``, ``--model-path``, vLLM's positional model).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sparksync_agent.protocol import RankLaunch, valid_model_name

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fabric.check_history import FabricCheckHistory
from sparksync.core.fabric.check_results import FabricCheckReport
from sparksync.core.models.copy import CopyEvent, ModelCopy
from sparksync.core.models.errors import CopyFailedError, ModelMissingError
from sparksync.core.models.nodes import ModelMatrix, ModelNodes, build_matrix
from sparksync.core.models.rates import CopyRates

log = logging.getLogger(__name__)

STORE_PREFIX = "store:"
PLACEHOLDER = "/sparksync-model/"  # + the name; replaced on each node by its own path


def store_name(model: str) -> tuple[str, bool] | None:
    """(the store name, whether it was explicit), or None for a path, a URL or a template."""
    if model.startswith(STORE_PREFIX):
        name = model[len(STORE_PREFIX):]
        return (name, True) if valid_model_name(name) else None
    if not model or model.startswith(("/", "~", ".", "<")) or "://" in model:
        return None
    return (model, False) if valid_model_name(model) else None


@dataclass
class ModelNeed:
    """One store model a plan uses: where it is, where it is not, and how long a copy would take."""

    name: str
    nodes: list[str]
    paths: dict[str, str] = field(default_factory=dict)  # node -> its own path
    missing: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    source: str | None = None  # a node that has it
    estimate_s: float | None = None  # the copy to the missing nodes, at the measured rates
    estimate_basis: str | None = None  # which figures: "fabric check (...)" or "copy rates measured so far"

    def sentence(self) -> str:
        where = ", ".join(self.missing)
        size = f" ({_size(self.size_bytes)})" if self.size_bytes else ""
        if self.source is None:
            return f"model {self.name}{size} is not on {where}, and no node has it to copy from: fetch it first"
        if self.estimate_s is not None:
            eta = f"about {_duration(self.estimate_s)} at the {self.estimate_basis}"
        else:
            eta = "no copy to those nodes has been measured yet, so no estimate"
        return f"model {self.name}{size} is not on {where}; copying it from {self.source} takes {eta}"


COPY_RATES_BASIS = "copy rates measured so far"


def needs(
    nodes: ModelNodes,
    plan_nodes: Mapping[str, list[str]],
    rates: CopyRates | None = None,
    checks: FabricCheckHistory | None = None,
) -> list[ModelNeed]:
    """``plan_nodes``: each store model's name -> the nodes that run it. Nothing is copied."""
    if not plan_nodes:
        return []
    listing = build_matrix(nodes.listings(nodes.names()))
    rates = rates if rates is not None else CopyRates()
    fabric = _latest_check(checks if checks is not None else FabricCheckHistory())
    return [_need(nodes, listing, name, placed, rates, fabric) for name, placed in plan_nodes.items()]


def _latest_check(checks: FabricCheckHistory) -> FabricCheckReport | None:
    try:
        return checks.latest()
    except (SparkSyncError, OSError) as exc:  # an estimate only: an unreadable history costs the estimate
        log.debug("no fabric check for the copy estimate: %s", exc)
        return None


def fabric_rate(report: FabricCheckReport, node: str) -> float | None:
    """Bytes per second into ``node`` by the check's iperf3: its slowest link's figure, else the cluster's slowest.

    The check names nodes as they were called then; a node renamed since gets the cluster's slowest link.
    """
    figures = [(link, m.value) for link in report.links for m in link.figure("iperf3")
               if m.value is not None and m.value > 0 and m.unit == "Gb/s"]  # fmt: skip
    if not figures:
        return None
    own = [v for link, v in figures if node in (link.a.partition(":")[0], link.b.partition(":")[0])]
    return min(own or [v for _link, v in figures]) * 1e9 / 8


def _need(
    nodes: ModelNodes, matrix: ModelMatrix, name: str, placed: list[str], rates: CopyRates,
    fabric: FabricCheckReport | None = None,
) -> ModelNeed:
    need = ModelNeed(name, placed, size_bytes=matrix.sizes.get(name))
    for node in placed:
        cell = matrix.cell(name, node)
        if cell.state == "present" and cell.path:
            need.paths[node] = cell.path
        else:
            need.missing.append(node)
    have = [c.name for c in matrix.nodes if matrix.cell(name, c.name).state == "present"]
    need.source = next((n for n in have if n in placed), have[0] if have else None)
    if need.missing and need.size_bytes:
        measured: list[float | None] = []
        if fabric is not None:
            measured = [fabric_rate(fabric, n) for n in need.missing]
            when = fabric.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
            need.estimate_basis = f"fabric bandwidth measured by iperf3 in `sparksync cluster check` ({when})"
        if not measured or any(r is None for r in measured):
            measured = [_rate(nodes, rates, n) for n in need.missing]
            need.estimate_basis = COPY_RATES_BASIS
        if all(r is not None for r in measured):
            slowest = min(r for r in measured if r is not None)
            rounds = math.ceil(math.log2(len(need.missing) + 1))  # the tree: sources double each round
            need.estimate_s = need.size_bytes / slowest * rounds
        else:
            need.estimate_basis = None
    return need


def _rate(nodes: ModelNodes, rates: CopyRates, node: str) -> float | None:
    try:
        return rates.get(nodes.node_id(node))
    except SparkSyncError:
        return None


def store_models(models: Mapping[str, str], nodes_of: Mapping[str, list[str]], known: set[str]) -> dict[str, list[str]]:
    """Each recipe's model that is a store name (explicit, or one some node lists) -> its nodes."""
    out: dict[str, list[str]] = {}
    for recipe, model in models.items():
        found = store_name(model)
        if found is None:
            continue
        name, explicit = found
        if explicit or name in known:
            out.setdefault(name, [])
            out[name] = list(dict.fromkeys([*out[name], *nodes_of[recipe]]))
    return out


def ensure(
    nodes: ModelNodes,
    wanted: Mapping[str, list[str]],
    copy_model: bool,
    on_copy: Callable[[CopyEvent], None] | None = None,
) -> dict[str, dict[str, str]]:
    """Each store model -> node -> its path; a missing one is copied (``copy_model``) or refused."""
    found = needs(nodes, wanted)
    missing = [n for n in found if n.missing]
    if missing and not copy_model:
        raise ModelMissingError(
            "; ".join(n.sentence() for n in missing)
            + ". Nothing was started: add --copy-model to copy it there first (or `sparksync model copy`)."
        )
    for need in missing:
        if need.source is None:
            raise ModelMissingError(need.sentence() + ". Nothing was started.")
        report = ModelCopy(nodes, on_copy).run(need.name, need.missing, need.source)
        if not report.ok:
            bad = [f"{r.node}: {r.message or r.state}" for r in report.results if not r.ok]
            raise CopyFailedError(f"the copy of {need.name} failed, so nothing was started: " + "; ".join(bad))
    if missing:
        found = needs(nodes, wanted)
        still = [n for n in found if n.missing]
        if still:
            raise ModelMissingError("; ".join(n.sentence() for n in still) + ". Nothing was started.")
    return {n.name: n.paths for n in found}


def placeholder(name: str) -> str:
    return PLACEHOLDER + name


def resolve_launch(launch: RankLaunch, paths: Mapping[str, Mapping[str, str]]) -> RankLaunch:
    """The rank with each store model's placeholder replaced by its node's own path."""

    def fix(text: str) -> str:
        for name, per_node in paths.items():
            marker = placeholder(name)
            if marker in text and launch.node in per_node:
                text = text.replace(marker, per_node[launch.node])
        return text

    return launch.model_copy(update={
        "argv": [fix(a) for a in launch.argv],
        "env": {k: fix(v) for k, v in launch.env.items()},
        "stop_argv": [fix(a) for a in launch.stop_argv],
    })  # fmt: skip


def _size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
