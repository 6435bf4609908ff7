"""``sparksync bundle build | verify``: options, output, exit codes and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.bundle import bundles_dir
from sparksync_agent.protocol import AGENT_VERSION
from tests.core.bundle_helpers import (
    FAKE_PSUTIL as PSUTIL,
    fake_bundle,
    pip_offline,
    repack,
    session_agent_wheel,
)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_help_shows_the_dgx_spark_defaults():
    result = invoke("bundle", "build", "--help")
    assert result.exit_code == 0
    assert "[default: linux-aarch64]" in result.output and "[default: 3.12]" in result.output


def test_an_unknown_platform_is_a_usage_error():
    result = invoke("bundle", "build", "--platform", "linux-riscv64")
    assert result.exit_code == 2 and "linux-aarch64" in result.output


@pytest.mark.slow
def test_build_writes_the_bundle_and_prints_its_manifest(tmp_path_factory, tmp_path):
    wheel = session_agent_wheel(tmp_path_factory)
    result = invoke("bundle", "build", "--platform", "linux-x86_64", "--python", "3.11",
                    "--output", str(tmp_path), "--agent-wheel", str(wheel), "--json")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["path"] == str(tmp_path / f"sparksync-agent-{AGENT_VERSION}-linux-x86_64-py3.11.tar.gz")
    assert Path(doc["path"]).is_file()
    assert doc["manifest"]["platform"] == "linux-x86_64" and doc["manifest"]["python"] == "3.11"
    assert "downloading the agent's dependencies for linux-x86_64 Python 3.11" in result.stderr


def test_build_with_no_internet_says_which_file_to_bring_and_where(monkeypatch, tmp_path):
    pip_offline(monkeypatch)
    result = invoke("bundle", "build", "--output", str(tmp_path))
    assert result.exit_code == 1
    name = f"sparksync-agent-{AGENT_VERSION}-linux-aarch64-py3.12.tar.gz"
    assert "\nsparksync: error: pip could not reach the package index" in result.stderr
    assert f"copy DIR/{name} into {bundles_dir()}/" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_verify_reports_a_sound_bundle(tmp_path):
    archive = fake_bundle(tmp_path)
    result = invoke("bundle", "verify", str(archive))
    assert result.exit_code == 0, result.stderr
    assert "for linux-aarch64 Python 3.12: 3 wheels, every checksum matches" in result.stdout
    as_json = json.loads(invoke("bundle", "verify", str(archive), "--json").stdout)
    assert as_json["path"] == str(archive) and len(as_json["manifest"]["files"]) == 3


def test_verify_names_the_tampered_file_and_fails(tmp_path):
    def tamper(folder: Path) -> None:
        (folder / PSUTIL).write_bytes(b"not what was listed")

    archive = repack(fake_bundle(tmp_path / "src"), tmp_path / "tampered.tar.gz", tamper)
    result = invoke("bundle", "verify", str(archive))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("sparksync: error: bundle tampered.tar.gz failed verification: ")
    assert f"{PSUTIL} does not match its checksum" in result.stderr


def test_the_packaged_app_says_what_it_carries_and_what_to_bring(monkeypatch):
    # The packaged app has no pip: instead of pip's failure, the user learns which
    # bundles came with it, which file to build elsewhere and where to put it.
    monkeypatch.setattr("sys.frozen", True, raising=False)
    result = invoke("bundle", "build", "--platform", "linux-aarch64", "--python", "3.11")
    assert result.exit_code != 0
    assert "cannot build one (it has no pip)" in result.output
    assert "sparksync bundle build --platform linux-aarch64 --python 3.11" in result.output
    assert str(bundles_dir()) in result.output
