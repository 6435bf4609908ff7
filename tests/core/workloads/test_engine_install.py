"""``sparksync engine install llama.cpp``: the node-side build script, run for real with stand-in tools.

A real build takes minutes of CPU (tests/engines covers the build itself, and
this script uses the same pinned version and CMake flags), so here ``cmake``,
``python3 -m pip download`` and ``nvcc`` are small stand-ins on PATH. The
script itself runs unchanged under bash in a throwaway HOME: it must pick
the flavour, pass the flags, install atomically, link into ~/.local/bin,
reuse a finished build and report its steps for the progress display.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sparksync.core.engines.llamacpp_build import BASE_CMAKE_FLAGS, LLAMA_CPP_PYTHON_VERSION
from sparksync.core.workloads.engine_install import (
    SCRIPT_PATH,
    EngineInstallError,
    build_script,
    install_command,
    progress_of,
)

PIP_STUB = """#!/bin/sh
# python3 -m pip download --no-deps --no-binary :all: llama-cpp-python==V -d DIR
echo "$@" >> "$HOME/pip.args"
dest=""; while [ $# -gt 0 ]; do [ "$1" = -d ] && dest="$2"; shift; done
mkdir -p "$dest" "$HOME/tarsrc/llama_cpp_python-{v}/vendor/llama.cpp"
touch "$HOME/tarsrc/llama_cpp_python-{v}/vendor/llama.cpp/CMakeLists.txt"
tar -czf "$dest/llama_cpp_python-{v}.tar.gz" -C "$HOME/tarsrc" "llama_cpp_python-{v}"
"""
CMAKE_STUB = """#!/bin/sh
if [ "$1" = --build ]; then
  echo "$@" >> "$HOME/cmake-build.args"
  mkdir -p "$2/bin"
  for t in llama-server ggml-rpc-server; do printf '#!/bin/sh\\necho "version: 1 (stub)"\\n' > "$2/bin/$t"; chmod +x "$2/bin/$t"; done
  echo "[1/2] Building CXX object"; echo "[2/2] Linking CXX executable"
else
  echo "$@" >> "$HOME/cmake-configure.args"
fi
"""


@pytest.fixture
def node_home(tmp_path) -> tuple[Path, dict[str, str]]:
    home, tools = tmp_path / "home", tmp_path / "tools"
    home.mkdir()
    tools.mkdir()
    for name, text in {"python3": PIP_STUB.format(v=LLAMA_CPP_PYTHON_VERSION), "cmake": CMAKE_STUB,
                       "c++": "#!/bin/sh\n"}.items():  # fmt: skip
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    script = home / SCRIPT_PATH
    script.parent.mkdir(parents=True)
    script.write_text(build_script())
    env = {"HOME": str(home), "PATH": f"{tools}:/usr/bin:/bin"}
    return home, env


def run_install(home: Path, env: dict[str, str], flavour: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        install_command(flavour, 2),
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_script_is_valid_bash_and_carries_the_pinned_version_and_flags():
    script = build_script()
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert f"version={LLAMA_CPP_PYTHON_VERSION}" in script
    assert all(flag in script for flag in BASE_CMAKE_FLAGS)
    assert install_command("cuda", 20) == ["bash", SCRIPT_PATH, "cuda", "20"]
    with pytest.raises(EngineInstallError):
        install_command("rocm")


def test_a_cpu_build_installs_links_and_is_reused(node_home):
    home, env = node_home
    done = run_install(home, env, "auto")  # no nvcc here: the CPU flavour
    assert done.returncode == 0, done.stdout + done.stderr
    key = f"{LLAMA_CPP_PYTHON_VERSION}-cpu-{os.uname().machine}"
    final = home / ".local/share/sparksync-engines/llama.cpp" / key
    for name in ("llama-server", "rpc-server"):
        link = home / ".local/bin" / name
        assert link.resolve() == final / "bin" / name and os.access(link, os.X_OK)
    configure = (home / "cmake-configure.args").read_text()
    assert all(flag in configure for flag in BASE_CMAKE_FLAGS) and "GGML_CUDA" not in configure
    assert "--target llama-server ggml-rpc-server -j 2" in (home / "cmake-build.args").read_text()
    steps = [
        progress_of(line, "").step for line in done.stdout.splitlines() if line.startswith("SPARKSYNC-STEP")
    ]
    assert steps == ["check", "download", "unpack", "configure", "compile", "install", "done"]
    assert not [p for p in final.parent.iterdir() if p.name.startswith(".")]  # no staging left

    again = run_install(home, env, "auto")
    assert again.returncode == 0 and "SPARKSYNC-STEP done" in again.stdout
    assert (home / "cmake-build.args").read_text().count("--build") == 1  # not built twice


def test_nvcc_and_the_driver_make_a_cuda_build(node_home, tmp_path):
    home, env = node_home
    nvcc = Path(env["PATH"].split(":")[0]) / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    done = run_install(home, env, "cuda")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "-DGGML_CUDA=ON" in (home / "cmake-configure.args").read_text()
    assert (
        (home / ".local/bin/llama-server")
        .resolve()
        .parent.parent.name.endswith(f"-cuda-{os.uname().machine}")
    )


def test_missing_tools_are_named(node_home, tmp_path):
    home, env = node_home
    tools = Path(env["PATH"].split(":")[0])
    (tools / "cmake").unlink()
    basics = tmp_path / "basics"  # the coreutils the script needs, and nothing else
    basics.mkdir()
    for name in ("bash", "nproc", "uname", "mkdir", "dirname", "ls", "rm", "mktemp", "ln"):
        (basics / name).symlink_to(shutil.which(name))
    done = run_install(home, {**env, "PATH": f"{tools}:{basics}"}, "cpu")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "missing on this node: cmake" in done.stderr


def test_compile_progress_is_read_from_ninja_and_make_lines():
    assert progress_of("[12/48] Building CXX object", "compile").percent == pytest.approx(25.0)
    assert progress_of("[ 40%] Built target ggml", "compile").percent == pytest.approx(40.0)
    assert progress_of("SPARKSYNC-STEP configure", "download").step == "configure"
    assert progress_of("-- The C compiler", "configure").percent is None
