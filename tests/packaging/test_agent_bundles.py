"""packaging/deb/agent_bundles.py: the shipped bundles are built once per agent state, then reused."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import sparksync.core.bundle as bundle_api
from tests.core.bundle_helpers import AARCH64_312, fake_bundle
from tests.packaging.debcache import ROOT

sys.path.insert(0, str(ROOT / "packaging" / "deb"))
import agent_bundles  # noqa: E402


@pytest.fixture
def builds(monkeypatch, tmp_path) -> list[Path]:
    """build_bundle replaced by one that files a small fake bundle, recording each build."""
    made: list[Path] = []

    def fake_build(target, output_dir, **_kwargs):
        path = fake_bundle(tmp_path / f"made-{len(made)}", target=target)
        made.append(shutil.copyfile(path, output_dir / path.name))
        return made[-1]

    monkeypatch.setattr(bundle_api, "SHIPPED_TARGETS", (AARCH64_312,))
    monkeypatch.setattr(bundle_api, "build_bundle", fake_build)
    return made


def test_bundles_are_built_once_then_reused(builds, tmp_path):
    first = agent_bundles.shipped_bundles(tmp_path / "cache", lambda _: None)
    again = agent_bundles.shipped_bundles(tmp_path / "cache", lambda _: None)
    assert first == again == builds and len(builds) == 1
    assert first[0].parent.name == agent_bundles.bundle_key()


def test_a_damaged_cached_bundle_is_rebuilt(builds, tmp_path):
    (path,) = agent_bundles.shipped_bundles(tmp_path / "cache", lambda _: None)
    path.write_bytes(b"truncated")
    assert agent_bundles.shipped_bundles(tmp_path / "cache", lambda _: None) == [path]
    assert len(builds) == 2
    bundle_api.verify_bundle(path, expect=AARCH64_312)


def test_only_the_current_and_the_previous_key_are_kept(builds, tmp_path):
    cache = tmp_path / "cache"
    for old in ("old-1", "old-2"):
        (cache / old).mkdir(parents=True)
    agent_bundles.shipped_bundles(cache, lambda _: None)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2
    assert (cache / agent_bundles.bundle_key()).is_dir()


def test_the_key_follows_the_agents_code():
    files = [str(p.relative_to(ROOT)) for p in agent_bundles._input_files()]
    assert "agent/sparksync_agent/protocol/__init__.py" in files and "agent/pyproject.toml" in files
    assert "sparksync/core/bundle/build.py" in files
    assert not [f for f in files if f.startswith(("sparksync/gui", "sparksync/cli"))]
