"""A real OpenSSH server per lab node, with its own host key, config and test user.

``SshdService`` is a ``NodeService``: ``lab.add_service(SshdService(dir))``
starts, inside each node's namespace::

    unshare --uts sh -c 'hostname <node hostname> && exec /usr/sbin/sshd -D -e -f <config>'

- its own ed25519 host key (ssh-keygen, in the test's tmp dir), PidFile and
  log file, ``ListenAddress <node ip>``, ``Port 22``, password logins through
  PAM, ``AllowUsers`` the node's test user, ``Subsystem sftp internal-sftp``,
  ``StrictModes yes``;
- its own UTS namespace with a hostname of its own, so ``uname -n`` over SSH
  tells nodes apart as on real machines;
- its own test user (``sslab<pid>x<tok>n<i>``, made with useradd -m and
  chpasswd). The namespaces share the filesystem, so /home is shared: one
  user per node keeps each node's authorized_keys apart.

``stop`` ends sshd and the user's processes (by pid) and deletes the user
with ``userdel -r``. Users left by aborted runs are reaped by
``reap_stale_users`` like ``netlab.reap_stale_labs`` reaps namespaces.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from .netlab import Lab, LabError, LabNode, NodeService, _pid_alive, _stop_popen, existing_labs
from .nsnet import NetnsDialer, read_banner

log = logging.getLogger(__name__)

SSHD = "/usr/sbin/sshd"
PASSWORD = "lab-Passw0rd"
START_TIMEOUT_S = 10.0
_USER_RE = re.compile(r"^sslab(\d+)x([0-9a-f]{4})n(\d+)$")

CONFIG = """\
Port 22
ListenAddress {ip}
HostKey {host_key}
PidFile {pid_file}
PasswordAuthentication yes
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM yes
AllowUsers {user}
Subsystem sftp internal-sftp
StrictModes yes
PrintMotd no
UseDNS no
LogLevel VERBOSE
"""


def missing_tools() -> str | None:
    """None when the lab can run sshd, else what is missing."""
    for tool in (SSHD, "ssh-keygen", "useradd", "userdel", "chpasswd", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install openssh-server openssh-client)"
    return None


def user_name(lab: Lab, node: LabNode) -> str:
    pid, token = lab.id.split("-", 1)
    return f"sslab{pid}x{token}n{node.index}"


@dataclass
class SshdNode:
    """What the service made for one node."""

    user: str
    hostname: str
    directory: Path
    config: Path
    host_key: Path
    log_file: Path
    proc: subprocess.Popen | None = None


class SshdService(NodeService):
    def __init__(self, workdir: Path, password: str = PASSWORD):
        self.workdir = Path(workdir)
        self.password = password
        self.nodes: dict[str, SshdNode] = {}

    # --- NodeService ---------------------------------------------------------------------

    def start(self, lab: Lab, node: LabNode) -> None:
        user = user_name(lab, node)
        directory = self.workdir / node.name
        directory.mkdir(parents=True, exist_ok=True)
        info = SshdNode(
            user=user,
            hostname=f"spark-{lab.id.split('-')[1]}{node.index:02d}",
            directory=directory,
            config=directory / "sshd_config",
            host_key=directory / "ssh_host_ed25519_key",
            log_file=directory / "sshd.log",
        )
        self.nodes[node.name] = info  # before anything that can fail: stop() cleans up what exists
        node.extra.update(ssh_user=user, ssh_password=self.password, ssh_port=22, hostname=info.hostname)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        _create_user(user, self.password)
        _new_host_key(info.host_key)
        info.config.write_text(
            CONFIG.format(ip=node.ip, host_key=info.host_key, pid_file=directory / "sshd.pid", user=user)
        )
        self._launch(lab, node)

    def stop(self, lab: Lab, node: LabNode) -> None:
        info = self.nodes.get(node.name)
        if info is None:
            return
        self._stop_sshd(info)
        _kill_user_processes(info.user)
        _delete_user(info.user)

    # --- what tests do to a node --------------------------------------------------------------

    def restart(self, lab: Lab, node: LabNode) -> None:
        info = self.nodes[node.name]
        self._stop_sshd(info)
        self._launch(lab, node)

    def regenerate_host_key(self, lab: Lab, node: LabNode) -> None:
        """A new host key (as a reinstalled node would have), served after an sshd restart."""
        info = self.nodes[node.name]
        for path in (info.host_key, info.host_key.with_name(info.host_key.name + ".pub")):
            path.unlink(missing_ok=True)
        _new_host_key(info.host_key)
        self.restart(lab, node)

    def add_config(self, lab: Lab, node: LabNode, *lines: str) -> None:
        """Append sshd_config lines (e.g. an AuthorizedKeysFile) and restart the node's sshd."""
        info = self.nodes[node.name]
        with info.config.open("a") as config:
            config.writelines(line + "\n" for line in lines)
        self.restart(lab, node)

    def fingerprint(self, node: LabNode) -> str:
        """The host key's fingerprint as ssh-keygen prints it."""
        pub = self.nodes[node.name].host_key.with_name("ssh_host_ed25519_key.pub")
        done = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True)
        return done.stdout.split()[1]

    def home(self, node: LabNode) -> Path:
        return Path(pwd.getpwnam(self.nodes[node.name].user).pw_dir)

    # --- internals -------------------------------------------------------------------------

    def stop_sshd(self, node: LabNode) -> None:
        """Stop the node's sshd (its port then refuses); ``restart`` brings it back."""
        self._stop_sshd(self.nodes[node.name])

    @staticmethod
    def _stop_sshd(info: SshdNode) -> None:
        """Stop the listener and the per-connection sshd processes it forked."""
        if info.proc is None:
            return
        try:
            sessions = psutil.Process(info.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            sessions = []
        _stop_popen(info.proc)
        _kill_and_wait([proc.pid for proc in sessions])

    def _launch(self, lab: Lab, node: LabNode) -> None:
        info = self.nodes[node.name]
        script = 'hostname "$1" && shift && exec "$@"'
        argv = [
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            info.hostname,
            SSHD,
            "-D",
            "-e",
            "-f",
            str(info.config),
        ]
        with info.log_file.open("ab") as log_file:
            # unshare and sh exec, so the Popen's pid ends up being sshd's own.
            info.proc = lab.popen(node, argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        self._wait_accepting(node, info)

    def _wait_accepting(self, node: LabNode, info: SshdNode) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if read_banner(node.netns, node.ip, 22, 2.0).startswith(b"SSH-2.0-"):
                    return
            except OSError:
                pass
            if info.proc.poll() is not None or time.monotonic() > deadline:
                raise LabError(f"sshd on {node.name} did not start: {info.log_file.read_text()[-2000:]}")
            time.sleep(0.02)


# --- users -------------------------------------------------------------------------------


def _run(argv: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(argv, check=False, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise LabError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.returncode}")


def _create_user(user: str, password: str) -> None:
    _run(["useradd", "--create-home", "--shell", "/bin/bash", user])
    _run(["chpasswd"], stdin=f"{user}:{password}\n")


def _new_host_key(path: Path) -> None:
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sslab-host", "-f", str(path)])


def _user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def _kill_user_processes(user: str) -> None:
    """SIGKILL, by pid, every process running as ``user`` (sessions our sshd started for it)."""
    if not _user_exists(user):
        return
    uid = pwd.getpwnam(user).pw_uid
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    _kill_and_wait([proc.pid for proc in procs])


def _kill_and_wait(pids: list[int], timeout_s: float = 5.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie only waits for its parent to reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _delete_user(user: str) -> None:
    if not _user_exists(user):
        return
    # userdel -r warns (exit 12) when the user has no mail spool; the user is gone all the same.
    done = subprocess.run(
        ["userdel", "--remove", user], check=False, capture_output=True, text=True, timeout=30
    )
    if _user_exists(user):
        raise LabError(f"userdel {user} failed: {done.stderr.strip() or done.returncode}")


def lab_users() -> list[str]:
    return [entry.pw_name for entry in pwd.getpwall() if _USER_RE.match(entry.pw_name)]


def reap_stale_users() -> list[str]:
    """Delete lab users whose lab is gone and whose owner process is dead (aborted runs)."""
    labs, reaped = existing_labs(), []
    for user in lab_users():
        pid, token, _ = _USER_RE.match(user).groups()
        if f"{pid}-{token}" in labs or (int(pid) != 0 and _pid_alive(int(pid))):
            continue
        _kill_user_processes(user)
        _delete_user(user)
        reaped.append(user)
    return reaped


# --- a lab of SSH nodes plus a client namespace -----------------------------------------


class SshLab:
    """``nodes`` run sshd; ``client`` is a namespace on the same bridge without one.

    The client core runs in the test process but dials from ``client``
    (``dialer``), since the host namespace has no link to the lab.
    """

    def __init__(self, lab: Lab, service: SshdService):
        self.lab = lab
        self.service = service
        self.nodes = lab.nodes[:-1]
        self.client = lab.nodes[-1]
        self.dialer = NetnsDialer(self.client.netns)

    def node(self, name: str) -> LabNode:
        return self.lab.node(name)

    def user(self, node: LabNode) -> str:
        return self.service.nodes[node.name].user

    def hostname(self, node: LabNode) -> str:
        return self.service.nodes[node.name].hostname

    def fingerprint(self, node: LabNode) -> str:
        return self.service.fingerprint(node)

    def authorized_keys_path(self, node: LabNode) -> Path:
        return self.service.home(node) / ".ssh" / "authorized_keys"

    def regenerate_host_key(self, node: LabNode) -> None:
        self.service.regenerate_host_key(self.lab, node)

    def stop_sshd(self, node: LabNode) -> None:
        self.service.stop_sshd(node)

    def set_link(self, node: LabNode, up: bool) -> None:
        self.lab.exec(node, ["ip", "link", "set", node.iface, "up" if up else "down"], check=True)

    def users(self) -> list[str]:
        return [info.user for info in self.service.nodes.values()]
