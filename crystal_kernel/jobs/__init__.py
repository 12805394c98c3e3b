"""Background jobs tied to a session (SPEC §4): see :mod:`crystal_kernel.jobs.manager`.

The names below load on first use (PEP 562): ``crystal run`` imports the small modules
its tools need (``guarded``, ``format``) before its first model request, and the job
machinery (threads, pipes, supervision) only when a job starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crystal_kernel.jobs.buffer import LogChunk, RingBuffer
    from crystal_kernel.jobs.job import JobInfo
    from crystal_kernel.jobs.manager import JobManager

__all__ = ["JobInfo", "JobManager", "LogChunk", "RingBuffer"]

_WHERE = {"JobInfo": "job", "JobManager": "manager", "LogChunk": "buffer", "RingBuffer": "buffer"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
