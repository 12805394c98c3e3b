"""The process's initial environment block, as ``/proc/PID/environ`` shows it (TRUST-4).

Linux keeps the environment a process was started with in its own memory (the top of
the main thread's stack) and ``/proc/PID/environ`` reads it from there. Removing a
variable from ``os.environ`` (``unsetenv``) or setting it again (``setenv`` copies the
new string elsewhere) only changes the C ``environ`` array: the old bytes stay, readable
by the process itself and by every process of the same user (``cat /proc/$PPID/environ``
from a tool's shell). :func:`scrub_initial_environment` overwrites the values of chosen
variables in that block with ``*`` once nothing points at them any more.

Linux only; elsewhere (or when ``/proc`` is not readable) it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable

# 1-based field numbers of env_start / env_end in /proc/PID/stat (Linux 3.5 and later).
_ENV_START_FIELD = 50
_ENV_END_FIELD = 51


def _block_bounds() -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # Fields after the command name (in parentheses, may hold spaces) start at field 3.
    rest = stat[stat.rfind(b")") + 2:].split()
    try:
        start, end = int(rest[_ENV_START_FIELD - 3]), int(rest[_ENV_END_FIELD - 3])
    except (IndexError, ValueError):
        return None
    if not 0 < start < end or end - start > 16 << 20:
        return None
    return start, end


def scrub_initial_environment(names: Iterable[str]) -> list[str]:
    """Overwrite the values of ``names`` in the initial environment block with ``*``.

    A name still set in ``os.environ`` is first set again, so that the C environment
    points at a fresh copy and the process keeps its value; only the stale bytes in the
    block change. Returns the names whose value was overwritten."""
    if not sys.platform.startswith("linux"):
        return []
    names = list(names)  # iterated twice
    wanted = {os.fsencode(n) for n in names}
    if not wanted:
        return []
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            os.putenv(name, value)  # setenv: the C environ now holds a heap copy
    bounds = _block_bounds()
    if bounds is None:
        return []
    start, end = bounds
    try:
        block = ctypes.string_at(start, end - start)
    except (OSError, ValueError):
        return []
    done: list[str] = []
    offset = 0
    for entry in block.split(b"\0"):
        key, sep, raw = entry.partition(b"=")
        if sep and key in wanted and raw.strip(b"*"):
            at = start + offset + len(key) + 1
            ctypes.memmove(at, b"*" * len(raw), len(raw))
            done.append(os.fsdecode(key))
        offset += len(entry) + 1
    return done
