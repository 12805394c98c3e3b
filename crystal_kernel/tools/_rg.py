"""Running ripgrep for a tool: under the job supervisor, in a read-only sandbox (no
writes but temp folders, no TCP: SANDBOX-1), with a time limit, cancellable.

Every regular expression the model chooses is matched by ripgrep, whose engine is
linear in the input (no backtracking), never by Python's ``re``: a pattern such as
``(a+)+$`` could hold the interpreter for minutes there, ignoring cancellation
(ROBUST-3). ripgrep is a declared dependency (the ``ripgrep`` package ships the binary
next to the interpreter); without it, :func:`require_rg` fails with one line.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.guarded import GRACE_SECONDS, guarded_argv
from crystal_kernel.jobs.sandbox import read_only_sandbox
from crystal_kernel.jobs.spawner import SupervisedProcess, ToolProcess, spawn
from crystal_kernel.tools._process import kill_process_tree
from crystal_kernel.tools._walk import rg_binary

T = TypeVar("T")


def require_rg() -> str:
    """The ``rg`` binary, or a ToolError saying it is missing."""
    rg = rg_binary()
    if not rg:
        raise ToolError("grep needs ripgrep (the rg program that Crystal's 'ripgrep' package installs) and "
                        "it was not found; reinstall Crystal or put rg on PATH.")
    return rg


class SearchTimedOut(ToolError):
    """ripgrep was stopped by its time limit: whatever it found is incomplete."""


def _feed(proc: ToolProcess, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, ValueError, OSError):
        pass  # rg stopped reading (killed, or an invalid pattern)
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _collect_and_release(collect: Callable[[ToolProcess], T], proc: ToolProcess) -> T:
    try:
        return collect(proc)
    finally:
        if isinstance(proc, SupervisedProcess):
            proc.close()  # its status pipe; the supervisor stops what rg left on its own


async def run_rg(argv: list[str], collect: Callable[[ToolProcess], T], *, timeout: float,
                 data: bytes | None = None) -> T:
    """Start ``argv`` (rg and its arguments) under the job supervisor, so it dies with
    the host however the host dies; ``collect(proc)`` reads its output in a worker thread
    to the end. ``data`` is written to its stdin. After ``timeout`` seconds the process
    tree is killed and :class:`SearchTimedOut` raised; a cancelled caller kills it too
    (the reader thread then ends with the closed output)."""
    sandbox = read_only_sandbox()
    stdin = subprocess.DEVNULL if data is None else subprocess.PIPE
    proc: ToolProcess | None = None
    try:
        if os.path.isabs(argv[0]):
            # Under a supervisor forked by the spawn server: no interpreter start per search.
            # In the host's session: scheduled with it, not as a session of its own
            # (jobs/spawn_server.py, "Scheduling"); rg never uses a terminal.
            proc = spawn(argv, cwd=os.getcwd(), env=None, sandbox=sandbox, grace=GRACE_SECONDS,
                         stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, session=False)
        if proc is None:
            # Popen only forks and execs (no wait); asyncio's subprocess API would tie rg to
            # the loop's child watcher, and the reads happen in a worker thread anyway.
            proc = subprocess.Popen(  # noqa: ASYNC220
                guarded_argv(argv, sandbox), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True)
    except OSError as exc:
        raise ToolError(f"Cannot run ripgrep: {exc.strerror or exc}.") from None
    if data is not None:
        threading.Thread(target=_feed, args=(proc, data), name="rg-stdin", daemon=True).start()
    timed_out = threading.Event()

    def time_up() -> None:
        timed_out.set()
        kill_process_tree(proc.pid)

    timer = threading.Timer(timeout, time_up)
    timer.daemon = True
    timer.start()
    try:
        result = await asyncio.to_thread(_collect_and_release, collect, proc)
    except asyncio.CancelledError:
        # At once: SIGKILL to rg's process group (the supervisor and rg); the reader thread
        # then sees the end of the output. The thorough tree scan follows in the background.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        threading.Thread(target=kill_process_tree, args=(proc.pid,), kwargs={"grace": 0.2},
                         name="rg-stop", daemon=True).start()
        raise
    finally:
        timer.cancel()
    if timed_out.is_set():
        # Killed by the time limit: nothing found does not mean "no matches" (ROBUST-3).
        raise SearchTimedOut(f"The search took longer than {timeout:g} s and was stopped before it finished; no "
                             "result is shown because it would be incomplete. Narrow the path, the glob or the "
                             "pattern.")
    return result
