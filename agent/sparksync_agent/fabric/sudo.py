"""Running the root helper through sudo, with the user's password on sudo's standard input.

The password is asked once by the client, sent in the request body through
the SSH tunnel, written to sudo's stdin (``sudo -S``) and dropped: it is never
on a command line, in a file, in the environment or in a log. ``-k`` makes
sudo ask for it every time, so a wrong password is always noticed and no
cached credential outlives the call; ``-p ''`` keeps sudo's prompt out of
the output.

Why a password and not a sudoers rule: the helper is Python from the
agent's venv, which the user owns; a NOPASSWD rule for it would let anyone
who can write that venv run anything as root. With the password, sudo
grants exactly what the user could do with it anyway, once, for this call.

The request (addresses, no secret) goes in a file of the agent's state dir,
not on stdin, so a refused password is never retried with the request's
bytes.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sparksync_agent.protocol import FabricResult, NodeFabricPlan

log = logging.getLogger(__name__)

HELPER_MODULE = "sparksync_agent.fabric.helper"
HELPER_TIMEOUT_S = 180.0
_REFUSALS = (
    "incorrect password", "sorry, try again", "no password was provided", "a password is required",
    "is not in the sudoers file", "may not run sudo", "not allowed to execute",
)  # fmt: skip


class SudoRefused(RuntimeError):
    """sudo did not run the helper: wrong password, or the user may not use sudo."""


class HelperFailed(RuntimeError):
    """The helper ran but gave no readable answer."""


class HelperRefused(RuntimeError):
    """The helper refused the request before changing anything."""


def helper_argv(action: str, node_id: str, request: Path | None = None, last: bool = False) -> list[str]:
    argv = [sys.executable, "-I", "-m", HELPER_MODULE, action, "--node-id", node_id]
    if request is not None:
        argv += ["--request", str(request)]
    if last:
        argv.append("--last")
    return argv


def run_helper(
    action: str,
    node_id: str,
    password: str,
    state_dir: Path,
    plan: NodeFabricPlan | None = None,
    last: bool = False,
    timeout_s: float = HELPER_TIMEOUT_S,
) -> FabricResult:
    sudo = shutil.which("sudo")
    if sudo is None:
        raise SudoRefused("sudo is not installed on this node (Debian/Ubuntu: apt install sudo)")
    request = None
    if plan is not None:
        request = state_dir / "fabric-request.json"
        fd = os.open(request, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(plan.model_dump_json())
    argv = [sudo, "-S", "-k", "-p", "", "--", *helper_argv(action, node_id, request, last)]
    log.info("fabric %s through sudo (node %s)", action, node_id[:8])
    try:
        done = subprocess.run(argv, input=password + "\n", capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise HelperFailed(f"the fabric helper did not finish its {action} within {timeout_s:g} s") from None
    finally:
        if request is not None:
            request.unlink(missing_ok=True)
    result = _result(done.stdout)
    if result is None:
        said = done.stderr.strip()
        if any(text in said.lower() for text in _REFUSALS):
            raise SudoRefused(f"sudo refused: {_last_lines(said)}")
        raise HelperFailed(f"the fabric helper's {action} gave no answer (exit {done.returncode}): {_last_lines(said)}")
    if done.returncode == 2:
        raise HelperRefused(result.error or "refused")
    return result


def _result(stdout: str) -> FabricResult | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            return FabricResult.model_validate_json(line)
        except ValueError:
            continue
    return None


def _last_lines(text: str, n: int = 3) -> str:
    # sudo's own noise ("unable to resolve host") is not the reason; keep its last lines.
    return " / ".join(text.splitlines()[-n:]) or "(nothing on stderr)"
