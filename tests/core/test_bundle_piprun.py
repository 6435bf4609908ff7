"""Running pip for bundles: network failures told apart from other ones, and the target-markers launcher."""

from __future__ import annotations

import platform
import sys

import pytest

from sparksync.core.bundle import BundleBuildError, BundleOfflineError, Target
from sparksync.core.bundle.piprun import first_network_error, pip_command, run_pip
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


def test_an_unreachable_index_raises_the_offline_error(monkeypatch, tmp_path):
    pip_offline(monkeypatch)
    with pytest.raises(BundleOfflineError, match=r"while testing \(\[Errno 111\] Connection refused\)"):
        run_pip(["download", "--dest", str(tmp_path), "fastapi"], "testing")


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
