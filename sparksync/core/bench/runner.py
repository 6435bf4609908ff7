"""Run the pinned llama-benchy against an endpoint, with live progress and a clean cancel.

    runner = BenchRunner(BenchRequest(endpoint, "qwen", Path("tokenizer.json")), on_progress=print)
    outcome = runner.run()          # blocking; runner.cancel() from another thread stops it

The run has two stages. The preflight (preflight.py) refuses bad input before
anything is measured. Then llama-benchy runs as a subprocess in its own
process group, reading the prompt text from a loopback server; its JSONL
progress is followed while it runs. Cancelling sends SIGINT to the group,
which makes llama-benchy save the tests it finished; the outcome is then
"partial" and keeps them.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from sparksync.core.bench import benchy
from sparksync.core.bench.context import RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchCancelledError
from sparksync.core.bench.preflight import PreflightReport, resolve_tokenizer, run_preflight
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.progress import BenchProgress, JsonlFollower, ProgressTracker, RequestStat
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE, PromptServer, read_prompt_text
from sparksync.core.bench.results import SuiteRow, measured_rows, suite_rows
from sparksync.core.planner.bounds import Hardware

log = logging.getLogger(__name__)

Status = Literal["complete", "partial", "failed"]
ProgressCallback = Callable[[BenchProgress], None]

POLL_S = 0.1
# llama-benchy needs a moment after SIGINT to write its partial JSON.
INTERRUPT_GRACE_S = 15.0
TERMINATE_GRACE_S = 5.0
# The server's prompt count may differ from the requested one by the template
# delta llama-benchy adapts for; beyond this the prompts were not the size asked.
PROMPT_COUNT_TOLERANCE = 0.2
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class BenchRequest:
    """What to benchmark, with what, and where it ran (for the history)."""

    endpoint: Endpoint
    model: str
    tokenizer: Path
    profile: BenchProfile = field(default_factory=BenchProfile.published)
    served_model_name: str | None = None
    prompt_file: Path = DEFAULT_PROMPT_FILE
    context: RunContext = field(default_factory=RunContext)
    # For the bounds beside the figures (bounds.py): the model's own files, and the nodes' figures.
    model_file: Path | None = None
    hardware: Hardware | None = None

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model


@dataclass
class BenchOutcome:
    """How a run ended, and everything it produced."""

    status: Status
    result: dict[str, Any] | None
    error: str | None
    warnings: list[str]
    progress: BenchProgress
    requests: list[RequestStat]
    preflight: PreflightReport
    benchy_version: str
    started_at: datetime
    duration_s: float
    cancelled: bool
    returncode: int | None
    log_tail: str


class BenchRunner:
    """One benchmark run; ``run()`` blocks, ``cancel()`` may come from any thread."""

    def __init__(self, request: BenchRequest, on_progress: ProgressCallback | None = None,
                 poll_s: float = POLL_S, interrupt_grace_s: float = INTERRUPT_GRACE_S):
        self.request = request
        self._on_progress = on_progress
        self._poll_s = poll_s
        self._interrupt_grace_s = interrupt_grace_s
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def run(self) -> BenchOutcome:
        version = benchy.installed_version()
        request = self.request
        text = read_prompt_text(request.prompt_file)
        tokenizer = resolve_tokenizer(request.tokenizer)
        report = run_preflight(request.endpoint, request.served_name, tokenizer, request.profile, text)
        for warning in report.warnings:
            log.info("benchmark: %s", warning)  # callers show the outcome's warnings themselves
        if self.cancel_requested:
            raise BenchCancelledError("benchmark cancelled before it started; nothing was measured")
        with tempfile.TemporaryDirectory(prefix="sparksync-bench-") as work, PromptServer(text) as prompt:
            call = benchy.BenchyCall(
                base_url=request.endpoint.base_url, model=request.model,
                served_model_name=request.served_name, tokenizer=tokenizer, book_url=prompt.url,
                profile=request.profile, result_path=Path(work) / "result.json",
                progress_path=Path(work) / "progress.jsonl",
                one_connection_per_request=bool(report.facts.closes_after_stream))
            return _Drive(self, call, Path(work), report, version).run()

    def _publish(self, progress: BenchProgress) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress(progress)
        except Exception:  # a broken view must not break the measurement
            log.exception("benchmark progress callback failed")


class _Drive:
    """The subprocess part of one run: start, follow, stop, and judge the result."""

    def __init__(self, runner: BenchRunner, call: benchy.BenchyCall, work: Path, report: PreflightReport,
                 version: str):
        self.runner, self.call, self.work, self.report, self.version = runner, call, work, report, version
        self.tracker = ProgressTracker(call.profile.request_count())
        self.follower = JsonlFollower(call.progress_path)
        self.log_path = work / "llama-benchy.log"
        self.cancelled = False

    def run(self) -> BenchOutcome:
        started, t0 = datetime.now(timezone.utc), time.monotonic()
        with open(self.log_path, "wb") as log_file:
            env = benchy.environment(self.work / "home", self.runner.request.endpoint.api_key,
                                     self.call.one_connection_per_request)
            # Its own session, so a terminal's Ctrl-C reaches only us and we stop llama-benchy in order.
            proc = subprocess.Popen(benchy.command(self.call), stdout=log_file, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.work, start_new_session=True, env=env)
        try:
            self._follow(proc)
        except KeyboardInterrupt:
            self.cancelled = True
            self._interrupt(proc)
        finally:
            _kill_group(proc)
        self._pump()
        return self._outcome(proc.returncode, started, time.monotonic() - t0)

    def _follow(self, proc: subprocess.Popen) -> None:
        while proc.poll() is None:
            self._pump()
            if self.runner._cancel.wait(self.runner._poll_s):  # wakes at once on cancel()
                self.cancelled = True
                self._interrupt(proc)
                return

    def _pump(self) -> None:
        events = self.follower.read_new()
        for event in events:
            self.tracker.feed(event)
        if events:
            self.runner._publish(self.tracker.snapshot())

    def _interrupt(self, proc: subprocess.Popen) -> None:
        """SIGINT (llama-benchy saves what it finished), then SIGTERM, then SIGKILL."""
        for sig, grace in ((signal.SIGINT, self.runner._interrupt_grace_s),
                           (signal.SIGTERM, TERMINATE_GRACE_S), (signal.SIGKILL, None)):
            log.info("stopping llama-benchy (pid %d) with %s", proc.pid, sig.name)
            _signal_group(proc, sig)
            try:
                proc.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def _outcome(self, returncode: int | None, started: datetime, duration: float) -> BenchOutcome:
        result = _load_result(self.call.result_path)
        status, error = _judge(result, self.tracker, self.call.profile, self.cancelled, returncode,
                               self._log_tail())
        progress = self.tracker.snapshot()
        self.runner._publish(progress)
        return BenchOutcome(
            status=status, result=result, error=error,
            warnings=(self.report.warnings + _prompt_count_warnings(self.tracker.requests)
                      + _thin_test_warnings(result, self.call.profile)),
            progress=progress, requests=self.tracker.requests, preflight=self.report,
            benchy_version=self.version, started_at=started, duration_s=duration,
            cancelled=self.cancelled, returncode=returncode, log_tail=self._log_tail())

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return ""


def _judge(result: dict | None, tracker: ProgressTracker, profile: BenchProfile, cancelled: bool,
           returncode: int | None, log_tail: str) -> tuple[Status, str | None]:
    measured = measured_rows(result)
    expected = len(profile.pp) * len(profile.tg) * len(profile.depth) * len(profile.concurrency)
    failures = _request_errors(tracker.requests)
    done = tracker.snapshot().requests_done
    if cancelled:
        kept = f"the {len(measured)} finished test(s) are kept" if measured else "no test had finished"
        status: Status = "partial" if measured or done else "failed"
        return status, (f"cancelled after {done} of {tracker.requests_total} measured requests; {kept}")
    missing = _missing_figures(measured)
    if returncode == 0 and len(measured) == len(suite_rows(result)) == expected and not failures and not missing:
        return "complete", None
    if measured:
        problems = []
        if len(measured) < expected:
            problems.append(f"only {len(measured)} of {expected} tests have figures")
        problems += missing
        if failures:
            problems.append(f"requests failed: {failures}; the figures come from the runs that succeeded")
        problems = problems or [f"llama-benchy exited with status {returncode}"]
        return "partial", "; ".join(problems) + "; check the endpoint's log, then run the benchmark again"
    reason = failures or _benchy_error(log_tail) or f"llama-benchy exited with status {returncode}"
    return "failed", f"the benchmark produced no figures: {reason}"


def _missing_figures(rows: list[SuiteRow]) -> list[str]:
    """Tests that have figures but no decode or prefill speed: a run without one is not complete.

    llama-benchy leaves a test's decode speed out (null) when in none of its runs it could
    time two tokens apart: all of them arrived in one read. One generated token has no
    decode speed by definition. It leaves the prefill speed out when in every run its
    estimate of the network latency (the time a model list takes) was as long as the wait
    for the first response, which leaves no prefill time to divide by.
    """
    missing = []
    for row in rows:
        if row.decode_tps is None and row.response_size > 1:
            missing.append(f"{row.label}: llama-benchy measured no decode speed (in every run the tokens "
                           "arrived at once: the client was starved of CPU or the server sent them in one burst)")
        if row.prefill_tps is None and row.prompt_size > 0:
            missing.append(f"{row.label}: llama-benchy measured no prefill speed (in every run the first "
                           "response came sooner than its estimate of the network latency: use a longer prompt, "
                           "or check that the endpoint answers its model list quickly)")
    return missing


def _request_errors(requests: list[RequestStat]) -> str:
    errors = [r.error for r in requests if r.done and r.error]
    if not errors:
        return ""
    distinct = sorted(set(errors))
    return f"{len(errors)} request(s): " + "; ".join(e[:200] for e in distinct[:3])


# Lines llama-benchy prints when it gives up; the first one found explains the failure.
_BENCHY_FAILURES = ("Warmup failed", "Error downloading", "Error loading tokenizer", "Error:", "Traceback")


def _benchy_error(log_tail: str) -> str:
    lines = log_tail.splitlines()
    for marker in _BENCHY_FAILURES:
        for line in lines:
            if marker in line:
                return line.strip() if marker != "Traceback" else lines[-1].strip()
    return ""


def _prompt_count_warnings(requests: list[RequestStat]) -> list[str]:
    off = [r for r in requests if r.done and not r.error and r.server_prompt_tokens > 0
           and abs(r.server_prompt_tokens - r.expected_prompt_tokens)
           > PROMPT_COUNT_TOLERANCE * r.expected_prompt_tokens]
    if not off:
        return []
    r = off[0]
    return [f"the server counted {r.server_prompt_tokens} prompt tokens where {r.expected_prompt_tokens} "
            f"were asked ({len(off)} request(s)); the tokenizer may not match the served model"]


def _thin_test_warnings(result: dict | None, profile: BenchProfile) -> list[str]:
    """llama-benchy drops a run's decode figure when all its tokens arrived in one read; say so."""
    thin = [(row.label, n) for row, n in _decode_counts(result) if n < profile.effective_runs]
    return [f"{label}: decode measured in {n} of {profile.effective_runs} runs (llama-benchy could not time "
            "the others' tokens apart: the client was starved of CPU or the tokens came in one burst)"
            for label, n in thin]


def _decode_counts(result: dict | None) -> list[tuple[Any, int]]:
    entries = [e for e in (result or {}).get("benchmarks") or [] if not e.get("is_context_prefill_phase")]
    rows = suite_rows(result)
    return [(row, len((entry.get("tg_throughput") or {}).get("values") or []))
            for row, entry in zip(rows, entries, strict=False) if row.decode_tps is not None]


def _load_result(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # none written (failed early), or cut short by a hard kill
    return data if isinstance(data, dict) else None


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _kill_group(proc: subprocess.Popen) -> None:
    """Leave nothing running when the loop ends early (an exception, a second Ctrl-C).

    llama-benchy starts no children of its own (no --post-run-cmd), so once
    its process has exited and been reaped there is nothing left to kill, and
    its old process-group id must not be signalled: it may have been reused.
    """
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL)
    proc.wait()
