"""What blocks the GUI thread during its stalls: a sampling profiler for the dashboard benchmark.

A thread samples the GUI thread's Python stack every ``PERIOD_S`` (with
the interpreter's switch interval shortened so it gets the GIL that often)
while a ``Heartbeat`` runs. Afterwards each stall (a beat later than
``STALL_MS``) is matched with the samples taken during it, and each sample
is charged to its *cause*: the innermost SparkSync function on the stack
and the innermost library call under it (pyqtgraph, numpy, Qt's Python
side). ``top_causes`` lists them by the stall time they account for. The
sampling itself slows the GUI thread, so its phase is reported apart from
the measured ones.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass

PERIOD_S = 0.0005
SWITCH_INTERVAL_S = 0.0005
STALL_MS = 8.0
DEPTH = 60
OURS = ("/sparksync/",)
LIBRARIES = {"/pyqtgraph/": "pyqtgraph", "/numpy/": "numpy", "/shiboken6/": "shiboken", "/PySide6/": "PySide6"}


@dataclass(frozen=True)
class Cause:
    ours: str  # module.function of the innermost SparkSync frame ("-" when none)
    library: str  # the innermost library frame under it ("-" when none)

    def text(self) -> str:
        return self.ours if self.library == "-" else f"{self.ours} -> {self.library}"


class StackSampler:
    def __init__(self, thread_id: int | None = None):
        self.thread_id = thread_id if thread_id is not None else threading.main_thread().ident
        self.samples: list[tuple[float, Cause]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._interval = sys.getswitchinterval()

    def start(self) -> StackSampler:
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, name="perf-stack-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        sys.setswitchinterval(self._interval)

    def _run(self) -> None:
        while not self._stop.wait(PERIOD_S):
            frame = sys._current_frames().get(self.thread_id)
            self.samples.append((time.perf_counter(), _cause(frame)))


def _cause(frame) -> Cause:
    ours = library = "-"
    depth = 0
    while frame is not None and depth < DEPTH:
        path = frame.f_code.co_filename.replace("\\", "/")
        name = f"{_module(path)}.{frame.f_code.co_name}"
        if ours == "-" and any(part in path for part in OURS) and "/tests/" not in path:
            ours = name
            break
        if library == "-":
            for part, label in LIBRARIES.items():
                if part in path:
                    library = f"{label}:{name.split('.', 1)[-1]}"
                    break
        frame, depth = frame.f_back, depth + 1
    if ours == "-" and frame is None and library == "-":
        return Cause("(the event loop: Qt itself, or the test's own code)", "-")
    return Cause(ours, library)


def _module(path: str) -> str:
    for root in ("/sparksync/", "/pyqtgraph/", "/numpy/", "/tests/"):
        if root in path:
            tail = path.split(root, 1)[1].removesuffix(".py").replace("/", ".")
            return f"{root.strip('/')}.{tail}"
    return path.rsplit("/", 1)[-1].removesuffix(".py")


def top_causes(samples: list[tuple[float, Cause]], beats: list[tuple[float, float]], period_s: float,
               limit: int = 8) -> tuple[list[tuple[str, float, float]], float]:  # fmt: skip
    """The causes of the stalls: (cause, ms of stall it took, share of all stall time), and the stall total ms.

    ``beats``: (time a heartbeat fired, how late it was, ms).
    """
    charged: Counter[str] = Counter()
    total_ms = 0.0
    times = [t for t, _ in samples]
    for fired, late_ms in beats:
        if late_ms < STALL_MS:
            continue
        start = fired - late_ms / 1000 - period_s
        total_ms += late_ms
        inside = [cause for t, cause in samples[_first_at(times, start):] if t <= fired]
        if not inside:
            charged["(no sample taken in it)"] += late_ms
            continue
        for cause in inside:
            charged[cause.text()] += late_ms / len(inside)
    ranked = [(cause, ms, ms / total_ms if total_ms else 0.0) for cause, ms in charged.most_common(limit)]
    return ranked, total_ms


def _first_at(times: list[float], start: float) -> int:
    import bisect

    return bisect.bisect_left(times, start)
