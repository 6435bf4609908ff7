"""Soak with faults: eight lab nodes at 10 Hz followed by one client while a fault script breaks things.

Eight real sshd nodes, each running a real agent under ``sparksync-agent
supervise`` (the service that restarts it, as systemd does on a Spark), all
followed through SSH tunnels by one ``TelemetryFollower`` (the core's one
follower, as the app uses it). Meanwhile a fault script goes round the
nodes, one fault at a time with a quiet spell between:

- **link**: the node's link cut with ``ip link set down`` for a while;
- **agent**: the agent killed with SIGKILL (its supervisor starts a new one);
- **sshd**: sshd and every session it forked killed, started again later;
- **disk**: the filesystem the agent writes to (a small tmpfs of the node's
  own) filled to the last byte for a while, then freed.

Reported, each beside what was expected in the same run:

- samples expected vs received per node, per agent run (seq 1..N of each
  run_id): an outage shorter than the ring buffer's 11 minutes must lose
  nothing; a killed agent's missing time shows as a marked ``Gap``;
- client and agent RSS, and their slope (MB per hour) after the warm-up;
- per fault, the time until the node was seen offline (or degraded) and
  the time from the fault's end until it was online again.

Length: ``SPARKSYNC_SOAK_S`` seconds (default 900, i.e. 15 min; 3600 for an
hour), else 900 × ``SPARKSYNC_PERF_SCALE``; e.g. ``SPARKSYNC_SOAK_S=120`` checks it
works in two minutes.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import signal
import subprocess
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from sparksync.core.base.backoff import Backoff
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.fleet.follower import Gap, SampleIn, TelemetryFollower
from sparksync.core.fleet.state import NodeState
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.connection import SshSettings
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.lab_agents import LabAgents, make_agent_python
from tests.lab.test_pairing_lab import pair
from tests.perf.settings import SCALE_ENV

pytestmark = [pytest.mark.perf, pytest.mark.lab]

NODES = 8
SAMPLE_HZ = 10.0
RING_WINDOW_S = 11 * 60  # the agent's ring buffer (README): outages shorter than this lose nothing
LINK = SshSettings(connect_timeout_s=2, handshake_timeout_s=5, auth_timeout_s=10, keepalive_s=1, dead_after_s=3)
RETRY = Backoff(first_s=0.5, factor=2.0, max_s=3.0)
FAULT_S = 20.0  # how long a link stays cut, sshd stays down, the disk stays full
QUIET_S = 15.0  # between two faults
WARMUP_S = 30.0
TMPFS_SIZE = "16m"


def soak_seconds() -> float:
    if os.environ.get("SPARKSYNC_SOAK_S"):
        return float(os.environ["SPARKSYNC_SOAK_S"])
    return 900.0 * float(os.environ.get(SCALE_ENV, "1"))


# --- agents under their service ------------------------------------------------------------------


class SupervisedAgents(LabAgents):
    """Agents started as ``sparksync-agent supervise`` (which restarts one that dies)."""

    def start(self, node, name, sample_hz=SAMPLE_HZ, advertise=False):  # noqa: D102
        old = self.endpoint(node)
        state = f'"$HOME/{LAYOUT.state_dir}"'
        node_id = shlex.quote(Registry().get(name).node_id)
        supervise = [str(self.python), "-m", "sparksync_agent", "supervise", "--no-advertise",
                     "--sample-hz", str(sample_hz)]  # fmt: skip
        script = (
            f"mkdir -p {state} && (umask 077 && printf '%s\\n' {node_id} >\"$HOME/{LAYOUT.node_id}\") && "
            f"setsid nohup {shlex.join(supervise)} --state-dir {state} --pid-file \"$HOME/supervise.pid\" "
            '--log-file "$HOME/supervise.log" >/dev/null 2>&1 </dev/null & echo $!'
        )
        pid = int(self._ssh(node, name, ["sh", "-c", script]).strip())
        self.pids.setdefault(node.name, []).append(pid)
        deadline = time.monotonic() + 180  # eight agents importing at once on two loaded cores
        while time.monotonic() < deadline:
            endpoint = self.endpoint(node)
            if endpoint is not None and endpoint != old and psutil.pid_exists(endpoint.pid):
                return endpoint
            time.sleep(0.1)
        log = self.home(node) / "supervise.log"
        text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
        raise RuntimeError(f"the supervised agent on {node.name} did not start: {text}")

    def agent_pid(self, node) -> int | None:
        endpoint = self.endpoint(node)
        return endpoint.pid if endpoint is not None and psutil.pid_exists(endpoint.pid) else None

    def stop_all(self) -> None:
        children = [pid for node in self.ssh_lab.nodes if (pid := self.agent_pid(node))]
        super().stop_all()  # the supervisors first, so nothing starts the agents again
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _mount_state_tmpfs(agents: SupervisedAgents, node) -> Path:
    """A small filesystem of the node's own for the agent's state dir, so filling it fills no real disk."""
    home = agents.home(node)
    state_parent = home / Path(LAYOUT.state_dir).parent
    state_parent.mkdir(parents=True, exist_ok=True)
    user = pwd.getpwnam(agents.ssh_lab.user(node))
    for path in [state_parent, *state_parent.relative_to(home).parents]:
        os.chown(home / path, user.pw_uid, user.pw_gid)  # the user's own, as on a node
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},uid={user.pw_uid},gid={user.pw_gid},"
                    "mode=0700", "tmpfs", str(state_parent)], check=True, timeout=30)  # fmt: skip
    return state_parent


# --- what the client saw ------------------------------------------------------------------------


@dataclass
class Seen:
    lock: threading.Lock = field(default_factory=threading.Lock)
    seqs: dict[tuple[str, int], set[int]] = field(default_factory=lambda: defaultdict(set))  # (node, run) -> seqs
    run: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # node -> its agent run, 0 first
    last: dict[str, int] = field(default_factory=dict)
    gaps: dict[str, list[Gap]] = field(default_factory=lambda: defaultdict(list))
    states: dict[str, list[tuple[float, NodeState]]] = field(default_factory=lambda: defaultdict(list))

    def on_event(self, event) -> None:
        if isinstance(event, SampleIn):
            with self.lock:
                seq = event.sample.seq
                if seq <= self.last.get(event.node, 0):  # seq starts again at 1: a new agent run
                    self.run[event.node] += 1
                self.last[event.node] = seq
                self.seqs[(event.node, self.run[event.node])].add(seq)
        elif isinstance(event, Gap):
            with self.lock:
                self.gaps[event.node].append(event)

    def on_change(self, _old, new) -> None:
        with self.lock:
            self.states[new.name].append((time.monotonic(), new.state))

    def state_after(self, name: str, since: float, wanted) -> float | None:
        with self.lock:
            for at, state in self.states[name]:
                if at >= since and wanted(state):
                    return at - since
        return None


@dataclass
class Fault:
    kind: str
    node: str
    start: float
    end: float = 0.0
    offline_after_s: float | None = None
    online_after_s: float | None = None
    stayed_online: bool = False  # the node kept serving through it (a full disk may not stop an agent)


# --- the faults ----------------------------------------------------------------------------------


def _kill_agent(agents: SupervisedAgents, node) -> None:
    pid = agents.agent_pid(node)
    if pid is not None:
        os.kill(pid, signal.SIGKILL)


def _fill(path: Path) -> Path:
    filler = path / "filler"
    with filler.open("wb") as out:
        try:
            while True:
                out.write(b"\0" * (1 << 20))
                out.flush()
        except OSError:  # ENOSPC: full to the last block
            pass
    return filler


def run_fault(kind: str, node, ssh_lab, agents: SupervisedAgents, tmpfs: dict[str, Path]) -> None:
    """Break ``node`` in the way ``kind`` says for FAULT_S (an agent kill is instant), then mend it."""
    if kind == "link":
        ssh_lab.set_link(node, up=False)
        time.sleep(FAULT_S)
        ssh_lab.set_link(node, up=True)
    elif kind == "agent":
        _kill_agent(agents, node)
    elif kind == "sshd":
        ssh_lab.stop_sshd(node)
        time.sleep(FAULT_S)
        ssh_lab.service.restart(ssh_lab.lab, node)
    elif kind == "disk":
        filler = _fill(tmpfs[node.name])
        time.sleep(FAULT_S)
        filler.unlink()


# --- RSS -----------------------------------------------------------------------------------------


def _rss_mb(pids) -> float:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total / 1e6


def _slope_mb_per_h(points: list[tuple[float, float]]) -> float:
    if len(points) < 3:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return (cov / var) * 3600 if var else 0.0


# --- the soak ------------------------------------------------------------------------------------


@pytest.fixture
def supervised_lab(ssh_lab_factory, real_keyring):  # noqa: F811
    from sparksync.core.ssh.client_key import ClientKey
    from sparksync.core.ssh.secrets import SecretStore

    client_key = ClientKey.load_or_create(SecretStore())
    python, root = make_agent_python()
    ssh_lab = ssh_lab_factory(NODES)
    agents = SupervisedAgents(ssh_lab, client_key, python)
    mounts = {node.name: _mount_state_tmpfs(agents, node) for node in ssh_lab.nodes}
    # Each sshd got its mount table when it started: start them again so their sessions (and the
    # agents started through them) see the small filesystems; a later restart copies them too.
    for node in ssh_lab.nodes:
        ssh_lab.service.restart(ssh_lab.lab, node)
    with ThreadPoolExecutor(NODES) as pool:
        list(pool.map(lambda node: pair(ssh_lab, node, client_key, name=node.name), ssh_lab.nodes))
    try:
        first = ssh_lab.nodes[0]
        seen_as = agents._ssh(first, first.name, ["stat", "-f", "-c", "%T", f"{agents.home(first)}/.local/state"])
        assert seen_as.strip() == "tmpfs", f"the node's session does not see its small filesystem: {seen_as}"
        with ThreadPoolExecutor(NODES) as pool:
            list(pool.map(lambda n: agents.start(n, n.name, SAMPLE_HZ), ssh_lab.nodes))
        yield ssh_lab, agents, client_key, mounts
    finally:
        agents.stop_all()
        for path in mounts.values():
            subprocess.run(["umount", "-l", str(path)], timeout=30, check=False)
        subprocess.run(["rm", "-rf", str(root)], timeout=60, check=False)


@pytest.mark.timeout(int(soak_seconds()) + 900)  # the soak itself, plus pairing and starting eight nodes
def test_eight_nodes_at_10_hz_through_faults(supervised_lab, perf_out):
    ssh_lab, agents, client_key, mounts = supervised_lab
    duration = soak_seconds()
    seen = Seen()
    faults: list[Fault] = []
    rss: dict[str, list[tuple[float, float]]] = {"client": [], "agents": []}
    me = psutil.Process()
    kinds = ["link", "agent", "sshd", "disk"]

    fleet = Fleet(client_key, dialer=ssh_lab.dialer, settings=LINK, backoff=RETRY, on_change=seen.on_change)
    started = time.monotonic()
    with fleet, TelemetryFollower(fleet, fleet.cluster(), on_event=seen.on_event, retry=RETRY):
        time.sleep(min(WARMUP_S, duration / 4))
        turn = 0
        next_rss = 0.0
        while time.monotonic() - started < duration - FAULT_S - QUIET_S:
            node = ssh_lab.nodes[turn % NODES]
            fault = Fault(kinds[turn % len(kinds)], node.name, time.monotonic())
            run_fault(fault.kind, node, ssh_lab, agents, mounts)
            fault.end = time.monotonic()
            faults.append(fault)
            turn += 1
            quiet_until = time.monotonic() + QUIET_S
            while time.monotonic() < quiet_until:
                if time.monotonic() >= next_rss:
                    at = time.monotonic() - started
                    rss["client"].append((at, me.memory_info().rss / 1e6))
                    rss["agents"].append((at, _rss_mb(p for n in ssh_lab.nodes if (p := agents.agent_pid(n)))))
                    next_rss = time.monotonic() + 5
                time.sleep(0.5)
        time.sleep(QUIET_S)  # the last fault's node comes back before the follower stops
    elapsed = time.monotonic() - started

    for fault in faults:
        fault.offline_after_s = seen.state_after(fault.node, fault.start, lambda s: s is not NodeState.ONLINE)
        if fault.offline_after_s is None:
            fault.stayed_online, fault.online_after_s = True, 0.0
        else:
            # Online again: the first "online" after both the fault's end and the node's going down.
            since = max(fault.end, fault.start + fault.offline_after_s)
            back = seen.state_after(fault.node, since, lambda s: s is NodeState.ONLINE)
            fault.online_after_s = None if back is None else since + back - fault.end

    # Samples: within each agent run, every seq from the first to the last received must be there.
    runs = []
    with seen.lock:
        for (node, run_id), seqs in sorted(seen.seqs.items()):
            expected = max(seqs) - min(seqs) + 1
            runs.append({"node": node, "run": run_id, "expected": expected, "received": len(seqs),
                         "missing": expected - len(seqs)})  # fmt: skip
        gaps = {node: len(g) for node, g in seen.gaps.items()}
    nominal = int(elapsed * SAMPLE_HZ * NODES)
    received = sum(r["received"] for r in runs)
    missing = sum(r["missing"] for r in runs)
    kills = defaultdict(int)
    for fault in faults:
        if fault.kind == "agent":
            kills[fault.node] += 1
    warm = [p for p in rss["client"] if p[0] > WARMUP_S]
    # The agents' rings fill for their first 11 minutes (by design); their slope counts once they are full.
    full_rings = [p for p in rss["agents"] if p[0] > RING_WINDOW_S + WARMUP_S]
    warm_agents = full_rings if len(full_rings) >= 10 else [p for p in rss["agents"] if p[0] > WARMUP_S]
    figures = {
        "duration_s": round(elapsed, 1),
        "nodes": NODES,
        "sample_hz": SAMPLE_HZ,
        "samples": {"nominal_8x10Hz": nominal, "received": received, "missing_within_runs": missing},
        "runs": runs,
        "gaps_marked": gaps,
        "agent_kills": dict(kills),
        "rss_mb": {
            "client_first": rss["client"][0][1] if rss["client"] else None,
            "client_last": rss["client"][-1][1] if rss["client"] else None,
            "client_slope_mb_per_h": round(_slope_mb_per_h(warm), 2),
            "agents_first": rss["agents"][0][1] if rss["agents"] else None,
            "agents_last": rss["agents"][-1][1] if rss["agents"] else None,
            "agents_slope_mb_per_h": round(_slope_mb_per_h(warm_agents), 2),
            "agents_rings_full": warm_agents is full_rings,
            "note": "client RSS includes this test's own record of every sequence number received",
        },
        "faults": [vars(f) | {"start": round(f.start - started, 1), "end": round(f.end - started, 1)}
                   for f in faults],  # fmt: skip
    }
    (perf_out / "soak_faults.json").write_text(json.dumps(figures, indent=2))
    print(f"\nsoak: {elapsed:.0f} s, {NODES} nodes at {SAMPLE_HZ:g} Hz: {received} samples received of "
          f"{nominal} nominal (anchor: 8 x 10 Hz x the run); {missing} missing inside agent runs")  # fmt: skip
    print(f"gaps marked {gaps} for agent kills {dict(kills)}")
    print(f"RSS client {figures['rss_mb']['client_first']:.0f} -> {figures['rss_mb']['client_last']:.0f} MB "
          f"(slope {figures['rss_mb']['client_slope_mb_per_h']} MB/h), agents "
          f"{figures['rss_mb']['agents_first']:.0f} -> {figures['rss_mb']['agents_last']:.0f} MB "
          f"(slope {figures['rss_mb']['agents_slope_mb_per_h']} MB/h, "
          f"{'rings full' if figures['rss_mb']['agents_rings_full'] else 'rings still filling'})")  # fmt: skip
    for fault in faults:
        if fault.stayed_online:
            print(f"  {fault.kind:5} on {fault.node}: stayed online throughout")
            continue
        on = "never" if fault.online_after_s is None else f"{fault.online_after_s:.1f} s"
        print(f"  {fault.kind:5} on {fault.node}: offline/degraded after {fault.offline_after_s:.1f} s, "
              f"online {on} after it ended")

    assert faults, "the soak was too short for a single fault"
    assert missing == 0, [r for r in runs if r["missing"]]  # nothing lost while the ring covered the outage
    for node, count in kills.items():
        assert gaps.get(node, 0) >= count, f"{node}: {count} agent restarts but {gaps.get(node, 0)} gaps marked"
    assert all(f.online_after_s is not None for f in faults), [vars(f) for f in faults if f.online_after_s is None]
    assert all(f.offline_after_s is not None for f in faults if f.kind in ("link", "sshd", "agent"))
