"""Running pip for bundles: network failures told apart from other ones, and the target-markers launcher."""

from __future__ import annotations

import platform
import socket
import sys
import threading
import time

import pytest

from sparksync.core.bundle import BundleBuildError, BundleOfflineError, Target
from sparksync.core.bundle.piprun import (
    PROBE_RUN_TIMEOUT_S,
    check_index_reachable,
    first_network_error,
    pip_command,
    run_pip,
)
from tests.core.bundle_helpers import fake_wheel, pip_offline

REFUSED = (
    "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after "
    "connection broken by 'NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): Failed to "
    "establish a new connection: [Errno 111] Connection refused\")': /simple/fastapi/"
)
NO_DNS = (
    "WARNING: Retrying (Retry(total=4)) after connection broken by 'NameResolutionError(\"<urllib3."
    "connection.HTTPSConnection>: Failed to resolve 'pypi.org' ([Errno -3] Temporary failure in name "
    "resolution)\")': /simple/psutil/"
)


def test_a_refused_or_unresolvable_index_reads_as_no_network():
    assert first_network_error(f"Looking in indexes: x\n{REFUSED}\nERROR: nope") == (
        "[Errno 111] Connection refused"
    )
    assert "Temporary failure in name resolution" in first_network_error(NO_DNS)
    assert first_network_error("ERROR: No matching distribution found for foo") is None


def test_a_real_pip_error_is_passed_on_with_its_error_lines():
    with pytest.raises(BundleBuildError) as caught:
        run_pip(["download", "--no-index", "--dest", "/nonexistent", "no-such-package-xyz"], "testing")
    assert not isinstance(caught.value, BundleOfflineError)
    assert "pip failed while testing: ERROR:" in str(caught.value) and "no-such-package-xyz" in str(caught.value)


def test_an_unreachable_index_raises_the_offline_error_with_pips_real_error_first(monkeypatch, tmp_path):
    pip_offline(monkeypatch)
    with pytest.raises(BundleOfflineError) as caught:
        run_pip(["download", "--dest", str(tmp_path), "fastapi"], "testing")
    message = str(caught.value)
    # What pip says went wrong, then the network failure behind it.
    assert message.startswith("pip could not reach the package index while testing: ERROR: ")
    assert "No matching distribution found for fastapi" in message
    assert message.endswith("(first network failure: [Errno 111] Connection refused)")


class _SilentIndex:
    """An index that accepts connections and never answers: a network that drops packets, as pip sees it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/simple/"
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-index", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() that close() alone would leave blocked
        self.sock.close()
        self._thread.join(5)
        for conn in self.held:
            conn.close()


def test_the_quick_check_fails_fast_on_an_index_that_never_answers(monkeypatch):
    pip_offline(monkeypatch)
    index = _SilentIndex()
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    monkeypatch.delenv("PIP_RETRIES")  # pip's own defaults: 5 retries of 15 s each, about two minutes
    started = time.monotonic()
    try:
        with pytest.raises(BundleOfflineError, match="nothing was downloaded") as caught:
            check_index_reachable("testing")
    finally:
        index.close()
    took = time.monotonic() - started
    assert "could not reach the package index" in str(caught.value) or "did not answer" in str(caught.value)
    # Not a speed figure: pip's defaults would take over a minute here; the check is bounded by its own limit.
    assert took < PROBE_RUN_TIMEOUT_S + 5, took


def test_the_quick_check_lets_a_reachable_index_through(monkeypatch, tmp_path):
    pip_offline(monkeypatch)
    links = tmp_path / "simple"
    (links / "pip").mkdir(parents=True)
    (links / "pip" / "index.html").write_text('<a href="pip-24.0-py3-none-any.whl">pip-24.0-py3-none-any.whl</a>')
    monkeypatch.setenv("PIP_INDEX_URL", links.as_uri())
    check_index_reachable("testing")  # a local index answers: no error


@pytest.mark.parametrize(
    ("use_target_markers", "expected"), [(True, {"probe", "old_py", "arm"}), (False, {"probe"})]
)
def test_pip_follows_the_targets_markers_only_through_the_launcher(
    use_target_markers, expected, tmp_path, monkeypatch
):
    # This machine is not an aarch64 Python 3.10, so plain pip skips both marked requirements.
    assert (sys.version_info[:2], platform.machine()) != ((3, 10), "aarch64")
    pip_offline(monkeypatch)
    links = tmp_path / "links"
    links.mkdir()
    marked = ("old_py; python_version < '3.11'", "arm; platform_machine == 'aarch64'")
    fake_wheel(links, "probe-1.0-py3-none-any.whl", marked)
    fake_wheel(links, "old_py-1.0-py3-none-any.whl")
    fake_wheel(links, "arm-1.0-py3-none-any.whl")
    target = Target("linux-aarch64", "3.10")
    args = ["download", "--no-index", "--find-links", str(links), "--dest", str(tmp_path / "out"),
            *target.pip_target_args(), "probe"]  # fmt: skip
    run_pip(args, "testing", markers=target.marker_environment() if use_target_markers else None)
    assert {p.name.split("-")[0] for p in (tmp_path / "out").iterdir()} == expected


def test_a_packaged_app_without_pip_says_so(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    with pytest.raises(BundleBuildError, match="cannot run pip"):
        pip_command()
