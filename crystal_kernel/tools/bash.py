"""The bash tool: one shell command in the workspace, bounded in time and output.

The command runs as ``bash -c`` with stdin closed, under the same small supervisor
process background jobs use (:mod:`crystal_kernel.jobs.supervisor`, in foreground mode):
it asks Linux for a parent-death signal and adopts every process the command starts,
so nothing outlives the host, however the host dies (SIGKILL included). The supervisor
is a fork of the host's spawn server (jobs/spawner.py: no interpreter start per call);
where that server cannot be used, a supervisor is started by the thread running this
coroutine, which lives until the call is over.

Output (stdout and stderr interleaved) is read incrementally into a bounded buffer. On
timeout or cancellation the whole process tree is stopped (TERM, then KILL) within
about 2 s. Processes a command leaves running in the background after it exits would
hold its output open forever; they are stopped too (bash_start is the tool for those).
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

from pydantic import Field

from crystal_kernel.core.deadline import within
from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs import spawner
from crystal_kernel.jobs.guarded import supervisor_command
from crystal_kernel.jobs.sandbox import Sandbox, refusal_note
from crystal_kernel.tools._changes import note_change
from crystal_kernel.tools._process import BoundedOutput, kill_process_tree
from crystal_kernel.tools._sandbox import tool_sandbox
from crystal_kernel.tools._spawned_shell import SpawnedShell, readable
from crystal_kernel.tools.base import Classification, Risk, Tool, ToolContext, ToolInput, ToolResult

# After the shell exits, how long to wait for the rest of its output.
DRAIN_SECONDS = 0.5
# The supervisor's TERM-to-KILL grace; the host steps in with KILL this much later.
KILL_GRACE_SECONDS = 1.0
HOST_BACKSTOP_SECONDS = 1.0
READ_CHUNK = 65536


class BashInput(ToolInput):
    command: str = Field(description="The shell command.")
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Default: the bashTimeoutSeconds setting (usually 120).",
    )


def _environment(config: object = None) -> dict[str, str]:
    """The child environment (TRUST-4: no model keys, host/secrets.py); nothing can
    answer a pager or an editor: stdin is closed."""
    from crystal_kernel.core.secrets import child_environment

    return child_environment(config, defaults={"PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"},
                             extra={"GIT_PAGER": "cat"}, keep_home=True)


class BashTool(Tool[BashInput]):
    name = "bash"
    Input = BashInput
    risk = Risk.EXECUTE
    sandboxed = True

    def classify(self, args: BashInput, ctx: ToolContext) -> Classification:
        # The command itself is what a person may allow for the session.
        return Classification(self.risk, pattern=args.command)

    async def run(self, args: BashInput, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            raise ToolError("The command is empty.")
        timeout = args.timeout_seconds or ctx.config.bash_timeout_seconds
        sandbox = tool_sandbox(ctx)
        done = await run_supervised(args.command, cwd=ctx.workspace, env=_environment(ctx.config), timeout=timeout,
                                    limit=ctx.config.tool_output_limit, workspace=ctx.workspace, sandbox=sandbox)
        text = done.text
        if done.timed_out:
            note = (
                f"The command timed out after {timeout:g} seconds and was stopped "
                "(its whole process tree was killed). For long-running processes use bash_start."
            )
            return ToolResult(ok=False, text=(text + "\n\n" if text else "") + note, display="terminal")
        footer = f"Exit code: {done.code}"
        if done.leftovers:
            footer += (
                "\nThe command left processes running in the background; they were stopped. "
                "Use bash_start for processes that should keep running."
            )
        refused = refusal_note(sandbox, done.code != 0, text)
        if refused:
            footer += "\n" + refused
        body = (text + "\n\n" if text else "(no output)\n\n") + footer
        return ToolResult(ok=done.code == 0, text=body, display="terminal")


# The shell's supervisor: started by asyncio, or forked by the spawn server.
Shell = asyncio.subprocess.Process | SpawnedShell


@dataclass
class Supervised:
    """A finished supervised command: its bounded output, exit code, whether it timed
    out, and whether it left processes behind (they were stopped)."""

    text: str
    code: int | None
    timed_out: bool = False
    leftovers: bool = False


async def run_supervised(command: str, *, cwd: Path, env: dict[str, str], timeout: float, limit: int,
                         workspace: Path, sandbox: Sandbox | None = None) -> Supervised:
    """Run ``bash -c command`` under the supervisor (no orphans, killed on timeout and on
    cancellation), output bounded to ``limit`` characters, confined by ``sandbox``
    (SANDBOX-1) when given. Used by bash and notebook_run."""
    bash = shutil.which("bash") or "/bin/bash"
    spawned = await _spawn_shell(bash, command, cwd=cwd, env=env, sandbox=sandbox)
    if spawned is not None:
        shell, status = spawned
        try:
            return await _follow(shell, status, workspace, timeout, limit)
        finally:
            status.close()
            shell.stdout.close()
    status_read, status_write = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *supervisor_command(), *(sandbox.launcher_args() if sandbox else ()),
            str(os.getpid()), repr(KILL_GRACE_SECONDS),
            bash, command, str(status_write),
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=(status_write,),
            env=env,
        )
    except OSError as exc:
        os.close(status_read)
        raise ToolError(f"Cannot start bash: {exc.strerror or exc}.") from None
    finally:
        os.close(status_write)  # the supervisor holds its own copy
    status = _StatusPipe(status_read, proc.pid)
    try:
        return await _follow(proc, status, workspace, timeout, limit)
    finally:
        status.close()


async def _spawn_shell(bash: str, command: str, *, cwd: Path, env: dict[str, str],
                       sandbox: Sandbox | None) -> tuple[SpawnedShell, _StatusPipe] | None:
    """``bash -c command`` under a supervisor forked by the spawn server (no interpreter
    start per call); None when the server cannot be used (then one is started as before)."""
    if not spawner.server_ready() and not await asyncio.to_thread(spawner.start_server):
        return None
    try:
        request = spawner.send([bash, "-c", command], cwd=str(cwd), env=env, sandbox=sandbox, grace=KILL_GRACE_SECONDS,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
                               linger=True)
    except OSError as exc:
        raise ToolError(f"Cannot start bash: {exc.strerror or exc}.") from None
    if request is None:
        return None
    stdout_fd = request.ours[1]
    assert stdout_fd is not None
    status = _StatusPipe(request.status_fd, None)
    try:
        line = await status.readline()
    except BaseException:
        # Cancelled while the supervisor starts: its group is stopped once it is known.
        threading.Thread(target=_stop_when_known, args=(status, stdout_fd), name="crystal-stop-child",
                         daemon=True).start()
        raise
    pid = _supervisor_pid(line, status)
    if pid is None:
        status.close()
        os.close(stdout_fd)
        raise ToolError(f"Cannot start bash: {line.decode('utf-8', 'replace').strip() or 'the supervisor did not start'}.")
    status.watch(pid)
    return SpawnedShell(pid, stdout_fd, status), status


def _stop_when_known(status: _StatusPipe, stdout_fd: int) -> None:
    """In a thread: wait for the supervisor's ``pid`` line, stop its tree, release the pipes."""
    try:
        os.set_blocking(status.fd, True)
        pid = _supervisor_pid(status.blocking_line(), status)
        if pid is not None:
            kill_process_tree(pid, grace=0.2)
    finally:
        status.close()
        os.close(stdout_fd)


async def _follow(proc: Shell, status: _StatusPipe, workspace: Path, timeout: float,
                  limit: int) -> Supervised:
    output = BoundedOutput(limit)
    assert proc.stdout is not None
    stdout = proc.stdout

    async def pump() -> None:
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                return
            output.feed(chunk)

    reader = asyncio.ensure_future(pump())
    timed_out = leftovers = False
    wait_status: int | None = None
    try:
        # The supervisor reports the shell's exit on the status pipe; the output pipe
        # may stay open longer (a background process holding it).
        try:
            # within, not asyncio.wait_for: before Python 3.12 wait_for drops a cancel
            # (a person's Stop) that lands as the exit line arrives, and the turn runs on.
            line = await within(status.readline(), timeout)
        except TimeoutError:
            timed_out = True
        else:
            wait_status = _parse(line, "exit")
            done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
            leftovers = not done
    except asyncio.CancelledError:
        note_change(workspace)
        await _stop(proc, status, reader)
        raise
    if timed_out:
        await _stop(proc, status, reader)
    else:
        # Whatever the command left running is stopped now (and counted).
        left = await _finish(proc, status, reader)
        leftovers = leftovers or bool(left)

    # Anything may have changed: the next search refreshes its index.
    note_change(workspace)
    text = output.text().rstrip("\n")
    if timed_out:
        return Supervised(text, None, timed_out=True)
    # The shell's own status; without one (bash could not start) the supervisor's.
    code = os.waitstatus_to_exitcode(wait_status) if wait_status is not None else proc.returncode
    return Supervised(text, code, leftovers=leftovers)


class _StatusPipe:
    """The supervisor's side of the conversation: its status pipe (read without blocking
    the loop) and a pidfd to signal it by."""

    def __init__(self, fd: int, pid: int | None) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._buffer = b""
        self._eof = False
        self._closed = False
        self.pidfd: int | None = None
        self.pid = 0
        # Who wrote the first line, as the host sees it (spawner.read_status): the
        # supervisor's id even from inside bubblewrap's PID namespace (SANDBOX-2).
        self.sender: int | None = None
        if pid is not None:
            self.watch(pid)

    def watch(self, pid: int) -> None:
        """Signal the supervisor ``pid`` from now on."""
        # Signalled through a pidfd, not Popen.send_signal: that one polls first and so
        # may reap the supervisor behind asyncio's child watcher (which then warns).
        self.pid = pid
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pass  # gone already, or not Linux

    def terminate(self) -> None:
        """Ask the supervisor to stop the tree; nothing happens once it has exited."""
        if self._eof or not self.pid:
            return  # the pipe closed: the supervisor has exited (or is not known yet)
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGTERM)
            else:
                os.kill(self.pid, signal.SIGTERM)
        except (ProcessLookupError, AttributeError, OSError):
            pass

    def blocking_line(self) -> bytes:
        """The next line, read blocking (the fd must be blocking): from a thread only."""
        while b"\n" not in self._buffer:
            data = self._take()
            if not data:
                break
            self._buffer += data
        line, sep, self._buffer = self._buffer.partition(b"\n")
        return line + sep

    def pending_line(self) -> bool:
        """Whether a whole line is waiting (read without blocking)."""
        while b"\n" not in self._buffer and not self._eof:
            try:
                data = self._take()
            except BlockingIOError:
                return False
            if data:
                self._buffer += data
            else:
                self._eof = True
        return True

    async def readline(self) -> bytes:
        """The next line, or b"" once the supervisor has exited (the pipe closed)."""
        while b"\n" not in self._buffer and not self._eof:
            await readable(self.fd)
            try:
                data = self._take()
            except BlockingIOError:
                continue
            if data:
                self._buffer += data
            else:
                self._eof = True
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return line + sep

    def _take(self) -> bytes:
        data, sender = spawner.read_status(self.fd)
        self.sender = self.sender or sender
        return data

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)
            if self.pidfd is not None:
                os.close(self.pidfd)


def _supervisor_pid(line: bytes, status: _StatusPipe) -> int | None:
    """The supervisor's id from its ``pid`` line, as the host sees it (the sender of the
    line where the channel tells it: SANDBOX-2's PID namespace); None: not a pid line."""
    said = _parse(line, "pid")
    return None if said is None else status.sender or said


def _parse(line: bytes, key: str) -> int | None:
    parts = line.split()
    if len(parts) == 2 and parts[0] == key.encode() and parts[1].lstrip(b"-").isdigit():
        return int(parts[1])
    return None


async def _finish(proc: Shell, status: _StatusPipe, reader: asyncio.Future[None]) -> int:
    """The shell has exited: tell the supervisor to stop what is left, wait for it, and
    return how many processes it had to stop."""
    if not status.pending_line():  # usually "left 0" came with the exit: nothing to stop
        status.terminate()
    try:
        line = await asyncio.wait_for(status.readline(), KILL_GRACE_SECONDS + HOST_BACKSTOP_SECONDS)
    except asyncio.TimeoutError:
        line = b""
    left = _parse(line, "left")
    if left is None:
        # The supervisor hung or was killed from outside: stop what is left ourselves
        # (its process group still holds the shell's processes).
        await asyncio.to_thread(kill_process_tree, proc.pid, grace=0.2)
        left = 0
        await _reap(proc, reader)
    elif isinstance(proc, SpawnedShell):
        # "left N" is a forked supervisor's last word: its tree is stopped and it exits
        # on its own (the spawn server's child, reaped by the kernel; ROBUST-3 holds).
        # Waiting for its exit put the teardown of its process and namespaces (0.2 to
        # 14 ms under load) into every call (docs/benchmarks.md).
        await _drain(reader)
    else:
        await _reap(proc, reader)
    return left


async def _reap(proc: Shell, reader: asyncio.Future[None]) -> None:
    try:
        await asyncio.wait_for(proc.wait(), 0.5)
    except asyncio.TimeoutError:
        pass
    await _drain(reader)


async def _drain(reader: asyncio.Future[None]) -> None:
    """Let the output reader finish (the output pipe closes with the command's last
    process), at most 0.2 s; then stop it."""
    if not reader.done():
        await asyncio.wait({reader}, timeout=0.2)
        reader.cancel()


async def _stop(proc: Shell, status: _StatusPipe, reader: asyncio.Future[None]) -> None:
    """Stop the tree through the supervisor (KILL it ourselves if it does not finish),
    reap it and finish reading; safe to await while cancelled."""

    async def stop() -> None:
        status.terminate()
        try:
            # The status pipe closes when the supervisor exits, after the tree is gone.
            while await asyncio.wait_for(status.readline(), KILL_GRACE_SECONDS + HOST_BACKSTOP_SECONDS):
                pass
        except asyncio.TimeoutError:
            await asyncio.to_thread(kill_process_tree, proc.pid, grace=0.2)
        await _reap(proc, reader)

    task = asyncio.ensure_future(stop())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # Cancelled again while stopping: the stop task still runs to the end.
        pass

