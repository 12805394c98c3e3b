"""Fixtures for job tests: real job managers in a temporary workspace, and helpers to
find a job's processes afterwards (by pid files the jobs write and by the
CRYSTAL_SESSION variable every job process inherits)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from crystal_kernel.jobs.manager import JobManager


def session_processes(session_id: str) -> list[psutil.Process]:
    """Live processes whose environment says they belong to ``session_id``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("CRYSTAL_SESSION") == session_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(predicate, timeout: float = 5.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def read_pids(path: Path, count: int, timeout: float = 5.0) -> list[int]:
    """Wait for a job to write ``count`` pids (one per line) into ``path``."""
    def ready() -> bool:
        return path.exists() and len(path.read_text().split()) >= count
    assert wait_until(ready, timeout), f"the job did not write {count} pids to {path.name}"
    return [int(p) for p in path.read_text().split()[:count]]


@pytest.fixture
def session_id() -> str:
    return "test-" + uuid.uuid4().hex[:12]


@pytest.fixture
def manager(workspace: Path, session_id: str) -> Iterator[JobManager]:
    m = JobManager(workspace, session_id, grace_seconds=0.5)
    yield m
    m.close()
    # Whatever a test did, nothing of this session may outlive it.
    assert wait_until(lambda: not session_processes(session_id), 5), session_processes(session_id)
