"""The engine cache: where builds go, that a build is atomic, and that a cached one is reused.

A real llama.cpp build takes minutes, so these tests feed ``ensure_built`` a
stand-in sdist: a tiny CMake project with the same target names, compiled by
the same cmake/ninja path in a second or two.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

import pytest

from sparksync.core.engines import llamacpp_build as lb

FAKE_CMAKE = """\
cmake_minimum_required(VERSION 3.14)
project(fake_llama C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_executable(llama-server server.c)
add_executable(ggml-rpc-server rpc.c)
"""
FAKE_SERVER = '#include <stdio.h>\nint main(void) { puts("version: 1 (fake)"); return %d; }\n'
FAKE_RPC = "int main(void) { return 0; }\n"

needs_compiler = pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc")),
                                    reason="needs cmake and a C compiler")


@pytest.fixture
def engine_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(lb.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "llama.cpp"


def _fake_sdist(tmp_path: Path, version_exit: int = 0) -> Path:
    top = tmp_path / "sdist-src" / f"llama_cpp_python-{lb.LLAMA_CPP_PYTHON_VERSION}"
    source = top / "vendor" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(FAKE_CMAKE)
    (source / "server.c").write_text(FAKE_SERVER % version_exit)
    (source / "rpc.c").write_text(FAKE_RPC)
    archive = tmp_path / f"llama_cpp_python-{lb.LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return archive


def test_cache_key_names_version_flavour_and_arch(engine_cache):
    path = lb.install_dir("cpu", "aarch64")
    assert path == engine_cache / f"{lb.LLAMA_CPP_PYTHON_VERSION}-cpu-aarch64"


def test_non_root_uses_the_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(lb.CACHE_ENV, raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lb.cache_root() == tmp_path / "xdg" / "sparksync" / "llama.cpp"


def test_root_uses_the_system_cache(monkeypatch):
    monkeypatch.delenv(lb.CACHE_ENV, raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert lb.cache_root() == Path("/var/cache/sparksync/llama.cpp")


def test_nvcc_without_a_driver_builds_for_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(lb.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(lb, "NVIDIA_DRIVER_MARKER", tmp_path / "absent")
    assert lb.default_flavour() == "cpu"
    (tmp_path / "present").write_text("NVRM version: 580")
    monkeypatch.setattr(lb, "NVIDIA_DRIVER_MARKER", tmp_path / "present")
    assert lb.default_flavour() == "cuda"


def test_cuda_flavour_needs_nvcc(monkeypatch, engine_cache):
    monkeypatch.setattr(lb.shutil, "which", lambda name: None)
    with pytest.raises(lb.EngineBuildError, match="nvcc"):
        lb.ensure_built("cuda")


def test_cuda_configure_turns_on_ggml_cuda(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARKSYNC_CUDA_ARCHITECTURES", "121")
    cmd = lb._configure_command(tmp_path / "src", tmp_path / "build", "cuda")
    assert "-DGGML_CUDA=ON" in cmd and "-DCMAKE_CUDA_ARCHITECTURES=121" in cmd
    assert "-DGGML_RPC=ON" in cmd and "-DLLAMA_BUILD_UI=OFF" in cmd
    assert "-DGGML_CUDA=ON" not in lb._configure_command(tmp_path / "src", tmp_path / "build", "cpu")


def test_only_one_binary_is_not_a_build(engine_cache):
    bin_dir = lb.install_dir("cpu") / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "llama-server").write_text("#!/bin/sh\n")
    (bin_dir / "llama-server").chmod(0o755)
    assert lb.find_binaries("cpu") is None


@needs_compiler
def test_build_installs_both_binaries_then_reuses_them(engine_cache, tmp_path, monkeypatch):
    stale = engine_cache / f".{lb.build_key('cpu')}.killed"  # what a SIGKILLed build leaves
    (stale / "work").mkdir(parents=True)
    built = lb.ensure_built("cpu", sdist=_fake_sdist(tmp_path), log_file=tmp_path / "build.log")

    assert built.root == lb.install_dir("cpu")
    assert built.llama_server.is_file() and built.rpc_server.is_file()
    assert sorted(p.name for p in engine_cache.iterdir() if not p.name.endswith(".lock")) == [built.root.name]
    assert [p.name for p in built.root.iterdir()] == ["bin"], "sources and objects must not stay in the cache"
    assert built.root.stat().st_mode & 0o777 == 0o755

    def no_second_build(*args, **kwargs):
        raise AssertionError("a cached build was rebuilt")

    monkeypatch.setattr(lb, "_build_in", no_second_build)
    assert lb.ensure_built("cpu") == built


@needs_compiler
def test_a_server_that_does_not_run_leaves_no_cache(engine_cache, tmp_path):
    with pytest.raises(lb.EngineBuildError, match="does not run"):
        lb.ensure_built("cpu", sdist=_fake_sdist(tmp_path, version_exit=3), log_file=tmp_path / "build.log")
    assert lb.find_binaries("cpu") is None
    assert [p.name for p in engine_cache.iterdir() if not p.name.endswith(".lock")] == []


def test_an_interrupted_build_leaves_no_cache(engine_cache, tmp_path, monkeypatch):
    def half_build(staging: Path, *args):
        (staging / "bin").mkdir()
        (staging / "bin" / "llama-server").write_text("half")
        raise KeyboardInterrupt  # what Ctrl-C in the middle of the compile looks like

    monkeypatch.setattr(lb, "_build_in", half_build)
    with pytest.raises(KeyboardInterrupt):
        lb.ensure_built("cpu", sdist=tmp_path / "unused.tar.gz")
    assert not lb.install_dir("cpu").exists()
    assert [p.name for p in engine_cache.iterdir() if not p.name.endswith(".lock")] == []


def test_an_archive_without_llama_cpp_is_refused(engine_cache, tmp_path):
    archive = tmp_path / "other.tar.gz"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "setup.py").write_text("")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "other", arcname="other")
    with pytest.raises(lb.EngineBuildError, match="vendor/llama.cpp"):
        lb.ensure_built("cpu", sdist=archive)


def test_check_reports_a_missing_build(engine_cache, capsys):
    assert lb.main(["--check", "--flavour", "cpu"]) == 1
    assert "missing" in capsys.readouterr().out


@needs_compiler
def test_a_compile_error_names_the_step_and_the_log(engine_cache, tmp_path):
    sdist = _fake_sdist(tmp_path)
    broken = tmp_path / "broken"
    with tarfile.open(sdist) as tar:
        tar.extractall(broken, filter="data")
    next(broken.glob("*/vendor/llama.cpp/server.c")).write_text("this is not C\n")
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(next(broken.iterdir()), arcname=next(broken.iterdir()).name)
    log_file = tmp_path / "build.log"
    with pytest.raises(lb.EngineBuildError, match=rf"compiling llama.cpp failed .*{log_file}"):
        lb.ensure_built("cpu", sdist=sdist, log_file=log_file)
    assert lb.find_binaries("cpu") is None
