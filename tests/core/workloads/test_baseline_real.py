"""A one-node torchrun run under a real agent records its setup's baseline from the agent's telemetry.

The generated one-node launch (``--standalone``) runs the example DDP script
with torch on this CPU; its nanochat-format log lines become tokens/s in the
agent's telemetry, and the median of them becomes the baseline once the run
has ended.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest
from sparksync_agent.protocol import RankState

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.fleet import Fleet
from sparksync.core.workloads import running
from sparksync.core.workloads.baseline import BaselineStore, key_of
from sparksync.core.workloads.examples import tiny_ddp
from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.training_scaling import record_baselines
from sparksync.core.workloads.workload_store import RankRef, WorkloadRecord

pytestmark = pytest.mark.slow

NODE = LOCAL_NODE_NAME


def wait_until(check, what: str, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


def test_an_ended_one_node_run_records_the_median_of_its_telemetry(local_agent, client, tmp_path):
    pytest.importorskip("torch", reason="torch (CPU) is in the test extras: pip install -e '.[test]'")
    launcher = tmp_path / "torchrun"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m torch.distributed.run "$@"\n')
    launcher.chmod(0o755)
    recipe = Recipe.model_validate({
        "name": "torchrun", "engine": "torchrun",
        "training": {"launcher": str(launcher), "script": str(Path(tiny_ddp.__file__)),
                     "args": ["--steps", "40", "--pace-ms", "40", "--backend", "gloo"]},
    })  # fmt: skip
    [launch] = build_group("torchrun-1", recipe, [NODE], Fabric()).ranks
    assert "--standalone" in launch.argv
    record = WorkloadRecord(
        workload_id="one-node", recipes=["torchrun"], plan=Plan(groups=[Group(recipe="torchrun", nodes=[NODE])]),
        ranks=[RankRef(node=NODE, name=launch.process_name, group=launch.group, rank=0, role=launch.role)],
    )  # fmt: skip
    agents = Fleet(local_state_dir=local_agent.state_dir)  # this computer, through its local link
    store = BaselineStore()
    client.start_rank(record.workload_id, launch)
    try:
        wait_until(lambda: not running.view(agents, record).live(), "the run to end")
        final = running.view(agents, record)
        assert final.state == "exited", [(r.state, r.why()) for r in final.ranks]

        [baseline] = record_baselines(agents, final, store)
        # the same median, read here from the agent's own telemetry
        seen = [sum(f.decode_tps for f in s.workloads or [] if f.workload_id == "one-node" and f.decode_tps)
                for s in client.telemetry(0).samples]  # fmt: skip
        seen = [v for v in seen if v]
        assert baseline.samples == len(seen) > 0
        assert baseline.tokens_per_s == pytest.approx(statistics.median(seen))
        assert baseline.key == key_of("torchrun", launch.argv) == store.get(baseline.key).key
        assert baseline.setup.endswith("tiny_ddp.py --steps 40 --pace-ms 40 --backend gloo")
        print(f"\none-node baseline: {baseline.tokens_per_s:,.0f} tok/s (median of {baseline.samples})")
        assert final.ranks[0].status.state is RankState.exited
    finally:
        running.stop(agents, record, grace_s=5)
        agents.close()  # attached only: the fixture's agent keeps running
