"""Keeping the agent running on a node: a systemd user service, or the supervised fallback.

- ``systemd-user``: where ``systemctl --user`` works. The unit (the one in
  packaging/systemd, pointed at the layout's ``current`` link) goes to
  ``~/.config/systemd/user``; deploy reloads, enables and restarts it.
  Lingering is switched on when allowed, so the agent outlives SSH logins.
- ``supervised``: ``sparksync-agent supervise``, started detached with
  ``setsid -f`` so it survives the SSH session; it restarts a crashed agent
  and leaves its pid in the layout's ``supervise.pid``.

Both start the agent through ``current``, so switching that link and
restarting is how versions change.
"""

from __future__ import annotations

import logging

from sparksync.core.deploy.errors import StartError
from sparksync.core.deploy.layout import LAYOUT, SERVICE_NAME, RemoteLayout
from sparksync.core.deploy.prechecks import NodeFacts
from sparksync.core.deploy.remote import RemoteNode, failure_text

log = logging.getLogger(__name__)

SYSTEMD = "systemd-user"
SUPERVISED = "supervised"
MODES = (SYSTEMD, SUPERVISED)
SUPERVISOR_START_TIMEOUT_S = 20.0

UNIT_TEMPLATE = """\
# SparkSync node agent, as a systemd *user* service, written by `sparksync node deploy`.
# The agent's versions live in ~/{root}/versions; `current` links the one that runs.
[Unit]
Description=SparkSync node agent (telemetry and workloads)
Documentation=https://github.com/sparksync/sparksync
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={exec_start}
# The state directory (token, node id) lives in ~/{state_dir}
# and survives restarts; the agent refuses a token file others can read.
Restart=on-failure
RestartSec=2
# SIGTERM stops the agent cleanly in under 2 s.
TimeoutStopSec=5
# Workloads run in their own keeper processes: restarting or upgrading the
# agent must not kill them, so the new agent can re-attach to them.
KillMode=process
NoNewPrivileges=yes
# No PrivateTmp: workloads started through the agent share the node's /tmp
# with the user's own shell (models and sockets often live there).

[Install]
WantedBy=default.target
"""


def agent_args(advertise: bool, sample_hz: float) -> list[str]:
    """The options of ``serve`` (and ``supervise``) besides the state dir."""
    return ["--sample-hz", f"{sample_hz:g}", "--advertise" if advertise else "--no-advertise"]


def unit_text(advertise: bool = True, sample_hz: float = 1.0, layout: RemoteLayout = LAYOUT) -> str:
    exec_start = " ".join(
        [f"%h/{layout.current_agent}", "serve", "--port", "0", "--state-dir", f"%h/{layout.state_dir}"]
        + agent_args(advertise, sample_hz)
    )
    return UNIT_TEMPLATE.format(root=layout.root, state_dir=layout.state_dir, exec_start=exec_start)


def choose_mode(facts: NodeFacts, forced: str | None = None) -> str:
    if forced is not None:
        if forced not in MODES:
            raise ValueError(f"unknown service mode {forced!r}; use one of {', '.join(MODES)}")
        return forced
    return SYSTEMD if facts.systemd_user else SUPERVISED


def running_mode(facts: NodeFacts) -> str | None:
    """How the agent runs on the node now, as far as the probe saw."""
    if facts.supervisor_pid is not None:
        return SUPERVISED
    if facts.service_active:
        return SYSTEMD
    return None


# --- starting -------------------------------------------------------------------------------


def restart(remote: RemoteNode, mode: str, *, advertise: bool, sample_hz: float) -> list[str]:
    """(Re)start the agent of ``current`` in ``mode``, stopping the other mode's agent; notes for the user."""
    if mode == SYSTEMD:
        stop_supervisor(remote)
        return _restart_systemd(remote, advertise, sample_hz)
    stop_systemd(remote, quiet=True)
    stop_supervisor(remote)
    _start_supervisor(remote, advertise, sample_hz)
    return []


def _restart_systemd(remote: RemoteNode, advertise: bool, sample_hz: float) -> list[str]:
    remote.check_sh('mkdir -p "$1"', LAYOUT.unit_dir, doing="making the systemd user unit folder")
    remote.write_file(LAYOUT.unit_file, unit_text(advertise, sample_hz).encode())
    remote.check_sh(
        'systemctl --user daemon-reload && systemctl --user enable "$1" && systemctl --user restart "$1"',
        SERVICE_NAME,
        doing="starting the agent's systemd user service",
    )
    linger = remote.sh('loginctl enable-linger "$(id -un)" 2>&1')
    if linger.exit_status != 0:
        return [
            "lingering could not be switched on, so the agent stops when your last session on the node "
            "ends; run 'sudo loginctl enable-linger $USER' on the node once"
        ]
    return []


_START_SUPERVISOR = r"""
mkdir -p "$HOME/$1" "$HOME/$2" || exit 1
rm -f "$HOME/$6"  # the last supervisor's counts must not read as this one's
setsid -f "$HOME/$3" supervise --pid-file "$HOME/$4" --log-file "$HOME/$5" --state-file "$HOME/$6" \
    --state-dir "$HOME/$7" "$8" "$9" "${10}" </dev/null >>"$HOME/$5" 2>&1 || exit 1
i=0
while [ $i -lt "${11}" ]; do
  if [ -s "$HOME/$4" ]; then pid=$(cat "$HOME/$4"); kill -0 "$pid" 2>/dev/null && { echo "$pid"; exit 0; }; fi
  sleep 0.1; i=$((i+1))
done
echo "the supervisor did not start; its log ends:" >&2
tail -n 5 "$HOME/$5" >&2
exit 1
"""


def _start_supervisor(remote: RemoteNode, advertise: bool, sample_hz: float) -> int:
    layout = LAYOUT
    tries = str(int(SUPERVISOR_START_TIMEOUT_S * 10))
    result = remote.sh(
        _START_SUPERVISOR,
        layout.root, layout.state_dir, layout.current_agent, layout.supervise_pid, layout.log_file,
        layout.supervise_state, layout.state_dir, *agent_args(advertise, sample_hz), tries,
        timeout=SUPERVISOR_START_TIMEOUT_S + 15,
    )  # fmt: skip
    if result.exit_status != 0:
        raise StartError(f"the agent's supervisor did not start on {remote.name}: {failure_text(result, 6)}")
    return int(result.stdout.split()[-1])


# --- stopping -------------------------------------------------------------------------------

_STOP_SUPERVISOR = r"""
f="$HOME/$1"
[ -f "$f" ] || exit 0
pid=$(cat "$f" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) rm -f "$f"; exit 0 ;; esac
if ! tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q supervise; then rm -f "$f"; exit 0; fi
kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; echo "killed $pid"; else echo "stopped $pid"; fi
rm -f "$f"
"""


def stop_supervisor(remote: RemoteNode) -> str | None:
    """Stop the fallback supervisor (and with it its agent); what was done, or None if none ran."""
    result = remote.sh(_STOP_SUPERVISOR, LAYOUT.supervise_pid, timeout=30)
    if result.exit_status != 0:
        raise StartError(f"stopping the agent's supervisor on {remote.name} failed: {failure_text(result)}")
    return result.stdout.decode(errors="replace").strip() or None


def stop_systemd(remote: RemoteNode, *, quiet: bool = False, disable: bool = False) -> bool:
    """Stop (and maybe disable) the user service if user systemd works; True if it did."""
    verb = "disable --now" if disable else "stop"
    script = (
        "command -v systemctl >/dev/null 2>&1 && timeout 5 systemctl --user show-environment >/dev/null 2>&1 "
        f'|| exit 3\nsystemctl --user {verb} "$1" 2>&1 || true'
    )
    result = remote.sh(script, SERVICE_NAME, timeout=30)
    if result.exit_status == 3:
        return False
    if result.exit_status != 0 and not quiet:
        raise StartError(f"stopping the agent's service on {remote.name} failed: {failure_text(result)}")
    return True


def log_tail(remote: RemoteNode, mode: str, lines: int = 2) -> str:
    """The agent's own last log lines on the node (not the supervisor's), joined for one message line."""
    if mode == SYSTEMD:
        result = remote.sh('journalctl --user -u "$1" -n 40 --no-pager -o cat 2>&1', SERVICE_NAME)
    else:
        result = remote.sh('tail -n 40 "$1" 2>/dev/null', LAYOUT.log_file)
    text = result.stdout.decode(errors="replace").splitlines()
    agent = [line.strip() for line in text if line.strip() and " supervise[" not in line]
    return " / ".join(agent[-lines:])[-400:]
