"""BG-2: no job outlives its host. A real host process (python, in a subprocess) starts
jobs — one with a grandchild that ignores SIGTERM in a session of its own — and then
exits normally, is terminated, or is SIGKILLed; afterwards no process of that session
may be left (found by pid files and by the CRYSTAL_SESSION variable)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from crystal_kernel.jobs.manager import JobManager
from tests.jobs.conftest import alive, read_pids, session_processes, wait_until

HOST = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from crystal_kernel.jobs.manager import JobManager

    workspace, session_id, then = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    manager = JobManager(workspace, session_id, grace_seconds=0.5)
    manager.start("setsid bash -c 'trap \\"\\" TERM; echo $$ >> pids; while true; do sleep 0.1; done' & "
                  "echo $$ >> pids; wait")
    manager.start("sleep 300 & echo $! >> pids; echo $$ >> pids; sleep 300")
    pids = workspace / "pids"
    while not pids.exists() or len(pids.read_text().split()) < 4:
        time.sleep(0.02)
    print("ready", flush=True)
    if then == "exit":
        sys.stdin.readline()
        sys.exit(0)  # atexit stops the jobs
    time.sleep(300)
    """
)


def _start_host(workspace: Path, session_id: str, then: str) -> tuple[subprocess.Popen, list[int]]:
    host = subprocess.Popen([sys.executable, "-c", HOST, str(workspace), session_id, then],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None
    assert host.stdout.readline().strip() == "ready"
    pids = read_pids(workspace / "pids", 4)
    assert all(alive(p) for p in pids)
    assert len(session_processes(session_id)) >= 5  # 2 supervisors, 2 shells, grandchildren
    return host, pids


def _assert_all_gone(session_id: str, pids: list[int], timeout: float) -> None:
    assert wait_until(lambda: not any(alive(p) for p in pids), timeout), [p for p in pids if alive(p)]
    assert wait_until(lambda: not session_processes(session_id), 2), session_processes(session_id)


def test_bg2_host_exiting_normally_stops_jobs(workspace: Path, session_id: str):
    host, pids = _start_host(workspace, session_id, "exit")
    assert host.stdin is not None
    host.stdin.write("exit\n")
    host.stdin.flush()
    host.wait(10)
    # atexit waited for the jobs: they are gone by the time the host has exited.
    _assert_all_gone(session_id, pids, 0.5)


def test_bg2_sigkilled_host_leaves_nothing(workspace: Path, session_id: str):
    host, pids = _start_host(workspace, session_id, "stay")
    host.send_signal(signal.SIGKILL)
    host.wait(10)
    _assert_all_gone(session_id, pids, 5)


def test_bg2_terminated_host_leaves_nothing(workspace: Path, session_id: str):
    # SIGTERM's default action ends Python without running atexit: the parent-death
    # signal does the work, as for SIGKILL.
    host, pids = _start_host(workspace, session_id, "stay")
    host.send_signal(signal.SIGTERM)
    host.wait(10)
    _assert_all_gone(session_id, pids, 5)


def test_jobs_started_from_a_short_lived_thread_survive_it(workspace: Path, session_id: str):
    """Linux sends the parent-death signal when the forking *thread* exits; jobs are
    forked by the manager's own long-lived thread, so a caller thread may come and go."""
    manager = JobManager(workspace, session_id, grace_seconds=0.5)
    try:
        started: list[str] = []
        worker = threading.Thread(target=lambda: started.append(manager.start("sleep 300").id))
        worker.start()
        worker.join()
        time.sleep(0.5)
        assert manager.status(started[0]).state == "running"
    finally:
        manager.close()
