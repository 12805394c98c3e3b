"""The shell of a bash call under a supervisor forked by the spawn server
(jobs/spawner.py): the part of ``asyncio.subprocess.Process`` that the bash tool's
follow-up uses (``pid``, ``stdout.read``, ``wait``, ``returncode``), so a bash call
starts no supervisor interpreter of its own (ROBUST-3 kept: jobs.md)."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Protocol


class StatusLines(Protocol):
    """The supervisor's status pipe as the bash tool reads it."""

    async def readline(self) -> bytes: ...


class PipeReader:
    """Reads a non-blocking pipe from the event loop."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    async def read(self, size: int) -> bytes:
        while True:
            try:
                return os.read(self.fd, size)
            except BlockingIOError:
                pass
            await readable(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


async def readable(fd: int) -> None:
    """Return once ``fd`` can be read without blocking (data or end of file)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, _wake, ready)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class SpawnedShell:
    """``pid`` is the supervisor's (its process group); ``wait`` returns once the
    supervisor has exited (its status pipe closed). The shell's own status comes on
    the status pipe, which the caller reads; ``returncode`` only says the supervisor
    ended (-SIGKILL: no exit line is expected from a supervisor that is gone)."""

    def __init__(self, pid: int, stdout_fd: int, status: StatusLines) -> None:
        self.pid = pid
        self.stdout = PipeReader(stdout_fd)
        self.status = status
        self.returncode: int | None = None

    async def wait(self) -> int:
        while await self.status.readline():
            pass
        self.returncode = -signal.SIGKILL
        return self.returncode


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)
