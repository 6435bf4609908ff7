"""Running pip for a bundle build, and telling "no internet" apart from other failures.

pip is run as a child process of the client's own interpreter, with the
user's pip configuration left in place: a company mirror or proxy set in
pip.conf or PIP_* variables is how many users reach PyPI at all.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from sparksync.core.bundle.errors import BundleBuildError, BundleOfflineError

log = logging.getLogger(__name__)

# A whole pip run may take this long before it is stopped (a stuck proxy must
# not hang a deploy forever); pip's own per-request timeout still applies.
PIP_RUN_TIMEOUT_S = 20 * 60
PROBE_TIMEOUT_S = 4  # pip's per-request timeout for the quick index check (one retry)
PROBE_RUN_TIMEOUT_S = 30  # the whole check, pip's start-up included, on a slow machine

# Lines pip prints when it cannot reach an index (urllib3/requests wording).
# At its default verbosity pip shows them only in its "Retrying" warnings, so
# with retries set to 0 a dead network reads as a plain build failure (whose
# message still says which bundle to bring).
_NETWORK_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "ConnectTimeoutError",
    "ReadTimeoutError",  # an index (or proxy) that accepts and never answers: a network that drops packets
    "ConnectionError",
    "ProxyError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No route to host",
    "Could not fetch URL",
    "SSLError",
)


# pip tests environment markers (``exceptiongroup; python_version < "3.11"``)
# against the interpreter it runs in, even with --python-version and
# --platform, so a bundle for Python 3.10 built on 3.12 would silently lack
# exceptiongroup. pip has no option for this; this launcher makes pip's own
# marker evaluation see the target's values instead. build.py checks the
# result with the public ``packaging`` API, so a pip that ignored the launcher
# gives a clear error instead of a bundle that fails on the node.
_TARGET_MARKERS_LAUNCHER = """
import json, sys
from pip._vendor.packaging import markers
_host, _target = markers.default_environment, json.loads(sys.argv[1])
markers.default_environment = lambda: {**_host(), **_target}
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""

# --no-input: pip must never stop to ask for index credentials mid-deploy.
_PIP_OPTIONS = ["--disable-pip-version-check", "--no-input"]


def pip_command(markers: dict[str, str] | None = None) -> list[str]:
    """How to start pip; with ``markers``, pip evaluates environment markers with those values."""
    if getattr(sys, "frozen", False):
        # A packaged (PyInstaller) app's executable is the app itself, not a Python with pip.
        raise BundleBuildError("this packaged SparkSync cannot run pip to build an agent bundle")
    if markers is None:
        return [sys.executable, "-m", "pip", *_PIP_OPTIONS]
    return [sys.executable, "-c", _TARGET_MARKERS_LAUNCHER, json.dumps(markers), *_PIP_OPTIONS]


def run_pip(args: list[str], doing: str, markers: dict[str, str] | None = None) -> str:
    """Run ``pip <args>``; return its output, or raise a Bundle*Error saying what failed while ``doing``."""
    cmd = pip_command(markers) + args
    log.debug("running %s", " ".join(cmd))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BundleOfflineError(
            f"pip did not finish {doing} within {PIP_RUN_TIMEOUT_S // 60} minutes; "
            "the package index is unreachable or very slow"
        ) from exc
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise _failure(output, doing)
    return output


def check_index_reachable(doing: str) -> None:
    """One quick look at the package index before a long pip run; BundleOfflineError when it is out of reach.

    pip's defaults (5 retries, 15 s each, with backoff) make a dead network
    cost two minutes per run. This asks the index one small question (the
    versions of ``pip``), through the user's pip configuration (mirror,
    proxy, certificates), with one retry of a few seconds. Only a network
    failure stops here; anything else (an index-less configuration, an old
    pip without ``pip index``) is left for the real run to show.
    """
    cmd = pip_command() + ["index", "versions", "pip", "--retries", "1", "--timeout", str(PROBE_TIMEOUT_S)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BundleOfflineError(
            f"the package index did not answer within {PROBE_RUN_TIMEOUT_S} s (checked before {doing}; "
            "nothing was downloaded)"
        ) from exc
    if done.returncode == 0:
        return
    network = first_network_error(done.stdout + done.stderr)
    if network is not None:
        raise BundleOfflineError(
            f"pip could not reach the package index ({network}; checked before {doing}, so nothing was "
            "downloaded)"
        )


def _failure(output: str, doing: str) -> BundleBuildError:
    # pip's own ERROR lines say what failed ("No matching distribution found for ..."); a network
    # warning that came before them is only the likely cause, so it goes second.
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR:")]
    network = first_network_error(output)
    if network is not None:
        said = f": {' / '.join(errors[-2:])}" if errors else ""
        return BundleOfflineError(
            f"pip could not reach the package index while {doing}{said} (first network failure: {network})"
        )
    detail = " / ".join(errors[-3:]) or (output.strip().splitlines() or ["no output"])[-1]
    return BundleBuildError(f"pip failed while {doing}: {detail}")


def first_network_error(output: str) -> str | None:
    """A short reason when pip's output shows it could not connect, else None."""
    for line in output.splitlines():
        if any(marker in line for marker in _NETWORK_MARKERS):
            return _shorten(line.strip())
    return None


def _shorten(line: str) -> str:
    # urllib3 lines end with the useful part: "...: [Errno 111] Connection refused")': /fastapi/
    for reason in ("[Errno", "Temporary failure", "Name or service", "Read timed out", "timed out", "ProxyError",
                   "SSLError"):  # fmt: skip
        at = line.find(reason)
        if at >= 0:
            return line[at:].split('")', 1)[0].split("'))", 1)[0][:160]
    return line[-160:]
