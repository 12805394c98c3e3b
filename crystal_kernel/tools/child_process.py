"""Run one child process for a tool call: stdin fed, both streams read into bounded
buffers, all under a timeout, and the whole process tree killed on timeout,
cancellation or a failed stdin write (EX-1, EX-6, EX-9, EX-15).

Why not ``asyncio.create_subprocess_exec``: on Python 3.11 its child watcher starts a
thread per child and its stream machinery adds several tasks; for a tool that exits at
once that costs ~70% over ``subprocess.run``. Here the child is started with
``subprocess.Popen`` (vfork, the same as ``subprocess.run``) in a worker thread (so the
fork/exec never stalls the loop), its pipes are watched with
``loop.add_reader``/``add_writer``, and its exit with a pidfd (Linux), falling back to a
waiting thread elsewhere. POSIX only, like the process-group kill.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs import spawner
from crystal_kernel.jobs.guarded import GRACE_SECONDS, guarded_argv
from crystal_kernel.jobs.sandbox import Sandbox
from crystal_kernel.jobs.spawner import SupervisedProcess
from crystal_kernel.tools._process import start_off_loop

_CHUNK = 65536
_STDIN_GRACE_SECONDS = 0.3


@dataclass
class ProcessOutcome:
    """What a finished (or stopped) child left behind. Buffers are bounded."""

    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_total: int = 0
    stderr_total: int = 0
    timed_out: bool = False
    stdin_failed: str | None = None


class _Child:
    """Event-loop callbacks around one Popen; ``done`` resolves when stdin is finished,
    both streams reached end of file and the child exited."""

    def __init__(self, loop: asyncio.AbstractEventLoop, popen: Started, payload: bytes | None,
                 max_bytes: int, outcome: ProcessOutcome):
        self.loop = loop
        self.popen = popen
        self.outcome = outcome
        self.max_bytes = max_bytes
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}
        self.pending = 0
        self.done: asyncio.Future[None] = loop.create_future()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.fds: dict[int, str] = {}
        self.pidfd: int | None = None
        self.payload = memoryview(payload or b"")
        self.stdin_fd: int | None = None
        self.watching = False

    def start(self) -> None:
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        for stream, which in ((self.popen.stdout, "stdout"), (self.popen.stderr, "stderr")):
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self.fds[fd] = which
            self.pending += 1
            self.loop.add_reader(fd, self._readable, fd)
        self.pending += 1  # the exit: looked for once both streams are closed
        self.pending += 1  # stdin
        self.stdin_fd = self.popen.stdin.fileno()
        os.set_blocking(self.stdin_fd, False)
        self._writable()
        if self.stdin_fd is not None:
            self.loop.add_writer(self.stdin_fd, self._writable)

    # -- stdin ---------------------------------------------------------------
    def _writable(self) -> None:
        try:
            while self.payload:
                assert self.stdin_fd is not None  # start() opened the pipe; closing it ends the writes
                written = os.write(self.stdin_fd, self.payload)
                self.payload = self.payload[written:]
        except BlockingIOError:
            return  # the pipe is full; the writer callback resumes
        except OSError as exc:  # EPIPE: the child closed its input
            self.outcome.stdin_failed = exc.strerror or "broken pipe"
        self._close_stdin()
        if self.outcome.stdin_failed:
            # EX-15: a stdin failure stops the tree. The pipe also breaks when the program
            # simply ended without reading; the supervisor may still be reaping it, so
            # it gets a moment to exit on its own first.
            self.loop.call_later(_STDIN_GRACE_SECONDS, self._stop_if_running)
        self._one_done()

    def _stop_if_running(self) -> None:
        if not self.exited.done() and not _has_exited(self.popen):
            kill_process_tree(self.popen.pid)

    def _close_stdin(self) -> None:
        if self.stdin_fd is not None:
            self.loop.remove_writer(self.stdin_fd)
            self.stdin_fd = None
            try:
                if self.popen.stdin is not None:  # always a pipe (start)
                    self.popen.stdin.close()
            except OSError:
                pass

    # -- stdout / stderr -------------------------------------------------------
    def _readable(self, fd: int) -> None:
        which = self.fds[fd]
        buf = self.buffers[which]
        try:
            while True:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                total = getattr(self.outcome, f"{which}_total") + len(chunk)
                setattr(self.outcome, f"{which}_total", total)
                if len(buf) < self.max_bytes:
                    buf += chunk[: self.max_bytes - len(buf)]
        except BlockingIOError:
            return
        except OSError:
            pass
        self.loop.remove_reader(fd)
        del self.fds[fd]
        setattr(self.outcome, which, bytes(buf))
        self._one_done()
        if not self.fds:
            self.watch_exit()

    # -- exit ------------------------------------------------------------------
    def watch_exit(self) -> None:
        """Resolve ``exited`` when the child ends. Usually it already has when its
        streams close, and one non-blocking wait settles it without a watcher."""
        if self.exited.done() or self.watching:
            return
        self.watching = True
        if self.popen.poll() is not None:
            self._exit_seen()
            return
        if isinstance(self.popen, SupervisedProcess):
            # Its supervisor says when the program exits, on the status pipe.
            self.loop.add_reader(self.popen.sentinel, self._status_ready)
            return
        try:
            self.pidfd = os.pidfd_open(self.popen.pid)
            self.loop.add_reader(self.pidfd, self._pidfd_ready)
        except (AttributeError, OSError):  # no pidfd (not Linux): a thread waits
            waiter = self.loop.run_in_executor(None, self.popen.wait)
            waiter.add_done_callback(lambda _: self._exit_seen())

    def _status_ready(self) -> None:
        assert isinstance(self.popen, SupervisedProcess)
        if self.popen.poll() is not None:
            self.loop.remove_reader(self.popen.sentinel)
            self._exit_seen()

    def _pidfd_ready(self) -> None:
        if self.pidfd is not None:  # set before this reader was added
            self.loop.remove_reader(self.pidfd)
        self.popen.wait()  # it exited: this only reaps it
        self._exit_seen()

    def _exit_seen(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
            self._one_done()

    def time_up(self) -> None:
        """The timeout fired before the child finished (EX-15)."""
        if not self.done.done():
            self.outcome.timed_out = True
            self.done.set_result(None)

    def _one_done(self) -> None:
        self.pending -= 1
        if self.pending == 0 and not self.done.done():
            self.done.set_result(None)

    async def stop(self) -> None:
        """Kill the tree (unless it already ended), reap it, release every fd."""
        if not self.exited.done():
            kill_process_tree(self.popen.pid)
            self.watch_exit()
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), 5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        self.release()

    def release(self) -> None:
        self._close_stdin()
        for fd, which in list(self.fds.items()):
            self.loop.remove_reader(fd)
            setattr(self.outcome, which, bytes(self.buffers[which]))
        self.fds.clear()
        if self.pidfd is not None:
            self.loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        if isinstance(self.popen, SupervisedProcess):
            if self.watching and self.popen.sentinel >= 0:
                self.loop.remove_reader(self.popen.sentinel)
            self.popen.close()
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()


# What a tool process is started as: a Popen, or a forked supervisor's handle (which
# offers the same pid, streams, poll, wait and returncode).
Started = subprocess.Popen[bytes] | SupervisedProcess


def _executable(argv: list[str], env: dict[str, str]) -> str:
    """The program's path, found on the child's PATH; ToolError when it cannot run."""
    executable = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if executable is None or not os.access(executable, os.X_OK) or os.path.isdir(executable):
        reason = "No such file or directory" if executable is None or not os.path.exists(executable) else "Permission denied"
        raise ToolError(f"Could not start {argv[0]}: {reason}.")
    return executable


def _spawn(argv: list[str], *, cwd: Path, env: dict[str, str], guarded: bool,
           sandbox: Sandbox | None) -> subprocess.Popen[bytes]:
    """Start the program with three pipes, in a new session (under a supervisor of its
    own when ``guarded`` or ``sandbox``). Blocking (path checks, fork/exec): called in a
    worker thread."""
    executable = _executable(argv, env)
    started = guarded_argv([executable, *argv[1:]], sandbox) if guarded or sandbox else argv
    try:
        return subprocess.Popen(started, cwd=str(cwd), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, bufsize=0)
    except OSError as exc:
        raise ToolError(f"Could not start {argv[0]}: {exc.strerror or exc}.") from None


async def _start_supervised(argv: list[str], *, cwd: Path, env: dict[str, str],
                            sandbox: Sandbox | None) -> SupervisedProcess | None:
    """ROBUST-3: start the program under a supervisor forked by the long-lived spawn
    server (jobs/spawner.py), from the loop itself: the request is one message and the
    supervisor's ``pid`` line is awaited like any pipe, so no worker thread wakes up
    (handing a start to a thread cost up to the interpreter's 5 ms switch interval
    under load, docs/benchmarks.md). None: the server cannot be used here."""
    if not spawner.server_ready() and not await asyncio.to_thread(spawner.start_server):
        return None
    executable = _executable(argv, env)  # a few stat calls: the path was resolved when the catalog was built
    try:
        request = spawner.send([executable, *argv[1:]], cwd=str(cwd), env=env, sandbox=sandbox, grace=GRACE_SECONDS,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    except OSError as exc:
        raise ToolError(f"Could not start {argv[0]}: {exc.strerror or exc}.") from None
    if request is None:
        return None
    loop = asyncio.get_running_loop()
    os.set_blocking(request.status_fd, False)
    try:
        while not request.read():
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(request.status_fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(request.status_fd)
    except asyncio.CancelledError:
        # Cancelled while its supervisor starts: stop it as soon as it exists.
        threading.Thread(target=_stop_request, args=(request,), name="crystal-stop-child", daemon=True).start()
        raise
    try:
        return request.started()
    except OSError as exc:
        raise ToolError(f"Could not start {argv[0]}: {exc}.") from None


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _stop_request(request: spawner.Request) -> None:
    os.set_blocking(request.status_fd, True)
    request.read()
    try:
        proc = request.started()
    except OSError:
        return
    kill_process_tree(proc.pid)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    proc.close()


async def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], payload: bytes | None,
                      timeout: float | None, max_bytes: int, guarded: bool = True,
                      sandbox: Sandbox | None = None) -> ProcessOutcome:
    """Start ``argv`` (no shell) in its own process group, feed stdin (or close it at
    once when ``payload`` is None), read both streams into buffers of ``max_bytes``
    each, all under ``timeout`` seconds (None: no limit).

    ``guarded``: the program runs under the job supervisor, so its whole tree dies with
    the host however the host dies (ROBUST-3). ``sandbox``: it runs confined (SANDBOX-1),
    always under the supervisor."""
    loop = asyncio.get_running_loop()
    popen: Started | None = None
    if guarded or sandbox:
        popen = await _start_supervised(argv, cwd=cwd, env=env, sandbox=sandbox)
    if popen is None:
        popen = await start_off_loop(lambda: _spawn(argv, cwd=cwd, env=env, guarded=guarded, sandbox=sandbox))
    outcome = ProcessOutcome(returncode=None)
    child = _Child(loop, popen, payload, max_bytes, outcome)
    # A plain timer rather than asyncio.wait_for: fewer tasks and loop turns per call.
    timer = loop.call_later(timeout, child.time_up) if timeout is not None else None
    try:
        child.start()
        await child.done
    except BaseException:
        # Cancellation (or a bug): never leave the tree running.
        try:
            await child.stop()
        finally:
            raise
    finally:
        if timer is not None:
            timer.cancel()
    if outcome.timed_out:
        await child.stop()
    else:
        child.release()
    outcome.returncode = popen.returncode
    if outcome.stdin_failed and outcome.returncode is not None and outcome.returncode >= 0:
        # The child ended by itself without reading all of its input: its choice, and
        # its exit status speaks for the call.
        outcome.stdin_failed = None
    return outcome


def _has_exited(popen: Started) -> bool:
    """True when the child already ended (peeked without reaping it)."""
    if isinstance(popen, SupervisedProcess):
        return popen.poll() is not None
    pid = popen.pid
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    except (AttributeError, OSError):  # pragma: no cover - no waitid on this platform
        return False
    return info is not None


def kill_process_tree(pid: int) -> None:
    """SIGKILL the child's process group and every descendant psutil can still see
    (a grandchild that left the group or ignores SIGTERM included)."""
    import psutil  # here, not at the top: its import is ~20 ms of every `crystal run` start

    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    for child in descendants:
        try:
            child.kill()
        except psutil.Error:
            pass
