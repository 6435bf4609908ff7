"""Bundle targets: names, defaults, the tags each accepts and the pip flags that pick them."""

from __future__ import annotations

import pytest
from packaging.utils import parse_wheel_filename

from sparksync.core.bundle import DEFAULT_PLATFORM, DEFAULT_PYTHON, Target, UnsupportedTargetError
from sparksync.core.bundle.platforms import glibc_of, host_target, target_for_machine

AARCH64 = Target("linux-aarch64", "3.12")


def runs(target: Target, wheel: str) -> bool:
    return bool(parse_wheel_filename(wheel)[3] & target.supported_tags)


def test_defaults_are_a_dgx_spark_on_dgx_os_7():
    # DGX OS 7 is Ubuntu 24.04, whose python3 is 3.12; a Spark is aarch64.
    assert (DEFAULT_PLATFORM, DEFAULT_PYTHON) == ("linux-aarch64", "3.12")


@pytest.mark.parametrize(
    "wheel",
    [
        "pydantic_core-2.50.5-cp312-cp312-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "psutil-7.2.2-cp36-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.manylinux_2_28_aarch64.whl",
        "zeroconf-0.154.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        "pydantic-2.14.4-py3-none-any.whl",
        "foo-1.0-cp312-none-manylinux_2_35_aarch64.whl",
    ],
)
def test_aarch64_py312_accepts_its_own_abi3_and_pure_wheels(wheel):
    assert runs(AARCH64, wheel)


@pytest.mark.parametrize(
    "wheel",
    [
        "pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",  # other CPU
        "pydantic_core-2.50.5-cp311-cp311-manylinux2014_aarch64.whl",  # other Python
        "pydantic_core-2.50.5-cp312-cp312-musllinux_1_2_aarch64.whl",  # musl: no glibc on it
        "foo-1.0-cp312-cp312-manylinux_2_39_aarch64.whl",  # newer glibc than Ubuntu 22.04 has
        "foo-1.0-cp312-cp312-linux_aarch64.whl",  # a local build, not portable
        "foo-1.0-cp313-abi3-manylinux2014_aarch64.whl",  # stable ABI of a newer Python
        "foo-1.0-py2-none-any.whl",
    ],
)
def test_aarch64_py312_refuses_what_cannot_run_there(wheel):
    assert not runs(AARCH64, wheel)


def test_x86_64_accepts_the_legacy_manylinux_names():
    target = Target("linux-x86_64", "3.10")
    assert runs(target, "psutil-5.9.0-cp36-abi3-manylinux1_x86_64.whl")
    assert runs(target, "psutil-5.9.0-cp310-cp310-manylinux2010_x86_64.whl")
    assert not runs(target, "psutil-5.9.0-cp36-abi3-manylinux2014_aarch64.whl")


def test_pip_flags_name_every_glibc_step_and_accept_abi3():
    args = AARCH64.pip_target_args()
    assert "--platform=manylinux2014_aarch64" in args
    assert "--platform=manylinux_2_17_aarch64" in args and "--platform=manylinux_2_35_aarch64" in args
    assert not any("x86_64" in a or "musllinux" in a for a in args)
    for flag in ("--python-version=3.12", "--implementation=cp", "--abi=cp312", "--abi=abi3",
                 "--abi=none", "--only-binary=:all:"):
        assert flag in args
    # Newest first, because pip prefers the platform tags listed earlier.
    platforms = [a.split("=", 1)[1] for a in args if a.startswith("--platform=")]
    assert platforms[0] == "manylinux_2_35_aarch64"


def test_marker_environment_is_the_node_not_this_machine():
    env = Target("linux-aarch64", "3.10").marker_environment()
    assert env["python_version"] == "3.10" and env["platform_machine"] == "aarch64"
    assert env["sys_platform"] == "linux" and env["platform_system"] == "Linux"


def test_bundle_name_holds_version_platform_and_python():
    assert AARCH64.bundle_name("1.2.3") == "sparksync-agent-1.2.3-linux-aarch64-py3.12.tar.gz"


@pytest.mark.parametrize(
    ("platform", "python", "says"),
    [("linux-armv7", "3.12", "linux-aarch64, linux-x86_64"), ("linux-aarch64", "3.9", "3.10, 3.11, 3.12")],
)
def test_unsupported_target_says_what_is_supported(platform, python, says):
    with pytest.raises(UnsupportedTargetError, match=says):
        Target(platform, python)


def test_target_from_what_a_node_reports():
    assert target_for_machine("aarch64\n", "Python 3.12.3") == AARCH64
    assert target_for_machine("arm64", "3.12") == AARCH64
    assert target_for_machine("x86_64", "3.11.2") == Target("linux-x86_64", "3.11")
    with pytest.raises(UnsupportedTargetError, match="riscv64"):
        target_for_machine("riscv64", "3.12.0")
    with pytest.raises(UnsupportedTargetError, match="3.8"):
        target_for_machine("aarch64", "Python 3.8.10")


def test_host_target_is_this_interpreter():
    import sys

    assert host_target().python == f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.parametrize(
    ("tag", "glibc"),
    [("manylinux_2_28_aarch64", (2, 28)), ("manylinux2014_aarch64", (2, 17)), ("manylinux1_x86_64", (2, 5)),
     ("any", None)],
)
def test_glibc_of_platform_tags(tag, glibc):
    assert glibc_of(tag) == glibc
