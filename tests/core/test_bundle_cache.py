"""The bundle cache: hits need no network, broken entries are dropped, and no internet says what to bring."""

from __future__ import annotations

import json
import os
import shutil
import sys
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
    find_available,
    find_cached,
    find_shipped,
    shipped_dirs,
)
from sparksync.core.bundle.shipped import SHIPPED_ENV
from sparksync.core.base.paths import cache_dir
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


# --- bundles shipped with the packaged app -------------------------------------------


def _ship(monkeypatch, tmp_path: Path, *bundles: Path) -> Path:
    """A read-only shipped folder holding ``bundles``, named by $SPARKSYNC_SHIPPED_BUNDLES."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for bundle in bundles:
        shutil.copyfile(bundle, shipped / bundle.name)
    monkeypatch.setenv(SHIPPED_ENV, str(shipped))
    return shipped


def _frozen(monkeypatch, app: Path) -> None:
    """This process as the packaged app would see itself: frozen, its program inside ``app``."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(app / "sparksync"))
    monkeypatch.setattr(sys, "_MEIPASS", str(app / "_internal"), raising=False)


def test_with_an_empty_cache_the_shipped_bundle_is_used_in_place_without_pip(tmp_path, monkeypatch):
    shipped = _ship(monkeypatch, tmp_path, fake_bundle(tmp_path / "made"))
    pip_offline(monkeypatch)  # a build would now fail
    assert ensure_bundle("linux-aarch64", "3.12") == shipped / NAME
    assert not cached_path(AARCH64_312).exists()


def test_the_cache_comes_before_the_shipped_bundles(tmp_path, monkeypatch):
    _ship(monkeypatch, tmp_path, fake_bundle(tmp_path / "made"))
    cached = add_to_cache(fake_bundle(tmp_path / "brought"))
    assert find_available(AARCH64_312) == cached == ensure_bundle("linux-aarch64", "3.12")


def test_a_damaged_shipped_bundle_is_skipped_but_left_in_place(tmp_path, monkeypatch):
    shipped = _ship(monkeypatch, tmp_path)
    (shipped / NAME).write_bytes(b"half a copy")
    assert find_shipped(AARCH64_312) is None and find_available(AARCH64_312) is None
    assert (shipped / NAME).read_bytes() == b"half a copy"


def test_a_shipped_bundle_for_another_target_under_this_name_is_not_used(tmp_path, monkeypatch):
    shipped = _ship(monkeypatch, tmp_path)
    shutil.copyfile(fake_bundle(tmp_path / "made", target=Target("linux-aarch64", "3.10")), shipped / NAME)
    assert find_shipped(AARCH64_312) is None


def test_the_packaged_app_looks_beside_its_program_and_a_source_install_nowhere(tmp_path, monkeypatch):
    monkeypatch.delenv(SHIPPED_ENV, raising=False)
    assert shipped_dirs() == []
    _frozen(monkeypatch, tmp_path / "app")
    assert shipped_dirs() == [tmp_path / "app" / "bundles", tmp_path / "app" / "_internal" / "bundles"]
    monkeypatch.setenv(SHIPPED_ENV, str(tmp_path / "elsewhere"))
    assert shipped_dirs() == [tmp_path / "elsewhere"]


def test_the_packaged_app_finds_the_bundle_shipped_beside_its_program(tmp_path, monkeypatch):
    monkeypatch.delenv(SHIPPED_ENV, raising=False)
    _frozen(monkeypatch, tmp_path / "app")
    (tmp_path / "app" / "bundles").mkdir(parents=True)
    shutil.copyfile(fake_bundle(tmp_path / "made"), tmp_path / "app" / "bundles" / NAME)
    assert ensure_bundle("linux-aarch64", "3.12") == tmp_path / "app" / "bundles" / NAME


def test_the_packaged_app_without_a_bundle_for_the_node_says_what_to_build_and_where_to_put_it(
    tmp_path, monkeypatch
):
    import sparksync.core.bundle.cache as cache

    _ship(monkeypatch, tmp_path, fake_bundle(tmp_path / "made"))
    _frozen(monkeypatch, tmp_path / "app")

    def never(*_args, **_kwargs):
        raise AssertionError("the packaged app must not try to build a bundle")

    monkeypatch.setattr(cache, "build_bundle", never)
    with pytest.raises(BundleBuildError) as caught:
        ensure_bundle("linux-aarch64", "3.10")
    message = str(caught.value)
    wanted = Target("linux-aarch64", "3.10").bundle_name(AGENT_VERSION)
    assert "no agent bundle for linux-aarch64 Python 3.10" in message
    assert "it carries bundles for: linux-aarch64 Python 3.12." in message
    assert "'sparksync bundle build --platform linux-aarch64 --python 3.10 --output DIR'" in message
    assert f"copy DIR/{wanted} into {bundles_dir()}/" in message
    # The bundle it was told to bring, once brought, is what the next deploy uses.
    brought = add_to_cache(fake_bundle(tmp_path / "usb", target=Target("linux-aarch64", "3.10")))
    assert brought.name == wanted and ensure_bundle("linux-aarch64", "3.10") == brought


def test_bundle_list_shows_the_cached_and_the_shipped_bundles(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from sparksync.cli.bundle import bundle

    shipped = _ship(monkeypatch, tmp_path, fake_bundle(tmp_path / "made"))
    cached = add_to_cache(fake_bundle(tmp_path / "brought", target=Target("linux-aarch64", "3.11")))
    result = CliRunner().invoke(bundle, ["list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert listed["bundles"] == [
        {"platform": "linux-aarch64", "python": "3.11", "source": "cache", "path": str(cached)},
        {"platform": "linux-aarch64", "python": "3.12", "source": "shipped", "path": str(shipped / NAME)},
    ]
    assert listed["shipped"] == [str(shipped)] and listed["cache"] == str(bundles_dir())
