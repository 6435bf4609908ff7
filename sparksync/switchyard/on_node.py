"""The gateway as a workload on a node: ``sparksync switchyard serve`` started through the node's agent.

The node runs the gateway with the config inline (``--config-json``), so no
file has to be copied there first. Pools given as workloads are resolved
here, from the client's workload record, into URLs the node itself reaches:
an engine on the gateway's own node at its listening address (loopback
included), an engine on another node at that node's address, which needs the
engine to listen beyond loopback (``--set http_host=0.0.0.0``). The result
is a one-group plan with a ``custom`` recipe, started by the orchestrator
like any other workload: readiness is the gateway's ``/health``, and its
output-token counter gives the node's telemetry a tokens/s figure (when the
gateway demands an API key, the agent cannot read ``/metrics`` and the
figure stays empty).

The node needs SparkSync itself installed (``program``: the command that runs
its ``sparksync``, e.g. ``["/opt/sparksync/bin/sparksync"]`` or
``["python3", "-m", "sparksync"]``); a gateway that must find replicas by itself while it runs is
the client-side gateway's job (``sparksync switchyard serve`` here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparksync.core.agents.this_computer import canonical_name
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.reach import WILDCARDS, direct_url, workload_endpoints
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.workload_store import Endpoint, WorkloadRecord
from sparksync.switchyard.config import PoolConfig, SwitchyardConfig
from sparksync.switchyard.errors import ConfigError

GATEWAY_RECIPE = "switchyard-gateway"
READY_TIMEOUT_S = 120.0
TOKENS_COUNTER = "switchyard_output_tokens_total"


def node_config(config: SwitchyardConfig, records: Sequence[WorkloadRecord], node: str,
                addresses: Mapping[str, str]) -> SwitchyardConfig:  # fmt: skip
    """The config with every workload pool replaced by the URLs ``node`` reaches its replicas at."""
    node = canonical_name(node)  # `--node local`: this computer, as its workloads' records name it
    pools = dict(config.pools)
    for name, selector in config.workload_pools().items():
        endpoints = workload_endpoints(records, selector)
        if not endpoints:
            raise ConfigError(f"pool {name} follows workload {selector!r}, but no running workload matches it; "
                              "start it first (`sparksync workload start`) or give the pool urls")  # fmt: skip
        urls = [_url_from(node, e, addresses, name) for e in endpoints]
        pools[name] = PoolConfig(
            urls=urls, model=config.upstream_model(name), api_key_env=pools[name].api_key_env
        )
    return config.model_copy(update={"pools": pools})


def _url_from(node: str, endpoint: Endpoint, addresses: Mapping[str, str], pool: str) -> str:
    if endpoint.node == node:
        host = "127.0.0.1" if endpoint.host in WILDCARDS else endpoint.host
        return f"http://{host}:{endpoint.port}"
    try:
        return direct_url(endpoint, addresses)
    except SparkSyncError as exc:
        raise ConfigError(f"pool {pool}: the gateway on {node} cannot reach a replica: {exc}") from None


def gateway_recipe(config: SwitchyardConfig, program: Sequence[str] = ("sparksync",)) -> Recipe:
    """A custom recipe that runs the gateway with ``config`` (already resolved by ``node_config``)."""
    if config.workload_pools():
        raise ConfigError("resolve the workload pools first (node_config): a gateway on a node has no "
                          "workload record to read")  # fmt: skip
    inline = config.model_dump_json(exclude_defaults=True)
    return Recipe.build(
        name=GATEWAY_RECIPE,
        description="Switchyard, the routing gateway, on one node.",
        engine="custom",
        custom={"argv": [*program, "switchyard", "serve", "--config-json", inline], "head_only": True},
        http_host=config.listen.host,
        ports={"http": config.listen.port},
        readiness={"kind": "http", "path": "/health", "timeout_s": READY_TIMEOUT_S},
        tokens={"kind": "prometheus", "decode_counter": TOKENS_COUNTER, "scope": "workload"},
    )


def gateway_plan(node: str) -> Plan:
    return Plan(groups=[Group(recipe=GATEWAY_RECIPE, nodes=[node])])
