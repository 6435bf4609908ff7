"""Keep an engine off the client's CPUs in a CPU-only benchmark.

On a cluster the engine computes on the Sparks' GPUs and the client (the
desktop app, the CLI, the tools it runs) lives on a laptop: neither slows the
other. On this small CPU-only machine they would share the same cores, and a
benchmark of the client would measure their fight for them instead. So the
engine gets a CPU of its own and the client side the others, for every side
of a comparison alike.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class CpuSplit:
    engine: frozenset[int]
    client: frozenset[int]

    def describe(self) -> str:
        return f"engine on CPU {_cpus(self.engine)}, client on CPU {_cpus(self.client)}"


def pin(pid: int, cpus: frozenset[int]) -> None:
    """Every thread of ``pid`` on ``cpus``; threads it starts later inherit them from their parent thread."""
    for thread in psutil.Process(pid).threads():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(thread.id, cpus)


@contextlib.contextmanager
def engine_apart(engine_pid: int) -> Iterator[CpuSplit | None]:
    """The engine (all its threads) on the last CPU; this process, and so whatever it starts in the
    block, on the others. This process gets its CPUs back at the end; the engine keeps its own.

    Yields None, changing nothing, on a single-CPU machine.
    """
    me = os.getpid()
    cpus = sorted(os.sched_getaffinity(me))
    if len(cpus) < 2:
        yield None
        return
    split = CpuSplit(engine=frozenset(cpus[-1:]), client=frozenset(cpus[:-1]))
    before = {t.id: os.sched_getaffinity(t.id) for t in psutil.Process(me).threads()}
    pin(engine_pid, split.engine)
    pin(me, split.client)
    try:
        yield split
    finally:
        for tid, mask in before.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, mask)


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))
