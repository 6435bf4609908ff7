"""Verifying bundle archives: each kind of damage is caught and named (small fake bundles, no network)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from sparksync.core.bundle import BundleVerifyError, Target, verify_bundle
from sparksync.core.bundle.archive import unpack
from tests.core.bundle_helpers import (
    AARCH64_312,
    AGENT_WHEEL,
    FAKE_PSUTIL as PSUTIL,
    add_member,
    fake_bundle,
    fake_wheel,
    repack,
)


@pytest.fixture
def bundle(tmp_path) -> Path:
    return fake_bundle(tmp_path / "src")


def problems_of(archive: Path, **expect) -> list[str]:
    with pytest.raises(BundleVerifyError) as caught:
        verify_bundle(archive, **expect)
    return caught.value.problems


def test_a_sound_bundle_verifies_and_gives_its_manifest(bundle):
    manifest = verify_bundle(bundle, expect=AARCH64_312)
    assert manifest.agent_wheel == AGENT_WHEEL and len(manifest.files) == 3
    assert manifest.requirement().startswith("sparksync-agent[gpu,hf]==")


def test_a_sound_bundle_unpacks_into_one_flat_folder(bundle, tmp_path):
    folder = unpack(bundle, tmp_path / "out")
    assert folder.name == bundle.name.removesuffix(".tar.gz")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [AGENT_WHEEL, "manifest.json", PSUTIL, "pydantic-2.9.0-py3-none-any.whl"]
    )


def test_a_changed_wheel_is_named_with_its_checksum(bundle, tmp_path):
    def tamper(folder: Path) -> None:
        data = bytearray((folder / PSUTIL).read_bytes())
        data[-1] ^= 0xFF  # one flipped byte, same size
        (folder / PSUTIL).write_bytes(bytes(data))

    archive = repack(bundle, tmp_path / "tampered.tar.gz", tamper)
    with pytest.raises(BundleVerifyError) as caught:
        verify_bundle(archive)
    message = str(caught.value)
    assert f"{PSUTIL} does not match its checksum" in message
    assert "sparksync bundle build --platform linux-aarch64 --python 3.12" in message
    assert caught.value.problems == [p for p in caught.value.problems if PSUTIL in p]


def test_a_missing_and_an_extra_file_are_each_named(bundle, tmp_path):
    def swap(folder: Path) -> None:
        (folder / PSUTIL).unlink()
        fake_wheel(folder, "evil-1.0-py3-none-any.whl")

    problems = problems_of(repack(bundle, tmp_path / "swapped.tar.gz", swap))
    assert any(PSUTIL in p and "missing from the archive" in p for p in problems)
    assert any("evil-1.0-py3-none-any.whl is in the archive but not listed" in p for p in problems)


def test_no_manifest_means_no_bundle(bundle, tmp_path):
    archive = repack(bundle, tmp_path / "bare.tar.gz", lambda folder: (folder / "manifest.json").unlink())
    assert problems_of(archive) == ["manifest.json is missing"]


def test_a_manifest_from_a_newer_sparksync_says_upgrade(bundle, tmp_path):
    def bump(folder: Path) -> None:
        data = json.loads((folder / "manifest.json").read_text())
        data["format_version"] = 99
        (folder / "manifest.json").write_text(json.dumps(data))

    (problem,) = problems_of(repack(bundle, tmp_path / "future.tar.gz", bump))
    assert "format 99" in problem and "upgrade SparkSync" in problem


def test_a_manifest_for_an_unknown_platform_is_malformed(bundle, tmp_path):
    def edit(folder: Path) -> None:
        data = json.loads((folder / "manifest.json").read_text())
        data["platform"] = "linux-riscv64"
        (folder / "manifest.json").write_text(json.dumps(data))

    (problem,) = problems_of(repack(bundle, tmp_path / "riscv.tar.gz", edit))
    assert problem.startswith("manifest.json is malformed (platform: ")


def test_a_wheel_for_another_cpu_is_refused_even_with_a_good_checksum(tmp_path):
    wrong = "pydantic_core-2.0.0-cp312-cp312-manylinux2014_x86_64.whl"
    archive = fake_bundle(tmp_path, extra_wheels=(wrong,))
    (problem,) = problems_of(archive)
    assert problem.startswith(f"{wrong} does not run on linux-aarch64 Python 3.12")


def test_a_bundle_for_another_target_is_refused_when_one_is_expected(bundle):
    (problem,) = problems_of(bundle, expect=Target("linux-aarch64", "3.10"))
    assert "says linux-aarch64 Python 3.12, not linux-aarch64 Python 3.10" in problem
    (problem,) = problems_of(bundle, agent_version="9.9.9")
    assert "not 9.9.9" in problem


@pytest.mark.parametrize(
    ("entry", "kind", "says"),
    [
        ("../escape.whl", tarfile.REGTYPE, "unsafe path"),
        ("/etc/evil.whl", tarfile.REGTYPE, "unsafe path"),
        ("ROOT/link.whl", tarfile.SYMTYPE, "link or special file"),
        ("other/x.whl", tarfile.REGTYPE, "outside the bundle folder"),
        ("ROOT/sub/x.whl", tarfile.REGTYPE, "unexpected entry"),
    ],
)
def test_entries_a_bundle_never_holds_are_refused(bundle, tmp_path, entry, kind, says):
    info = tarfile.TarInfo(entry.replace("ROOT", bundle.name.removesuffix(".tar.gz")))
    info.type = kind
    info.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
    archive = add_member(bundle, tmp_path / "odd.tar.gz", info, b"x")
    assert any(says in p for p in problems_of(archive))


def test_a_file_that_is_not_a_tar_gz_says_so(tmp_path):
    junk = tmp_path / "sparksync-agent-0.1.0-linux-aarch64-py3.12.tar.gz"
    junk.write_bytes(b"PK\x03\x04 this is a zip, not a tar.gz")
    (problem,) = problems_of(junk)
    assert "is not a readable .tar.gz bundle" in problem


def test_a_long_list_of_problems_is_cut_short_in_the_message(tmp_path):
    names = tuple(f"w{i}-1.0-cp312-cp312-win_amd64.whl" for i in range(9))
    with pytest.raises(BundleVerifyError) as caught:
        verify_bundle(fake_bundle(tmp_path, extra_wheels=names))
    assert len(caught.value.problems) == 9 and "and 3 more" in str(caught.value)
