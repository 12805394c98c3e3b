"""One background job: its supervisor process, the thread that captures its output,
and a snapshot type the tools and fronts read.

Capture design (measured in bench/bench_jobs.py): the job writes into a pipe whose
kernel buffer is raised to 1 MiB or more; one thread per job reads it straight into
the ring buffer's free space (up to 256 KiB a read, no intermediate copy) and writes
the same bytes to the log file. After
a read that did not fill its 256 KiB buffer, the thread naps for a millisecond so that a
chatty writer fills the pipe instead of waking the reader for every line; output therefore reaches readers
at most about a millisecond late, and capturing costs the job little more than
writing to /dev/null. A thread works the same whether or not the caller runs an
asyncio loop; async waiters are woken with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.deadline import within
from crystal_kernel.jobs.buffer import RingBuffer
from crystal_kernel.jobs.logfile import RotatingLog
from crystal_kernel.jobs.sandbox import Sandbox
from crystal_kernel.jobs.status import STATUS_VERSION, iso, write_status

if TYPE_CHECKING:
    import psutil

READ_CHUNK = 256 * 1024
PIPE_SIZES = (4 * 1024 * 1024, 1024 * 1024)
NAP_SECONDS = 0.001
# Nap unless a read filled the whole chunk (then more is waiting: read on at once).
NAP_BELOW = READ_CHUNK
POLL_SECONDS = 0.5
STATUS_EVERY_SECONDS = 2.0
# After TERM, the supervisor itself sends KILL at the grace period; the host steps in
# with KILL only if the supervisor has not finished this much later.
KILL_MARGIN_SECONDS = 2.0
F_SETPIPE_SZ = 1031

RUNNING = "running"
EXITED = "exited"
STOPPED = "stopped"
TIMED_OUT = "timed out"
KILLED = "killed"


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one job, safe to hand to any thread."""

    id: str
    command: str
    state: str
    exit_code: int | None
    signal: str | None
    pid: int | None
    started_at: float
    ended_at: float | None
    runtime_seconds: float
    bytes: int
    buffer_start: int
    log_file: str | None
    timeout_seconds: float | None

    @property
    def active(self) -> bool:
        return self.state == RUNNING

    def as_dict(self) -> dict[str, Any]:
        """camelCase keys, ISO times: the shape of status files and command rows."""
        return {
            "id": self.id, "command": self.command, "state": self.state, "exitCode": self.exit_code,
            "signal": self.signal, "pid": self.pid, "startedAt": iso(self.started_at),
            "endedAt": iso(self.ended_at), "runtimeSeconds": round(self.runtime_seconds, 3),
            "bytes": self.bytes, "bufferStart": self.buffer_start, "logFile": self.log_file,
            "timeoutSeconds": self.timeout_seconds,
        }


def _enlarge_pipe(fd: int) -> None:
    """A big pipe lets the job run ahead while the reader is not scheduled (a busy
    machine). Linux caps unprivileged pipes at /proc/sys/fs/pipe-max-size (1 MiB by
    default); a smaller pipe only costs throughput."""
    import fcntl

    for size in PIPE_SIZES:
        try:
            fcntl.fcntl(fd, F_SETPIPE_SZ, size)
            return
        except OSError:
            continue


class Job:
    """A running or finished job. Created by :class:`JobManager`; not public API."""

    def __init__(self, *, job_id: str, command: str, session_id: str, buffer_bytes: int,
                 log_path: Path | None, log_bytes: int, status_path: Path | None,
                 timeout_seconds: float | None, grace_seconds: float,
                 on_finished: Callable[[Job], None], inside: Path | None = None) -> None:
        self.id = job_id
        self.command = command
        self.session_id = session_id
        self.buffer = RingBuffer(buffer_bytes, slack=READ_CHUNK)
        self.timeout_seconds = timeout_seconds
        self.grace_seconds = grace_seconds
        self.status_path = status_path
        self.inside = inside  # the workspace: log and status files are written race-free in it
        self.log: RotatingLog | None = None
        if log_path is not None:
            self.log = RotatingLog(log_path, log_bytes, on_rotate=lambda: self.write_status(durable=False),
                                   inside=inside)
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        self.deadline = self._started_mono + timeout_seconds if timeout_seconds else None
        self.ended_at: float | None = None
        self._ended_mono: float | None = None
        self.state = RUNNING
        self.exit_code: int | None = None
        self.signal_name: str | None = None
        self.stop_reason: str | None = None
        self._kill_at: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._status_lock = threading.Lock()
        self._subscribers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._on_finished = on_finished
        self._read_fd = -1
        self.status_error: str | None = None
        self.sandbox: Sandbox | None = None  # SANDBOX-1: set by the manager when confined

    # ----- starting ---------------------------------------------------------------------
    def spawn(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        """Start the supervisor (call from the manager's spawner thread) and the reader."""
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            _enlarge_pipe(write_fd)
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd, cwd=str(cwd),
                env=env, start_new_session=True, close_fds=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._read_fd = read_fd
        if self.stop_reason is not None:  # closed while starting
            self.proc.send_signal(signal.SIGTERM)
        self.write_status(durable=False)  # start() waits for this: no fsync
        threading.Thread(target=self._pump, name=f"crystal-job-{self.id}", daemon=True).start()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # ----- snapshots and status file -----------------------------------------------------
    def info(self) -> JobInfo:
        end = self._ended_mono if self._ended_mono is not None else time.monotonic()
        return JobInfo(
            id=self.id, command=self.command, state=self.state, exit_code=self.exit_code,
            signal=self.signal_name, pid=self.pid, started_at=self.started_at, ended_at=self.ended_at,
            runtime_seconds=end - self._started_mono, bytes=self.buffer.total,
            buffer_start=self.buffer.start, log_file=str(self.log.path) if self.log else None,
            timeout_seconds=self.timeout_seconds,
        )

    def write_status(self, durable: bool = True) -> None:
        """Mirror the snapshot to ``<job>.json`` (format: docs/jobs.md)."""
        if self.status_path is None:
            return
        data: dict[str, Any] = {"version": STATUS_VERSION, "sessionId": self.session_id}
        data.update(self.info().as_dict())
        log = self.log
        data.update({
            "hostPid": os.getpid(),
            "updatedAt": iso(time.time()),
            "logFile": log.path.name if log else None,
            "logStart": log.start_offset if log else None,
            "logPrevious": log.previous.name if log and log.start_offset > 0 else None,
            "logError": log.error if log else None,
        })
        with self._status_lock:
            self.status_error = write_status(self.status_path, data, durable=durable, inside=self.inside)

    # ----- stopping -------------------------------------------------------------------------
    def request_stop(self, reason: str) -> bool:
        """Ask the supervisor to stop the tree (TERM, KILL after the grace period).
        Returns False when the job had already finished or was already stopping."""
        with self._lock:
            if self.done.is_set() or self.stop_reason is not None:
                return False
            self.stop_reason = reason
            self._kill_at = time.monotonic() + self.grace_seconds + KILL_MARGIN_SECONDS
        if self.proc is not None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        return True

    def force_kill(self) -> None:
        """Last resort when the supervisor does not finish: KILL it, its tree and group."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        import psutil  # here: its import reads /proc, ~20 ms of every `crystal run` start

        victims: list[psutil.Process] = []
        try:
            victims = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        for victim in victims:
            try:
                victim.kill()
            except psutil.Error:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def kill_by_environment(self) -> int:
        """KILL every process whose environment names this job (CRYSTAL_SESSION and
        CRYSTAL_JOB): the way to find what escaped the tree once the supervisor is gone.
        Slow (reads every process's environment), so only for that rare case."""
        import psutil

        killed = 0
        own = os.getpid()
        for proc in psutil.process_iter():
            if proc.pid == own:
                continue
            try:
                env = proc.environ()
                if env.get("CRYSTAL_JOB") == self.id and env.get("CRYSTAL_SESSION") == self.session_id:
                    proc.kill()
                    killed += 1
            except (psutil.Error, OSError):
                continue
        return killed

    def _check_time(self) -> None:
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline and self.stop_reason is None:
            self.request_stop(TIMED_OUT)
        if self._kill_at is not None and now >= self._kill_at:
            self._kill_at = now + KILL_MARGIN_SECONDS
            self.force_kill()

    # ----- capture ----------------------------------------------------------------------------
    def _pump(self) -> None:
        """The reader thread: capture until the pipe closes, then record the end."""
        fd = self._read_fd
        try:
            self._capture(fd)
        except Exception as exc:  # a bug or an OS failure must not leave "running" forever
            self.buffer.append(f"\n[crystal: capturing this job's output failed ({exc}); "
                               "the job was stopped]\n".encode())
            self.request_stop(STOPPED)
        finally:
            os.close(fd)
            self._finish()

    def _capture(self, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        last_status = time.monotonic()
        status_bytes = 0
        orphaned_since: float | None = None
        buffer = self.buffer
        while True:
            timeout = POLL_SECONDS
            if self.deadline is not None and self.stop_reason is None:
                timeout = max(0.0, min(timeout, self.deadline - time.monotonic()))
            if not poller.poll(timeout * 1000):
                self._check_time()
                if buffer.total != status_bytes:  # quiet now: bring the status file up to date
                    status_bytes = buffer.total
                    last_status = time.monotonic()
                    self.write_status(durable=False)
                if self.proc is not None and self.proc.poll() is not None:
                    # The supervisor is gone yet the pipe stays open: something it
                    # started escaped (the supervisor itself was killed).
                    orphaned_since = orphaned_since or time.monotonic()
                    if time.monotonic() - orphaned_since >= POLL_SECONDS:
                        self._drain_escaped(fd)
                        return
                continue
            count = self._read_once(fd)
            if count == 0:
                return
            if self._subscribers:
                self._notify()
            now = time.monotonic()
            if now - last_status >= STATUS_EVERY_SECONDS:
                last_status = now
                status_bytes = buffer.total
                self.write_status(durable=False)
                self._check_time()
            elif self.deadline is not None and now >= self.deadline:
                self._check_time()
            if count < NAP_BELOW:
                # Let output collect in the pipe rather than wake per line.
                time.sleep(NAP_SECONDS)

    def _read_once(self, fd: int) -> int:
        """One read from the pipe straight into the ring buffer's free space (no
        intermediate copy), then the same bytes to the log file. Returns the count."""
        buffer, log = self.buffer, self.log
        views = buffer.writable(READ_CHUNK)
        try:
            count = os.readv(fd, views)
            if count:
                buffer.commit(count)
                if log is not None:
                    end = buffer.total - count
                    for view in views:
                        if end >= buffer.total:
                            break
                        piece = view[:buffer.total - end]
                        end += len(piece)
                        log.write(piece, end)
                        piece.release()
        finally:
            for view in views:
                view.release()
        return count

    def _drain_escaped(self, fd: int) -> None:
        """KILL the supervisor's process group (what escaped is still in it) and keep
        what is already in the pipe."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.kill_by_environment()
        os.set_blocking(fd, False)
        while True:
            try:
                if not self._read_once(fd):
                    return
            except BlockingIOError:
                return

    def _finish(self) -> None:
        assert self.proc is not None
        while True:
            try:
                code = self.proc.wait(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                self._check_time()
        if self.log is not None:
            self.log.close()
        with self._lock:
            if code < 0:
                try:
                    self.signal_name = signal.Signals(-code).name
                except ValueError:
                    self.signal_name = f"signal {-code}"
            else:
                self.exit_code = code
            self.ended_at = time.time()
            self._ended_mono = time.monotonic()
            # Ended by a signal nobody here asked for (an outside kill, the OOM killer).
            self.state = self.stop_reason or (EXITED if code >= 0 else KILLED)
        self.write_status()
        self.done.set()
        self._notify()
        self._on_finished(self)

    # ----- waiting ---------------------------------------------------------------------------
    def _notify(self) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for loop, event in subscribers:
            if event.is_set():
                continue
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                pass  # that loop is closed

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait in the running asyncio loop until ``predicate()`` holds (checked after
        every new chunk and at the end). False on timeout."""
        if predicate():
            return True
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        entry = (loop, event)
        with self._lock:
            self._subscribers.append(entry)
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                event.clear()
                if predicate():
                    return True
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return False
                try:
                    await within(event.wait(), remaining)
                except TimeoutError:
                    return predicate()
        finally:
            with self._lock:
                self._subscribers.remove(entry)
