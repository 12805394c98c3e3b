"""Background jobs tied to a session (SPEC §4): see :mod:`crystal_kernel.jobs.manager`."""

from crystal_kernel.jobs.buffer import LogChunk, RingBuffer
from crystal_kernel.jobs.job import JobInfo
from crystal_kernel.jobs.manager import JobManager

__all__ = ["JobInfo", "JobManager", "LogChunk", "RingBuffer"]
