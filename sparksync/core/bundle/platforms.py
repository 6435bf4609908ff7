"""The targets a bundle is built for, and the wheel tags each one accepts.

A target is an OS/CPU pair plus a CPython minor version. Everything pip needs to
pick wheels for a machine it is not running on (``--platform``,
``--python-version``, ``--implementation``, ``--abi``) and everything the
verifier needs to check a wheel (the set of compatible tags) comes from here,
so the two can never disagree.

Defaults, and why: nodes are DGX Sparks, which run DGX OS 7 on aarch64. DGX OS
7 is based on Ubuntu 24.04 LTS (NVIDIA's DeepOps 26.07 release notes list
"DGX OS 7 (Ubuntu 24.04)", github.com/NVIDIA/deepops/releases/tag/26.07; a
DGX Spark reports "Ubuntu 24.04.4 LTS", conselara.dev/notes/dgx-spark-gb10-
hardware-reference), and Ubuntu 24.04's python3 is CPython 3.12
(/usr/bin/python3.12). Hence linux-aarch64 and 3.12.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

from packaging import tags
from packaging.tags import Tag

from sparksync.core.bundle.errors import UnsupportedTargetError

# Platform name -> the CPU name in wheel tags.
PLATFORMS: dict[str, str] = {"linux-aarch64": "aarch64", "linux-x86_64": "x86_64"}
PYTHONS: tuple[str, ...] = ("3.10", "3.11", "3.12")
DEFAULT_PLATFORM = "linux-aarch64"
DEFAULT_PYTHON = "3.12"  # DGX OS 7 = Ubuntu 24.04 = python3 3.12 (see above)

# The newest glibc a bundle may rely on. Ubuntu 22.04 (DGX OS 6) has 2.35,
# Debian 12 has 2.36 and Ubuntu 24.04 (DGX OS 7) has 2.39: wheels tagged up to
# 2.35 run on all of them, so one bundle serves every node of a given CPU.
GLIBC_CEILING = 35
# The oldest manylinux glibc per CPU (aarch64 wheels started with manylinux2014).
_GLIBC_FLOOR = {"aarch64": 17, "x86_64": 5}
# PEP 600 aliases: the legacy manylinux names and the glibc each one means.
_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_MANYLINUX_RE = re.compile(r"manylinux_(\d+)_(\d+)_")

# `uname -m` spellings a node may report, mapped to our platform names.
_MACHINES = {
    "aarch64": "linux-aarch64",
    "arm64": "linux-aarch64",
    "x86_64": "linux-x86_64",
    "amd64": "linux-x86_64",
}


@dataclass(frozen=True)
class Target:
    """One bundle target: a platform from PLATFORMS and a Python from PYTHONS."""

    platform: str
    python: str

    def __post_init__(self) -> None:
        if self.platform not in PLATFORMS:
            raise UnsupportedTargetError(
                f"no agent bundle for platform {self.platform!r}; choose one of {', '.join(PLATFORMS)}"
            )
        if self.python not in PYTHONS:
            raise UnsupportedTargetError(
                f"no agent bundle for Python {self.python!r}; choose one of {', '.join(PYTHONS)} "
                "(the node needs one of these as python3)"
            )

    @property
    def arch(self) -> str:
        return PLATFORMS[self.platform]

    @property
    def python_nodot(self) -> str:
        return self.python.replace(".", "")

    @property
    def abi(self) -> str:
        return f"cp{self.python_nodot}"

    def bundle_name(self, agent_version: str) -> str:
        """The archive's file name, which is also its cache key."""
        return f"sparksync-agent-{agent_version}-{self.platform}-py{self.python}.tar.gz"

    def describe(self) -> str:
        return f"{self.platform} Python {self.python}"

    @cached_property
    def platform_tags(self) -> list[str]:
        """manylinux tags this target runs, newest first (pip prefers earlier ones).

        pip does not expand ``manylinux_2_35`` into older glibcs by itself, so
        every step is listed. musllinux is left out on purpose: those wheels
        link musl and do not run on glibc systems such as DGX OS.
        """
        floor = _GLIBC_FLOOR[self.arch]
        names = [f"manylinux_2_{minor}_{self.arch}" for minor in range(GLIBC_CEILING, floor - 1, -1)]
        legacy = [name for name, (_, minor) in _LEGACY_MANYLINUX.items() if minor >= floor]
        return names + [f"{name}_{self.arch}" for name in legacy]

    @cached_property
    def supported_tags(self) -> frozenset[Tag]:
        """Every wheel tag an installed CPython of this target accepts (abi3 and none-any included)."""
        version = (3, int(self.python.split(".")[1]))
        return frozenset(
            chain(
                tags.cpython_tags(version, abis=[self.abi], platforms=self.platform_tags),
                tags.compatible_tags(version, interpreter=self.abi, platforms=self.platform_tags),
            )
        )

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values on a node of this target (``python_version < '3.11'`` is tested on them).

        Values a bundle cannot know (the node's kernel release, the Python
        patch level) are set to neutral guesses.
        """
        return {
            "implementation_name": "cpython",
            "implementation_version": f"{self.python}.0",
            "os_name": "posix",
            "platform_machine": self.arch,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": f"{self.python}.0",
            "python_version": self.python,
            "sys_platform": "linux",
        }

    def pip_target_args(self) -> list[str]:
        """pip options that make it choose wheels for this target instead of this machine."""
        args = [f"--platform={tag}" for tag in self.platform_tags]
        # abi3 and none are listed explicitly so stable-ABI wheels (psutil's
        # cp36-abi3) and pure wheels are accepted, not only cp3XY ones.
        args += [f"--python-version={self.python}", "--implementation=cp"]
        args += [f"--abi={self.abi}", "--abi=abi3", "--abi=none", "--only-binary=:all:"]
        return args


def target_for_machine(machine: str, python_version: str) -> Target:
    """The target of a node from its ``uname -m`` and its ``python3 --version`` (``3.12.3`` or ``3.12``)."""
    platform = _MACHINES.get(machine.strip().lower())
    if platform is None:
        raise UnsupportedTargetError(
            f"the node's CPU is {machine.strip()!r}; the agent runs on aarch64 and x86_64 Linux only"
        )
    parts = python_version.strip().removeprefix("Python ").split(".")
    return Target(platform, ".".join(parts[:2]))


def host_target() -> Target:
    """The target of this very machine (the lab's nodes are this machine)."""
    import platform as _platform

    return target_for_machine(_platform.machine(), f"{sys.version_info.major}.{sys.version_info.minor}")


def glibc_of(platform_tag: str) -> tuple[int, int] | None:
    """The glibc a manylinux platform tag needs, or None when it needs none (``any``)."""
    match = _MANYLINUX_RE.match(platform_tag)
    if match:
        return int(match.group(1)), int(match.group(2))
    for name, version in _LEGACY_MANYLINUX.items():
        if platform_tag.startswith(name + "_"):
            return version
    return None
