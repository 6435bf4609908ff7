"""One probe of a node before anything changes there, and what it means for a deploy.

``PROBE`` is a POSIX sh script that only reads: CPU, home, python3 and
whether it can make venvs, free disk in the home, user systemd, and what
the layout already holds. It prints ``key=value`` lines that
``parse_facts`` turns into ``NodeFacts``; ``check_node`` and
``check_disk`` turn facts into verdicts, one clear line per failed check.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparksync.core.bundle.platforms import PYTHONS, Target, target_for_machine
from sparksync.core.deploy.errors import PrecheckError
from sparksync.core.deploy.layout import LAYOUT, RemoteLayout

MIB = 1024 * 1024
# A fresh venv (pip included) and room to spare, on top of what scales with the bundle.
VENV_BASE_BYTES = 24 * MIB
MARGIN_BYTES = 16 * MIB
# Installed wheels take about six times their compressed size (measured: 5.4 MB bundle, 32 MB installed).
INSTALLED_PER_BUNDLE_BYTE = 6
CPUS = ("aarch64", "arm64", "x86_64", "amd64")  # `uname -m` names that platforms.target_for_machine knows

PROBE = r"""
echo "arch=$(uname -m)"
echo "home=$HOME"
echo "user=$(id -un)"
if py=$(command -v python3 2>/dev/null); then
  echo "python=$py"
  # One interpreter start for both: its version, then whether it can make venvs.
  "$py" -c 'import sys; print("python_version=%d.%d.%d" % sys.version_info[:3], flush=True)
import venv, ensurepip; print("venv=yes")' 2>/dev/null || echo venv=no
fi
echo "df=$(df -Pk . 2>/dev/null | tail -n 1)"
echo "current=$(readlink "$1" 2>/dev/null)"
echo "previous=$(readlink "$2" 2>/dev/null)"
for d in "$3"/*/; do
  [ -d "$d" ] || continue
  v=$(basename "$d")
  if [ -f "$d/installed.json" ]; then echo "complete=$v"; else echo "partial=$v"; fi
done
if [ -f "$4" ]; then
  pid=$(cat "$4" 2>/dev/null)
  case "$pid" in ''|*[!0-9]*) ;; *)
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q supervise
    then echo "supervisor=$pid"; fi ;;
  esac
fi
if command -v systemctl >/dev/null 2>&1 && timeout 5 systemctl --user show-environment >/dev/null 2>&1
then
  echo systemd_user=yes
  echo "service=$(timeout 5 systemctl --user is-active sparksync-agent.service 2>/dev/null)"
  echo "linger=$(timeout 5 loginctl show-user "$(id -un)" -p Linger --value 2>/dev/null)"
else
  echo systemd_user=no
fi
"""


def probe_args(layout: RemoteLayout = LAYOUT) -> list[str]:
    return [layout.current, layout.previous, layout.versions, layout.supervise_pid]


@dataclass(frozen=True)
class NodeFacts:
    arch: str = ""
    home: str = ""
    user: str = ""
    python: str | None = None  # path of python3, None when there is none
    python_version: str | None = None  # "3.11.2"
    venv_ok: bool = False
    free_bytes: int | None = None  # in the home's file system
    current: str | None = None  # version `current` points to
    previous: str | None = None
    complete: tuple[str, ...] = ()  # installed versions (their marker is there)
    partial: tuple[str, ...] = ()  # version dirs a failed deploy left
    supervisor_pid: int | None = None
    systemd_user: bool = False
    service_active: bool = False
    linger: bool = False

    @property
    def python_minor(self) -> str | None:
        return ".".join(self.python_version.split(".")[:2]) if self.python_version else None


def parse_facts(text: str) -> NodeFacts:
    """``NodeFacts`` from the probe's output; unknown or garbled lines are ignored."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values.setdefault(key.strip(), []).append(value.strip())

    def one(key: str) -> str:
        return (values.get(key) or [""])[-1]

    return NodeFacts(
        arch=one("arch"),
        home=one("home"),
        user=one("user"),
        python=one("python") or None,
        python_version=one("python_version") or None,
        venv_ok=one("venv") == "yes",
        free_bytes=_free_bytes(one("df")),
        current=_version_of(one("current")),
        previous=_version_of(one("previous")),
        complete=tuple(values.get("complete", [])),
        partial=tuple(values.get("partial", [])),
        supervisor_pid=int(one("supervisor")) if one("supervisor").isdigit() else None,
        systemd_user=one("systemd_user") == "yes",
        service_active=one("service") == "active",
        linger=one("linger") == "yes",
    )


def _free_bytes(df_line: str) -> int | None:
    # POSIX `df -Pk`: filesystem, 1024-blocks, used, available, capacity, mounted on.
    fields = df_line.split()
    if len(fields) >= 6 and fields[3].isdigit():
        return int(fields[3]) * 1024
    return None


def _version_of(link_target: str) -> str | None:
    """``versions/0.1.0`` (or an absolute path ending so) -> ``0.1.0``."""
    name = link_target.rstrip("/").rpartition("/")[2]
    return name or None


def check_node(facts: NodeFacts, node: str) -> Target:
    """The bundle target the node needs; PrecheckError with one line per failed check otherwise."""
    problems = python_problems(facts, node)
    if facts.arch.lower() not in CPUS:
        problems.insert(
            0,
            f"{node}: the CPU is {facts.arch or 'unknown'!r}; the agent runs on aarch64 and x86_64 Linux only.",
        )
    if problems:
        raise PrecheckError(" ".join(problems), problems)
    assert facts.python_version is not None
    return target_for_machine(facts.arch, facts.python_version)


def python_problems(facts: NodeFacts, node: str) -> list[str]:
    if facts.python is None:
        return [
            f"{node}: python3 was not found on the node (not installed, or not on the PATH of "
            f"{facts.user or 'the user'}'s SSH sessions). Install it (DGX OS/Ubuntu: sudo apt install "
            "python3 python3-venv) and deploy again."
        ]
    if facts.python_version is None:
        return [f"{node}: {facts.python} does not run (python3 -c failed); repair the node's Python 3."]
    if facts.python_minor not in PYTHONS:
        return [
            f"{node}: python3 is {facts.python_version}, but the agent bundles need Python "
            f"{', '.join(PYTHONS[:-1])} or {PYTHONS[-1]} as python3; install one of these."
        ]
    if not facts.venv_ok:
        return [
            f"{node}: python3 {facts.python_version} cannot make virtual environments (its venv/ensurepip "
            f"module is missing). On Debian, Ubuntu and DGX OS install it: sudo apt install "
            f"python{facts.python_minor}-venv (or python3-venv), then deploy again."
        ]
    return []


def space_needed(bundle_bytes: int, *, upload: bool, install: bool) -> int:
    """Free bytes a deploy needs in the home: the upload, the unpacked copy and the venv."""
    if not install:
        return 0
    need = VENV_BASE_BYTES + MARGIN_BYTES + bundle_bytes * (1 + INSTALLED_PER_BUNDLE_BYTE)
    return need + (bundle_bytes if upload else 0)


def check_disk(facts: NodeFacts, node: str, needed: int) -> None:
    if needed <= 0 or facts.free_bytes is None or facts.free_bytes >= needed:
        return
    line = (
        f"{node}: not enough disk space in {facts.home or '~'}: the agent needs about "
        f"{_mib(needed)} MiB, {_mib(facts.free_bytes)} MiB are free. Free some space and deploy again."
    )
    raise PrecheckError(line, [line])


def _mib(count: int) -> str:
    return f"{count / MIB:.0f}" if count >= 10 * MIB else f"{count / MIB:.1f}"
