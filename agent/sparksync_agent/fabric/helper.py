"""The root helper: applies a node's part of a fabric plan, and rolls it back.

Run as root through sudo by the agent (``sudo_run``), never by hand::

    python -I -m sparksync_agent.fabric.helper apply --node-id ID --request FILE
    python -I -m sparksync_agent.fabric.helper rollback --node-id ID [--last]

It prints one ``FabricResult`` as JSON on stdout; exit 0 when it did what it
was asked, 1 when it failed (the node then is as it was before), 2 when the
request was refused before anything changed.

What it may touch, and nothing else:

- ConnectX-7 netdevs only (``enp1s0f0np0``-style names); a management
  interface (``enP7s7``, Wi-Fi) or any other name is refused;
- their IPv4 addresses, MTU and up state, and their ``arp_ignore`` and
  ``arp_announce`` sysctls (``fabric/arp.py``: a port's twins share one L2
  segment, so each must answer ARP for its own addresses only);
- ``/etc/netplan/40-sparksync-fabric.yaml`` and ``netplan apply`` where
  netplan runs the network (DGX OS), with
  ``/etc/sysctl.d/60-sparksync-fabric.conf`` for those sysctls;
- its own state under ``/var/lib/sparksync-fabric/<node id>/``.

Apply: the request is checked (names, addresses, MTU 1280-9216, no two
interfaces on one subnet, so twins are apart); the netplan YAML is rendered
and validated by ``netplan generate``; the netdevs' state is saved
(``before.json``, and on the first apply ``previous.json``); then the plan
is applied, netdev by netdev with iproute2 or as one netplan file, and read
back. Any failure puts back what was changed, from ``before.json``.

Rollback: returns the netdevs (and the netplan file) to ``previous.json``,
the state before SparkSync's first apply; ``--last`` undoes only the last
apply (``before.json``), which is what an all-or-nothing apply across nodes
uses when another node failed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sparksync_agent.atomic import write_atomic
from sparksync_agent.fabric import arp, netplan
from sparksync_agent.fabric.ports import is_fabric_name
from sparksync_agent.fabric.state import NETPLAN_FILE, STATE_ROOT, applier, state_dir
from sparksync_agent.protocol import FabricResult, NodeFabricPlan

MTU_RANGE = (1280, 9216)
IP_TIMEOUT_S = 15
NETPLAN_APPLY_TIMEOUT_S = 120
NETPLAN_SETTLE_S = 20.0


class Refused(Exception):
    """The request is not one the helper carries out; nothing was changed."""


class StepFailed(Exception):
    """A step of the apply failed; what was changed is put back."""


# --- checks ----------------------------------------------------------------------------------


def check_request(plan: NodeFabricPlan) -> None:
    if not plan.interfaces:
        raise Refused("the plan has no interface for this node")
    seen: set[str] = set()
    subnets: dict[ipaddress.IPv4Network, str] = {}
    for iface in plan.interfaces:
        if not is_fabric_name(iface.name):
            raise Refused(
                f"{iface.name} is not a ConnectX-7 fabric netdev; the helper never touches other interfaces "
                "(management enP7s7, Wi-Fi, ...)"
            )
        if iface.name in seen:
            raise Refused(f"{iface.name} is in the plan twice")
        seen.add(iface.name)
        if not MTU_RANGE[0] <= iface.mtu <= MTU_RANGE[1]:
            raise Refused(f"MTU {iface.mtu} for {iface.name} is outside {MTU_RANGE[0]}-{MTU_RANGE[1]}")
        if not iface.addresses:
            raise Refused(f"{iface.name} has no address in the plan")
        for text in iface.addresses:
            try:
                address = ipaddress.ip_interface(text)
            except ValueError:
                raise Refused(f"{text!r} for {iface.name} is not an address/prefix") from None
            if not isinstance(address, ipaddress.IPv4Interface) or "/" not in text:
                raise Refused(f"{text!r} for {iface.name}: the fabric plan uses IPv4 address/prefix pairs")
            other = subnets.get(address.network)
            if other is not None and other != iface.name:
                raise Refused(
                    f"{iface.name} and {other} would share subnet {address.network}: twins and ports "
                    "need subnets of their own"
                )
            subnets[address.network] = iface.name


# --- the netdevs, through iproute2 -------------------------------------------------------------


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    ip = shutil.which("ip") or "/usr/sbin/ip"
    return subprocess.run([ip, *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)


def _must(*args: str) -> None:
    done = _ip(*args)
    if done.returncode != 0:
        raise StepFailed(f"'ip {' '.join(args)}' failed: {done.stderr.strip() or done.returncode}")


def capture(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each netdev's IPv4 addresses, MTU and up state (``exists: False`` for one that is gone)."""
    state: dict[str, dict[str, Any]] = {}
    for name in names:
        done = _ip("-j", "addr", "show", "dev", name)
        try:
            [entry] = json.loads(done.stdout) if done.returncode == 0 else [None]
        except ValueError:
            entry = None
        if not entry:
            state[name] = {"exists": False}
            continue
        state[name] = {
            "exists": True,
            "mtu": int(entry.get("mtu", 1500)),
            "up": "UP" in entry.get("flags", []),
            "addresses": [
                f"{a['local']}/{a['prefixlen']}" for a in entry.get("addr_info", [])
                if a.get("family") == "inet" and a.get("scope", "global") != "host"
            ],
        }  # fmt: skip
    return state


def configure(name: str, addresses: Sequence[str], mtu: int, up: bool = True) -> None:
    _must("-4", "addr", "flush", "dev", name)
    _must("link", "set", "dev", name, "mtu", str(mtu))
    for address in addresses:
        _must("addr", "add", address, "dev", name)
    _must("link", "set", "dev", name, "up" if up else "down")


def restore(saved: dict[str, dict[str, Any]], steps: list[str]) -> list[str]:
    """Put each saved netdev back; returns what could not be (a netdev that is gone is skipped)."""
    problems = []
    for name, state in saved.items():
        if not state.get("exists"):
            continue
        if not capture([name])[name].get("exists"):
            steps.append(f"{name} is gone; nothing to restore there")
            continue
        try:
            configure(name, state.get("addresses", []), int(state.get("mtu", 1500)), bool(state.get("up")))
            steps.append(f"restored {name}: MTU {state.get('mtu')}, {', '.join(state.get('addresses', [])) or 'no IPv4'}")
        except StepFailed as exc:
            problems.append(str(exc))
    return problems


def verify(plan: NodeFabricPlan, settle_s: float = 0.0) -> None:
    """Every planned netdev has its addresses and MTU; ``settle_s``: how long the renderer may take."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            return _verify_once(plan)
        except StepFailed:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _verify_once(plan: NodeFabricPlan) -> None:
    now = capture([i.name for i in plan.interfaces])
    for iface in plan.interfaces:
        state = now[iface.name]
        if not state.get("exists"):
            raise StepFailed(f"{iface.name} is gone")
        if state["mtu"] != iface.mtu:
            raise StepFailed(f"{iface.name} has MTU {state['mtu']} after the apply, not {iface.mtu}")
        missing = set(iface.addresses) - set(state["addresses"])
        if missing:
            raise StepFailed(f"{iface.name} lacks {', '.join(sorted(missing))} after the apply")


# --- netplan ---------------------------------------------------------------------------------


def _netplan_apply() -> None:
    netplan_cmd = shutil.which("netplan") or "/usr/sbin/netplan"
    done = subprocess.run([netplan_cmd, "apply"], capture_output=True, text=True, timeout=NETPLAN_APPLY_TIMEOUT_S)
    if done.returncode != 0:
        raise StepFailed(f"netplan apply failed: {(done.stderr or done.stdout).strip() or done.returncode}")


def _read_netplan_file() -> str | None:
    try:
        return NETPLAN_FILE.read_text()
    except FileNotFoundError:
        return None


def _write_netplan_file(text: str | None) -> None:
    if text is None:
        NETPLAN_FILE.unlink(missing_ok=True)
        return
    NETPLAN_FILE.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(NETPLAN_FILE, text, 0o600)


# --- state files ------------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _save(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.chmod(0o644)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --- actions ---------------------------------------------------------------------------------


def apply(plan: NodeFabricPlan, node_id: str, root: Path = STATE_ROOT, mode: str | None = None) -> FabricResult:
    mode = mode or applier()
    result = FabricResult(ok=False, action="apply", applier=mode, plan_id=plan.plan_id)
    check_request(plan)
    text = netplan.render(plan.plan_id, plan.interfaces)
    result.netplan_yaml = text
    result.netplan_validated, note = netplan.validate(text)
    result.steps.append(note)
    if not result.netplan_validated:
        if mode == "netplan" or shutil.which("netplan"):
            raise Refused(f"netplan refused the generated file: {note}")
        result.netplan_note = note
    directory = state_dir(node_id, root)
    names = [i.name for i in plan.interfaces]
    with _locked(directory):
        previous = _load(directory / "previous.json")
        applied = _load(directory / "applied.json")
        interfaces = capture(names)
        before: dict[str, Any] = {"interfaces": interfaces, "netplan_file": _read_netplan_file(),
                                  "arp": arp.capture(names), "sysctl_file": arp.read_file(),
                                  "plan_id": (applied or {}).get("plan_id"), "had_previous": previous is not None}
        _save(directory / "before.json", before)
        if previous is None:
            previous = {"interfaces": {}, "netplan_file": before["netplan_file"], "arp": {},
                        "sysctl_file": before["sysctl_file"]}
        for name, state in interfaces.items():
            previous["interfaces"].setdefault(name, state)  # the state before SparkSync, kept across re-applies
        for name, values in before["arp"].items():
            previous.setdefault("arp", {}).setdefault(name, values)
        _save(directory / "previous.json", previous)
        try:
            if mode == "netplan":
                _write_netplan_file(text)
                result.steps.append(f"wrote {NETPLAN_FILE}")
                arp.write_file(arp.render(names))
                result.steps.append(f"wrote {arp.SYSCTL_FILE}")
                _netplan_apply()
                result.steps.append("netplan apply")
            else:
                for iface in plan.interfaces:
                    configure(iface.name, iface.addresses, iface.mtu)
                    result.steps.append(f"{iface.name}: MTU {iface.mtu}, {', '.join(iface.addresses)}")
            # Set now on both paths; the sysctl.d file is what keeps them across a reboot.
            result.steps += arp.write(arp.wanted(names))
            # netplan hands the netdevs to the system's renderer, which sets them a moment later.
            verify(plan, NETPLAN_SETTLE_S if mode == "netplan" else 0.0)
        except (StepFailed, OSError, subprocess.TimeoutExpired) as exc:
            result.error = str(exc)
            _undo(directory, before, mode, result.steps)
            result.restored = True
            return result
        _save(directory / "applied.json", {"plan_id": plan.plan_id, "applier": mode})
    result.ok = True
    return result


def rollback(node_id: str, root: Path = STATE_ROOT, last: bool = False, mode: str | None = None) -> FabricResult:
    mode = mode or applier()
    result = FabricResult(ok=False, action="rollback", applier=mode)
    directory = state_dir(node_id, root)
    if not directory.is_dir():
        result.ok = True
        result.steps.append("nothing to roll back: SparkSync never applied a fabric plan here")
        return result
    with _locked(directory):
        saved = _load(directory / ("before.json" if last else "previous.json"))
        if saved is None:
            result.ok = True
            result.steps.append("nothing to roll back")
            return result
        result.plan_id = (_load(directory / "applied.json") or {}).get("plan_id")
        problems = _undo(directory, saved, mode, result.steps)
        if problems:
            result.error = "; ".join(problems)
            return result
    result.ok = True
    return result


def _undo(directory: Path, saved: dict[str, Any], mode: str, steps: list[str]) -> list[str]:
    """Back to ``saved`` (a before.json or previous.json), then the state files say so."""
    problems = []
    if _read_netplan_file() != saved.get("netplan_file"):
        _write_netplan_file(saved.get("netplan_file"))
        steps.append(f"{'restored' if saved.get('netplan_file') else 'removed'} {NETPLAN_FILE}")
        if mode == "netplan":
            try:
                _netplan_apply()
                steps.append("netplan apply")
            except (StepFailed, subprocess.TimeoutExpired) as exc:
                problems.append(str(exc))
    if arp.read_file() != saved.get("sysctl_file"):
        try:
            arp.write_file(saved.get("sysctl_file"))
            steps.append(f"{'restored' if saved.get('sysctl_file') else 'removed'} {arp.SYSCTL_FILE}")
        except OSError as exc:
            problems.append(f"{arp.SYSCTL_FILE}: {exc}")
    problems += restore(saved.get("interfaces", {}), steps)
    present = arp.capture(list(saved.get("arp", {})))
    try:
        steps += arp.write({name: values for name, values in saved.get("arp", {}).items() if name in present})
    except OSError as exc:
        problems.append(f"ARP settings: {exc}")
    if problems:
        return problems
    is_last = "had_previous" in saved
    if is_last and saved.get("plan_id"):
        _save(directory / "applied.json", {"plan_id": saved["plan_id"], "applier": mode})
    else:
        (directory / "applied.json").unlink(missing_ok=True)
    if not is_last or not saved.get("had_previous"):
        (directory / "previous.json").unlink(missing_ok=True)  # the node is as before SparkSync again
    (directory / "before.json").unlink(missing_ok=True)
    return problems


# --- command line ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparksync_agent.fabric.helper")
    parser.add_argument("action", choices=("apply", "rollback"))
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--request", type=Path, help="apply: the NodeFabricPlan as JSON")
    parser.add_argument("--last", action="store_true", help="rollback: undo only the last apply")
    args = parser.parse_args(argv)
    try:
        if args.action == "apply":
            if args.request is None:
                raise Refused("apply needs --request FILE")
            plan = NodeFabricPlan.model_validate_json(args.request.read_bytes())
            result = apply(plan, args.node_id)
        else:
            result = rollback(args.node_id, last=args.last)
    except (Refused, ValueError, OSError) as exc:
        refused = FabricResult(ok=False, action=args.action, applier=applier(), error=str(exc))
        print(refused.model_dump_json())
        return 2
    print(result.model_dump_json())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

