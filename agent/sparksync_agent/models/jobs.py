"""Long model operations as jobs the client follows: a fetch from a hub, a push to another node.

Each job runs one child process in its own process group (rsync and its
ssh, or huggingface_hub), read by a thread that keeps the job's progress.
Cancelling one sends SIGTERM to its group: rsync keeps what it had with
``--partial`` and huggingface_hub its ``.incomplete`` blob, so the next run
resumes. A finished job stays listed until the agent restarts (at most
``KEEP`` of them).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

from sparksync_agent.models import checks
from sparksync_agent.models.errors import ModelError
from sparksync_agent.models.roots import default_hf_cache
from sparksync_agent.models.scan import FETCHING_MARK
from sparksync_agent.models.store import ModelStore
from sparksync_agent.protocol import (
    FetchRequest,
    JobKind,
    JobState,
    ModelJob,
    PushRequest,
    ReachReply,
    ReachRequest,
)
from sparksync_agent.transfer import RsyncProgress, rsync_argv, run_rsync, ssh_command

log = logging.getLogger(__name__)

KEEP = 50
POLL_S = 0.25
JOB_WAIT_MAX_S = 5.0  # the longest a reader of a job may wait for its end in one call


class _Job:
    def __init__(self, kind: JobKind, name: str, total: int = 0):
        self.status = ModelJob(
            id=uuid.uuid4().hex[:12], kind=kind, name=name, state=JobState.running, bytes_total=total,
            started_at=time.time(),
        )  # fmt: skip
        self.proc: subprocess.Popen | None = None
        self.cancelled = False
        self.lock = threading.Lock()
        self.ended = threading.Event()

    def update(self, **changes) -> None:
        with self.lock:
            self.status = self.status.model_copy(update=changes)

    def finish(self, state: JobState, message: str | None = None, **changes) -> None:
        if self.cancelled and state is JobState.failed:
            state, message = JobState.cancelled, "cancelled; what was copied is kept for the next run"
        self.update(state=state, message=message, finished_at=time.time(), **changes)
        self.ended.set()


class JobBoard:
    def __init__(self, store: ModelStore):
        self.store = store
        self._jobs: OrderedDict[str, _Job] = OrderedDict()
        self._lock = threading.Lock()

    def all(self) -> list[ModelJob]:
        with self._lock:
            return [j.status for j in self._jobs.values()]

    def get(self, job_id: str, wait_s: float = 0.0) -> ModelJob:
        """The job now, or once it has ended, waiting at most ``wait_s``: its end is heard at once."""
        job = self._job(job_id)
        if wait_s > 0:
            job.ended.wait(min(wait_s, JOB_WAIT_MAX_S))
        return job.status

    def cancel(self, job_id: str) -> ModelJob:
        job = self._job(job_id)
        job.cancelled = True
        if job.proc is not None and job.proc.poll() is None:
            try:
                os.killpg(job.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return job.status

    def close(self) -> None:
        for job_id in list(self._jobs):
            if not self._jobs[job_id].status.state.finished:
                self.cancel(job_id)

    def _job(self, job_id: str) -> _Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise ModelError(404, "no_job", f"no model job {job_id!r} on this node")
        return job

    def _add(self, job: _Job, target) -> ModelJob:
        with self._lock:
            self._jobs[job.status.id] = job
            while len(self._jobs) > KEEP:
                oldest = next(iter(self._jobs))
                if not self._jobs[oldest].status.state.finished:
                    break
                del self._jobs[oldest]
        threading.Thread(target=self._guard, args=(job, target), name=f"model-{job.status.kind.value}",
                         daemon=True).start()  # fmt: skip
        return job.status

    @staticmethod
    def _guard(job: _Job, target) -> None:
        try:
            target(job)
        except Exception as exc:  # a job must always end with a state and a reason
            log.exception("model job %s failed", job.status.id)
            job.finish(JobState.failed, f"the agent hit an unexpected error: {exc}")

    # --- push ---------------------------------------------------------------------------------

    def push(self, request: PushRequest) -> ModelJob:
        checks.name(request.name)
        checks.user(request.user)
        directory, sizes = self._push_source(request)
        files = list(sizes)
        job = _Job(JobKind.push, request.name, sum(sizes.values()))
        rsh = ssh_command(request.port, request.identity_file, request.known_hosts, control_dir=self.control_dir)
        dest = f"{request.user}@{request.host}:{request.staging}"
        argv = rsync_argv(str(directory), dest, rsh=rsh, checksum=request.checksum)
        return self._add(job, lambda j: self._run_rsync(j, argv, files))

    def _push_source(self, request: PushRequest) -> tuple[Path, dict[str, int]]:
        """The folder a push sends from and its files' sizes: the present copy, or the one being received."""
        if request.from_staging:
            return self.store.staged(request.name, request.files)
        found = self.store.present(request.name)
        files = request.files or found.files
        unknown = sorted(set(files) - set(found.files))
        if unknown:
            raise ModelError(404, "no_file", f"{request.name} has no file {unknown[0]!r}")
        return found.directory, {rel: (found.directory / rel).stat().st_size for rel in files}

    def _run_rsync(self, job: _Job, argv: list[str], files: list[str]) -> None:
        log.info("push of %s: %s", job.status.name, " ".join(argv[:-1]))

        def moved(progress: RsyncProgress) -> None:
            job.update(bytes_done=min(progress.bytes_done, job.status.bytes_total))

        def started(proc: subprocess.Popen) -> None:
            job.proc = proc

        done = run_rsync(argv, files, moved, started)
        literal = done.progress.literal_bytes
        if done.returncode == 0:
            job.finish(JobState.done, bytes_done=job.status.bytes_total, literal_bytes=literal)
        else:
            detail = done.stderr_tail or f"rsync exited with status {done.returncode}"
            job.finish(JobState.failed, f"rsync failed ({done.returncode}): {detail}", literal_bytes=literal)

    # --- reach -------------------------------------------------------------------------------------

    @property
    def control_dir(self) -> Path:
        """Where this agent's ssh masters keep their sockets (see ``ssh_command``).

        Under ``~/.ssh``, not the state dir: a socket's path must stay short.
        """
        return Path.home() / ".ssh" / "sparksync"

    def reach(self, request: ReachRequest, timeout_s: float = 15.0) -> ReachReply:
        """Whether this node can ssh to ``host`` with its own key (the node-to-node mesh).

        The connection stays up a while, so the push that follows rides on it.
        """
        checks.user(request.user)
        ssh = ssh_command(request.port, request.identity_file, request.known_hosts, timeout_s=5,
                          control_dir=self.control_dir)  # fmt: skip
        argv = [*ssh,
                f"{request.user}@{request.host}", "command -v rsync >/dev/null"]  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ReachReply(ok=False, detail=str(exc))
        if done.returncode == 0:
            return ReachReply(ok=True)
        text = done.stderr.decode(errors="replace").strip().splitlines()
        return ReachReply(ok=False, detail=(text[-1] if text else f"ssh exited with {done.returncode}"))

    # --- fetch -------------------------------------------------------------------------------------

    def fetch(self, request: FetchRequest) -> ModelJob:
        checks.name(request.repo, "repo id")
        checks.revision(request.revision)
        checks.endpoint(request.endpoint)
        hub = self.store.roots.hf_cache
        job = _Job(JobKind.fetch, request.repo)
        return self._add(job, lambda j: self._run_fetch(j, request, hub))

    def _run_fetch(self, job: _Job, request: FetchRequest, hub: Path) -> None:
        hub.mkdir(parents=True, exist_ok=True)
        repo_dir = hub / ("models--" + request.repo.replace("/", "--"))
        repo_dir.mkdir(parents=True, exist_ok=True)
        mark = repo_dir / FETCHING_MARK
        mark.touch()  # listed partial until the download has ended
        env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
        env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_CACHE=str(hub))
        if request.endpoint:
            env["HF_ENDPOINT"] = request.endpoint
        if request.token is not None:
            env["HF_TOKEN"] = request.token  # its environment, nowhere else
        argv = [sys.executable, "-m", "sparksync_agent.models.fetch_hf", "--repo", request.repo,
                "--revision", request.revision, "--cache-dir", str(hub)]  # fmt: skip
        for pattern in request.allow_patterns:
            argv += ["--allow", pattern]
        proc = job.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        errors: list[bytes] = []
        threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True).start()  # type: ignore[union-attr]
        answers: list[dict] = []

        def read_stdout() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                try:
                    answers.append(json.loads(line))
                except ValueError:
                    continue
                if "total" in answers[-1]:
                    job.update(bytes_total=int(answers[-1]["total"]))

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        blobs = repo_dir / "blobs"
        while proc.poll() is None:
            job.update(bytes_done=_folder_bytes(blobs))
            time.sleep(POLL_S)
        reader.join(5)
        if proc.returncode != 0:
            text = b"".join(errors).decode(errors="replace").strip().splitlines()
            detail = text[-1] if text else f"exit status {proc.returncode}"
            job.finish(JobState.failed, f"the download of {request.repo} failed: {detail}")
            return
        mark.unlink(missing_ok=True)
        found = self.store.find(request.repo)
        entry = self.store.entry(found) if found is not None else None
        self.store.cache.save()
        done = entry.size_bytes if entry is not None else _folder_bytes(blobs)
        job.finish(JobState.done, bytes_done=done, bytes_total=max(done, job.status.bytes_total), model=entry)


def _folder_bytes(folder: Path) -> int:
    total = 0
    try:
        for entry in os.scandir(folder):
            try:
                total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    except OSError:
        return 0
    return total
