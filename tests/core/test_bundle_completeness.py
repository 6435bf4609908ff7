"""Which wheels the agent installs on the target, and what the bundle lacks (fake wheels, no network)."""

from __future__ import annotations

from sparksync.core.bundle import Target
from sparksync.core.bundle.completeness import missing_requirements, resolve
from tests.core.bundle_helpers import AGENT_WHEEL, fake_wheel

AGENT_REQUIRES = (
    "anyio>=4",
    "nvidia-ml-py>=12; extra == 'gpu'",
    "uvloop; platform_machine == 'aarch64'",
)


def wheels(tmp_path, *names_and_requires) -> None:
    fake_wheel(tmp_path, AGENT_WHEEL, AGENT_REQUIRES)
    for name, requires in names_and_requires:
        fake_wheel(tmp_path, name, requires)


ANYIO = ("anyio-4.16.0-py3-none-any.whl", ("exceptiongroup>=1.0.2; python_version < '3.11'", "idna>=2.8"))
IDNA = ("idna-3.20-py3-none-any.whl", ())
NVML = ("nvidia_ml_py-13.0-py3-none-any.whl", ())
UVLOOP = ("uvloop-0.21.0-cp310-cp310-manylinux2014_aarch64.whl", ())


def test_markers_are_tested_with_the_targets_python(tmp_path):
    wheels(tmp_path, ANYIO, IDNA, NVML, UVLOOP)
    assert missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-aarch64", "3.12")) == []
    missing = missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-aarch64", "3.10"))
    assert missing == ["exceptiongroup>=1.0.2 (needed by anyio-4.16.0-py3-none-any.whl)"]


def test_markers_are_tested_with_the_targets_cpu(tmp_path):
    wheels(tmp_path, ANYIO, IDNA, NVML)
    assert missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-x86_64", "3.12")) == []
    missing = missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-aarch64", "3.12"))
    assert [m.split(" ")[0] for m in missing] == ["uvloop"]


def test_the_gpu_extra_is_followed_only_when_asked_for(tmp_path):
    wheels(tmp_path, ANYIO, IDNA, UVLOOP)
    target = Target("linux-aarch64", "3.12")
    assert missing_requirements(tmp_path, AGENT_WHEEL, [], target) == []
    assert missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], target)[0].startswith("nvidia-ml-py>=12")


def test_a_version_that_does_not_satisfy_counts_as_missing(tmp_path):
    wheels(tmp_path, ("anyio-3.7.1-py3-none-any.whl", ()), NVML, UVLOOP)
    missing = missing_requirements(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-aarch64", "3.12"))
    assert missing == [f"anyio>=4 (needed by {AGENT_WHEEL})"]


def test_the_wheels_to_install_are_the_agents_closure_on_the_target_and_nothing_else(tmp_path):
    pip = ("pip-26.3-py3-none-any.whl", ())
    wheels(tmp_path, ANYIO, IDNA, NVML, UVLOOP, ("exceptiongroup-1.3.0-py3-none-any.whl", ()), pip)
    spark = resolve(tmp_path, AGENT_WHEEL, ["gpu"], Target("linux-aarch64", "3.12"))
    # Neither pip (not the agent's) nor exceptiongroup (Python < 3.11 only).
    assert spark.wheels == sorted([AGENT_WHEEL, ANYIO[0], IDNA[0], NVML[0], UVLOOP[0]])
    assert spark.missing == spark.conflicts == []
    x86_310 = resolve(tmp_path, AGENT_WHEEL, [], Target("linux-x86_64", "3.10"))
    assert x86_310.wheels == sorted([AGENT_WHEEL, ANYIO[0], IDNA[0], "exceptiongroup-1.3.0-py3-none-any.whl"])


def test_the_newest_fitting_version_is_installed_and_two_picked_versions_are_a_conflict(tmp_path):
    old_idna = ("idna-2.10-py3-none-any.whl", ())
    wheels(tmp_path, ANYIO, IDNA, old_idna, NVML, UVLOOP)
    target = Target("linux-aarch64", "3.12")
    assert IDNA[0] in resolve(tmp_path, AGENT_WHEEL, ["gpu"], target).wheels
    assert old_idna[0] not in resolve(tmp_path, AGENT_WHEEL, ["gpu"], target).wheels
    fake_wheel(tmp_path, NVML[0], ("idna<3",))  # the GPU extra now wants the old idna, anyio the new one
    conflicted = resolve(tmp_path, AGENT_WHEEL, ["gpu"], target)
    assert conflicted.conflicts == [f"idna: {old_idna[0]}, {IDNA[0]}"]
