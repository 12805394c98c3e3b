"""The session's background jobs (SPEC §4, BG-1 … BG-5).

A :class:`JobManager` belongs to one session. ``start`` returns at once with a job id;
the job runs ``bash -c COMMAND`` in the workspace under a small supervisor process
(see :mod:`crystal_kernel.jobs.supervisor`) in a session of its own, with stdin on
/dev/null. Its output (stdout and stderr interleaved, as in a terminal) goes to a
bounded ring buffer read by absolute offset, and is mirrored to a bounded, rotating
log file next to a small JSON status file (format in docs/jobs.md).

Lifetime (BG-2): jobs stop on :meth:`JobManager.close`, when the host process exits
normally (atexit), and when the host is killed (the supervisor's parent-death signal).

Threads, not asyncio: each job has one reader thread, so the manager works the same
whether or not the caller's thread runs an event loop (the kernel and the CLI do;
tests and atexit do not). Everything is callable from any thread; the ``a``-prefixed
methods are the non-blocking variants for code inside an event loop.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, overload

from crystal_kernel.core import paths
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.fsutil import ensure_folder_inside
from crystal_kernel.jobs.buffer import LogChunk
from crystal_kernel.jobs.guarded import supervisor_command
from crystal_kernel.jobs.job import KILL_MARGIN_SECONDS, RUNNING, STOPPED, Job, JobInfo
from crystal_kernel.jobs.sandbox import Sandbox
from crystal_kernel.jobs.status import mark_lost, next_job_number

DEFAULT_TIMEOUT_SECONDS = 10800.0
MAX_ACTIVE = 32
BUFFER_BYTES = 1024 * 1024
LOG_BYTES = 8 * 1024 * 1024
GRACE_SECONDS = 5.0
# Finished jobs kept in memory (their status and log files stay on disk regardless).
MAX_FINISHED = 200



class _Spawner:
    """One long-lived thread that starts every supervisor. Linux delivers the
    parent-death signal when the *thread* that forked a child exits, so children must
    not be forked from short-lived threads (a worker of ``asyncio.to_thread``, say)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, func: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="crystal-jobs-spawner", daemon=True)
                self._thread.start()
        future: Future[Any] = Future()
        self._queue.put((func, future))
        return future.result()

    def _loop(self) -> None:
        while True:
            func, future = self._queue.get()
            try:
                future.set_result(func())
            except BaseException as exc:  # handed back to the caller
                future.set_exception(exc)


_SPAWNER = _Spawner()
_MANAGERS: weakref.WeakSet[JobManager] = weakref.WeakSet()


@atexit.register
def _close_all_at_exit() -> None:
    for manager in list(_MANAGERS):
        # A forked child (multiprocessing) inherits the managers but not their jobs.
        if manager.owner_pid != os.getpid():
            continue
        try:
            manager.close()
        except Exception:
            pass


def job_environment(workspace: Path, session_id: str, job_id: str, config: object = None) -> dict[str, str]:
    """The child environment (TRUST-4: no model keys unless passKeysToTools) plus what a
    job needs to run unattended."""
    from crystal_kernel.core.secrets import child_environment

    return child_environment(config, defaults={"PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}, extra={
        "GIT_PAGER": "cat", "CRYSTAL_WORKSPACE": str(workspace), "CRYSTAL_SESSION": session_id,
        "CRYSTAL_JOB": job_id}, keep_home=True)


class JobManager:
    """Background jobs of one session.

    ``timeout_seconds`` (BG-3, ``backgroundBashTimeoutSeconds``; None = unlimited) stops a
    job that runs longer, with state ``timed out``. ``log_dir`` (default
    ``<workspace>/.crystal/data/jobs/<session_id>``) holds ``<job>.log`` and
    ``<job>.json``. ``max_active`` jobs may run at once (BG-4). ``buffer_bytes`` bounds
    each job's in-memory output, ``log_bytes`` each log file (one rotated file is
    kept). ``grace_seconds`` is the time between TERM and KILL when stopping.
    """

    def __init__(
        self,
        workspace: Path,
        session_id: str,
        *,
        timeout_seconds: float | None = DEFAULT_TIMEOUT_SECONDS,
        log_dir: Path | None = None,
        max_active: int = MAX_ACTIVE,
        buffer_bytes: int = BUFFER_BYTES,
        log_bytes: int = LOG_BYTES,
        grace_seconds: float = GRACE_SECONDS,
        write_files: bool = True,
        config: object = None,
    ) -> None:
        self.workspace = Path(workspace)
        # The session's config: passKeysToTools decides whether jobs see model keys.
        self.config = config
        self.session_id = session_id
        self.timeout_seconds = timeout_seconds if timeout_seconds and timeout_seconds > 0 else None
        self.log_dir: Path | None = None
        if write_files:
            self.log_dir = Path(log_dir) if log_dir else paths.job_dir(self.workspace, session_id)
        self.max_active = max_active
        self.buffer_bytes = buffer_bytes
        self.log_bytes = log_bytes
        self.grace_seconds = grace_seconds
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._next = next_job_number(self.log_dir)
        self.lost = mark_lost(self.log_dir)
        self._bash = shutil.which("bash") or "/bin/bash"
        self.owner_pid = os.getpid()
        _MANAGERS.add(self)

    def move_to(self, workspace: Path) -> None:
        """/cd: later jobs start in, and are mirrored under, the new workspace (so the
        server extension of that folder sees them); running jobs stay where they are."""
        with self._lock:
            self.workspace = Path(workspace)
            if self.log_dir is not None:
                self.log_dir = paths.job_dir(self.workspace, self.session_id)

    def _safe_log_dir(self) -> Path | None:
        """The log folder, made without following a symbolic link planted under the
        workspace (TRUST-3); None (no mirror files for this job) when one is there."""
        if self.log_dir is None:
            return None
        try:
            self.log_dir.relative_to(self.workspace)
        except ValueError:
            return self.log_dir  # a folder the host was given elsewhere: the caller's choice
        try:
            ensure_folder_inside(self.workspace, self.log_dir)
        except OSError:
            return None
        return self.log_dir

    # ----- starting ---------------------------------------------------------------------
    def start(self, command: str, *, cwd: Path | None = None, sandbox: Sandbox | None = None) -> JobInfo:
        """Start ``bash -c command`` and return at once (BG-1), confined by ``sandbox``
        (SANDBOX-1) when given. Refuses (ToolError) an empty command, a closed manager,
        or a start beyond ``max_active`` (BG-4)."""
        if not command.strip():
            raise ToolError("The command is empty.")
        workdir = Path(cwd) if cwd is not None else self.workspace
        if not workdir.is_dir():
            raise ToolError(f"The working folder {workdir} does not exist.")
        with self._lock:
            if self._closed:
                raise ToolError("The session is closed; background jobs can no longer start.")
            active = sum(1 for j in self._jobs.values() if j.state == RUNNING)
            if active >= self.max_active:
                raise ToolError(
                    f"Cannot start another background job: {active} are running and the limit is "
                    f"{self.max_active}. Stop one with bash_stop (or /stop JOB) or wait for one to finish."
                )
            job_id = f"j{self._next}"
            self._next += 1
            log_dir = self._safe_log_dir()
            job = Job(
                job_id=job_id, command=command, session_id=self.session_id,
                buffer_bytes=self.buffer_bytes,
                log_path=log_dir / f"{job_id}.log" if log_dir else None,
                log_bytes=self.log_bytes,
                status_path=log_dir / f"{job_id}.json" if log_dir else None,
                inside=self.workspace if log_dir and log_dir.is_relative_to(self.workspace) else None,
                timeout_seconds=self.timeout_seconds, grace_seconds=self.grace_seconds,
                on_finished=self._finished,
            )
            job.sandbox = sandbox
            # Holding the slot while spawning keeps the limit exact under concurrency.
            self._jobs[job_id] = job
        argv = [*supervisor_command(), *(sandbox.launcher_args() if sandbox else ()),
                str(os.getpid()), repr(self.grace_seconds), self._bash, command]
        env = job_environment(workdir, self.session_id, job_id, self.config)
        try:
            _SPAWNER.run(lambda: job.spawn(argv, workdir, env))
        except BaseException as exc:
            with self._lock:
                self._jobs.pop(job_id, None)
            if job.log is not None:
                job.log.close()
            if isinstance(exc, (OSError, subprocess.SubprocessError)):
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ToolError(f"Cannot start the background job: {reason}.") from None
            raise
        return job.info()

    def _finished(self, job: Job) -> None:
        """A job ended: its slot is free; forget the oldest finished jobs beyond the cap."""
        with self._lock:
            finished = [j for j in self._jobs.values() if j.done.is_set()]
            for old in finished[: max(0, len(finished) - MAX_FINISHED)]:
                self._jobs.pop(old.id, None)

    # ----- reading ------------------------------------------------------------------------
    def sandbox_of(self, job_id: str) -> Sandbox | None:
        """The sandbox a job was started in (SANDBOX-1); None: unconfined."""
        return self._job(job_id).sandbox

    def _job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id.strip())
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise ToolError(f"No background job '{job_id}' in this session (jobs: {known}).")
        return job

    @overload
    def status(self, job_id: None = None) -> list[JobInfo]: ...
    @overload
    def status(self, job_id: str) -> JobInfo: ...

    def status(self, job_id: str | None = None) -> JobInfo | list[JobInfo]:
        """One job's snapshot, or every job's in start order."""
        if job_id is not None:
            return self._job(job_id).info()
        with self._lock:
            jobs = list(self._jobs.values())
        return [j.info() for j in jobs]

    @property
    def active_count(self) -> int:
        return sum(1 for j in list(self._jobs.values()) if j.state == RUNNING)

    def logs(self, job_id: str, offset: int | None = None, limit: int | None = None) -> LogChunk:
        """Output by absolute byte offset: the text, where it starts, the next offset,
        and how many bytes before the buffer's start were dropped. ``offset`` None reads
        the newest ``limit`` bytes (the whole buffer when ``limit`` is None too)."""
        job = self._job(job_id)
        # The state changes only after the reader thread has read everything.
        return job.buffer.read(offset, limit, final=job.state != RUNNING)

    # ----- waiting -------------------------------------------------------------------------
    def join(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Block until the job ends (or ``timeout``); returns its snapshot either way."""
        job = self._job(job_id)
        job.done.wait(timeout)
        return job.info()

    async def wait(self, job_id: str, timeout: float | None = None) -> JobInfo:
        """Await the job's end (or ``timeout``) without blocking the event loop."""
        job = self._job(job_id)
        await job.wait_for(job.done.is_set, timeout)
        return job.info()

    async def wait_output(self, job_id: str, after: int, timeout: float | None = None) -> bool:
        """Await output beyond offset ``after`` or the job's end; False on timeout."""
        job = self._job(job_id)
        return await job.wait_for(lambda: job.buffer.total > after or job.done.is_set(), timeout)

    # ----- stopping -------------------------------------------------------------------------
    def _stop_wait_seconds(self) -> float:
        return self.grace_seconds + 2 * KILL_MARGIN_SECONDS + 1.0

    def stop(self, job_id: str) -> JobInfo:
        """Stop the job's whole process tree: TERM, then KILL after the grace period.
        Blocks until it is gone; stopping a finished job just returns its snapshot."""
        job = self._job(job_id)
        job.request_stop(STOPPED)
        if not job.done.wait(self._stop_wait_seconds()):
            job.force_kill()
            job.done.wait(KILL_MARGIN_SECONDS)
        return job.info()

    async def astop(self, job_id: str) -> JobInfo:
        """:meth:`stop` for code inside an event loop."""
        job = self._job(job_id)
        job.request_stop(STOPPED)
        if not await job.wait_for(job.done.is_set, self._stop_wait_seconds()):
            job.force_kill()
            await job.wait_for(job.done.is_set, KILL_MARGIN_SECONDS)
        return job.info()

    def _begin_close(self) -> list[Job]:
        with self._lock:
            self._closed = True
            jobs = [j for j in self._jobs.values() if not j.done.is_set()]
        for job in jobs:  # TERM every tree at once, then wait once
            job.request_stop(STOPPED)
        return jobs

    def close(self) -> None:
        """Stop every running job and refuse new ones (BG-2). Blocks until they are gone
        (about the grace period at most). Safe to call twice."""
        jobs = self._begin_close()
        deadline = time.monotonic() + self._stop_wait_seconds()
        for job in jobs:
            if not job.done.wait(max(0.0, deadline - time.monotonic())):
                job.force_kill()
        for job in jobs:
            job.done.wait(KILL_MARGIN_SECONDS)
        _MANAGERS.discard(self)

    async def aclose(self) -> None:
        """:meth:`close` for code inside an event loop."""
        jobs = self._begin_close()
        timeout = self._stop_wait_seconds()
        results = await asyncio.gather(*(j.wait_for(j.done.is_set, timeout) for j in jobs))
        late = [j for j, ok in zip(jobs, results) if not ok]
        for job in late:
            job.force_kill()
        await asyncio.gather(*(j.wait_for(j.done.is_set, KILL_MARGIN_SECONDS) for j in late))
        _MANAGERS.discard(self)

    @property
    def closed(self) -> bool:
        return self._closed
