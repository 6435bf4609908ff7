"""The bundle cache: hits need no network, broken entries are dropped, and no internet says what to bring."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sparksync.core.bundle import (
    BundleBuildError,
    BundleOfflineError,
    BundleVerifyError,
    Target,
    add_to_cache,
    bundles_dir,
    cached_path,
    ensure_bundle,
    find_cached,
)
from sparksync.core.paths import cache_dir
from sparksync_agent.protocol import AGENT_VERSION
from tests.core.bundle_helpers import (
    AARCH64_312,
    FAKE_PSUTIL as PSUTIL,
    fake_bundle,
    pip_offline,
    repack,
    session_bundle,
)

NAME = AARCH64_312.bundle_name(AGENT_VERSION)


def test_the_cache_lives_in_the_clients_cache_dir_keyed_by_version_platform_python():
    assert bundles_dir() == cache_dir() / "bundles"
    assert cached_path(AARCH64_312) == cache_dir() / "bundles" / NAME


@pytest.mark.slow
def test_a_cached_bundle_is_used_without_pip(tmp_path_factory, monkeypatch):
    cached = add_to_cache(session_bundle(tmp_path_factory, AARCH64_312))
    before = cached.stat().st_mtime_ns
    pip_offline(monkeypatch)  # any pip run would now fail
    assert ensure_bundle("linux-aarch64", "3.12") == cached
    assert cached.stat().st_mtime_ns == before


@pytest.mark.slow
def test_ensure_bundle_builds_into_the_cache_when_it_is_empty(monkeypatch):
    # Needs the package index, like a first deploy on a machine with internet.
    path = ensure_bundle("linux-x86_64", "3.12")
    assert path == cached_path(Target("linux-x86_64", "3.12")) and path.is_file()
    assert [p.name for p in bundles_dir().iterdir() if p.name.startswith(".building")] == []


def test_with_no_internet_the_error_names_the_file_to_bring_and_the_folder(monkeypatch):
    pip_offline(monkeypatch)
    with pytest.raises(BundleOfflineError) as caught:
        ensure_bundle("linux-aarch64", "3.12")
    message = str(caught.value)
    assert "pip could not reach the package index" in message and "no internet" in message
    assert f"copy DIR/{NAME} into {bundles_dir()}/" in message
    assert "sparksync bundle build --platform linux-aarch64 --python 3.12" in message
    assert not cached_path(AARCH64_312).exists()


def test_a_broken_cached_bundle_is_dropped_and_not_used(monkeypatch):
    broken = cached_path(AARCH64_312)
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"half a download")
    assert find_cached(AARCH64_312) is None
    assert not broken.exists()


def test_a_bundle_for_another_target_under_this_name_is_not_a_hit(tmp_path):
    # Someone renamed a 3.10 bundle to the 3.12 name: the manifest tells the truth.
    other = fake_bundle(tmp_path, target=Target("linux-aarch64", "3.10"))
    cached_path(AARCH64_312).parent.mkdir(parents=True)
    shutil.copyfile(other, cached_path(AARCH64_312))
    assert find_cached(AARCH64_312) is None


def test_a_brought_bundle_is_verified_and_filed_under_its_proper_name(tmp_path):
    brought = fake_bundle(tmp_path / "usb")
    renamed = brought.rename(tmp_path / "usb" / "agent-bundle.tar.gz")
    filed = add_to_cache(renamed)
    assert filed == cached_path(AARCH64_312) and find_cached(AARCH64_312) == filed


def test_a_tampered_bundle_is_not_added_to_the_cache(tmp_path):
    def tamper(folder: Path) -> None:
        wheel = next(p for p in folder.iterdir() if p.name.startswith("psutil"))
        wheel.write_bytes(wheel.read_bytes() + b"x")

    bad = repack(fake_bundle(tmp_path / "src"), tmp_path / "bad.tar.gz", tamper)
    with pytest.raises(BundleVerifyError, match=f"{PSUTIL} does not match"):
        add_to_cache(bad)
    assert not bundles_dir().exists() or os.listdir(bundles_dir()) == []


def test_a_build_error_other_than_no_internet_also_says_what_to_bring(monkeypatch):
    import sparksync.core.bundle.cache as cache

    def no_source(*_args, **_kwargs):
        raise BundleBuildError("the agent's source is not on this computer")

    monkeypatch.setattr(cache, "build_bundle", no_source)
    with pytest.raises(BundleBuildError, match=f"copy DIR/{NAME} into"):
        ensure_bundle("linux-aarch64", "3.12")
