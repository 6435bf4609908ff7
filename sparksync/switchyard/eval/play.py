"""One whole eval: start the gateway from a config, play the cases against the three targets, report.

The targets run one after the other, each alone on the cluster, so none
slows another: the gateway (routed), the large pool alone, the small pool alone.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx

from sparksync.switchyard.config import VIRTUAL_MODEL, ListenConfig, SwitchyardConfig
from sparksync.switchyard.errors import EvalError
from sparksync.switchyard.eval.cases import CaseFile
from sparksync.switchyard.eval.report import EvalReport, gain, target_report
from sparksync.switchyard.eval.runner import DEFAULT_MAX_TOKENS, Target, TargetRun, run_target
from sparksync.switchyard.server import GatewayThread
from sparksync.switchyard.sources import PoolSource

log = logging.getLogger(__name__)


def targets(config: SwitchyardConfig) -> list[Target]:
    return [
        Target("gateway", VIRTUAL_MODEL),
        Target("large only", config.policy.large),
        Target("small only", config.policy.small),
    ]


def play(
    config: SwitchyardConfig,
    cases: CaseFile,
    case_file: Path | str,
    concurrency: int,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    source: PoolSource | None = None,
    stream: bool = False,
    suite: str | None = None,
) -> EvalReport:
    with local_gateway(config, source) as gateway:
        runs = asyncio.run(_play_all(gateway.url, config, cases, concurrency, max_tokens, stream))
    reports = [target_report(run) for run in runs]
    return EvalReport(
        case_file=str(case_file),
        cases=len(cases.cases),
        concurrency=concurrency,
        max_tokens=max_tokens,
        policy=config.policy.kind,
        targets=reports,
        gain=gain(reports[0], reports[1]),
        suite=suite,
        stream=stream,
    )


def local_gateway(config: SwitchyardConfig, source: PoolSource | None = None) -> GatewayThread:
    """The eval's own gateway: on loopback only, on a free port, whatever the config says."""
    return GatewayThread(config.model_copy(update={"listen": ListenConfig(host="127.0.0.1", port=0)}), source)


async def _play_all(
    url: str, config: SwitchyardConfig, cases: CaseFile, concurrency: int, max_tokens: int, stream: bool
) -> list[TargetRun]:
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        runs = []
        for target in targets(config):
            log.info("eval: %d cases against %s (model %s)", len(cases.cases), target.label, target.model)
            run = await run_target(client, url, cases, target, concurrency, max_tokens, stream)
            if run.errors == len(run.runs):
                raise EvalError(
                    f"every request to {target.label} (model {target.model!r}) failed, e.g. "
                    f"{run.runs[0].error}; check that its pool's replicas are up"
                )
            runs.append(run)
        return runs
