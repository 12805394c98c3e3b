"""Stopping a whole process tree, and keeping a child's output bounded in memory.

Children are started in a new session (``start_new_session=True``), so their process
group id equals their pid. A tree is stopped by signalling both the group (which reaches
orphans whose parent already exited) and every descendant psutil can see (which reaches
those that moved to a group of their own): TERM first, KILL for whatever is left after a
grace period.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from crystal_kernel.jobs.spawner import SupervisedProcess

# psutil is imported where a tree is stopped: its import reads /proc and was ~20 ms of
# every `crystal run` start, which loads this module with the tools.
if TYPE_CHECKING:
    import psutil


def _group_members(pgid: int) -> list[psutil.Process]:
    import psutil

    out = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _alive(proc: psutil.Process) -> bool:
    import psutil

    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)  # psutil is untyped
    except psutil.Error:
        return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_process_tree(pid: int, *, grace: float = 1.0) -> None:
    """Stop ``pid``, its descendants and its process group; returns within about
    ``grace`` + 0.5 seconds. Never waits on (reaps) ``pid`` itself, so the asyncio child
    watcher that owns it still sees its exit."""
    import psutil

    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        procs[pid] = root
        for child in root.children(recursive=True):
            procs[child.pid] = child
    except psutil.Error:
        pass
    for member in _group_members(pid):
        procs.setdefault(member.pid, member)
    own = os.getpid()
    procs.pop(own, None)

    _signal_group(pid, signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in procs.values()):
            return
        time.sleep(0.02)
    _signal_group(pid, signal.SIGKILL)
    for proc in procs.values():
        if _alive(proc):
            try:
                proc.kill()
            except psutil.Error:
                pass
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline and any(_alive(p) for p in procs.values()):
        time.sleep(0.02)


Child = TypeVar("Child", subprocess.Popen[bytes], SupervisedProcess, subprocess.Popen[bytes] | SupervisedProcess)


async def start_off_loop(start: Callable[[], Child]) -> Child:
    """Run ``start`` (which creates a ``Popen``) in a worker thread: the fork, the exec and
    the wait for exec's verdict, and any path checks before them, do not stall the event
    loop. A cancel while the child starts does not leave it behind: its tree is stopped
    (and the child reaped) as soon as it exists."""
    started = asyncio.ensure_future(asyncio.to_thread(start))
    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(_stop_unwanted)
        raise


def _stop_unwanted(started: asyncio.Future[Any]) -> None:
    if started.cancelled() or started.exception() is not None:
        return
    popen = started.result()

    def stop() -> None:
        kill_process_tree(popen.pid)
        popen.wait()
        for stream in (popen.stdin, popen.stdout, popen.stderr):
            if stream is not None:
                stream.close()
        if isinstance(popen, SupervisedProcess):
            popen.close()

    threading.Thread(target=stop, name="crystal-stop-child", daemon=True).start()


class BoundedOutput:
    """Keeps the first and last ``limit`` bytes of a stream and counts the rest, so huge
    output never grows memory."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    def text(self) -> str:
        """The output as text of at most about ``limit`` characters, saying what was cut."""
        head = self.head.decode("utf-8", errors="replace")
        if not self.tail and len(head) <= self.limit:
            return head
        tail = self.tail.decode("utf-8", errors="replace")
        keep_head = int(self.limit * 0.8)
        keep_tail = self.limit - keep_head
        whole = head + tail
        if self.total == len(self.head) + len(self.tail):
            # Nothing was dropped in between: cut the joined text.
            cut = len(whole) - keep_head - keep_tail
            if cut <= 0:
                return whole
            first, last = whole[:keep_head], whole[-keep_tail:]
        else:
            first, last = head[:keep_head], tail[-keep_tail:]
        return (
            first
            + f"\n\n[... output cut: {self.total} bytes were written in all; the tool output limit is "
            f"{self.limit} characters, so only the start and the end are shown ...]\n\n"
            + last
        )
