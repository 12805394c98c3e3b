"""BG-1 … BG-5 with real processes: start/status/logs/stop, the 33rd job, the
background timeout, stdin, process-tree stops, status files and log rotation."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.manager import JobManager
from tests.jobs.conftest import alive, read_pids, session_processes, wait_until


def test_bg1_start_returns_at_once_and_output_streams(manager: JobManager):
    started = time.monotonic()
    info = manager.start("echo first; sleep 0.5; echo second")
    assert time.monotonic() - started < 1.0
    assert info.id == "j1" and info.state == "running" and info.pid
    assert wait_until(lambda: "first" in manager.logs("j1").text)
    during = manager.status("j1")
    assert during.state == "running" and during.exit_code is None
    assert "second" not in manager.logs("j1").text
    done = manager.join("j1", 10)
    assert done.state == "exited" and done.exit_code == 0 and done.ended_at is not None
    assert done.runtime_seconds >= 0.5
    chunk = manager.logs("j1")
    assert chunk.text == "first\nsecond\n" and chunk.next_offset == chunk.total == 13 == done.bytes


def test_bg1_exit_code_stderr_and_workspace(manager: JobManager, workspace: Path, session_id: str):
    info = manager.start('pwd; echo "to stderr" >&2; echo "$CRYSTAL_SESSION $CRYSTAL_JOB"; exit 7')
    done = manager.join(info.id, 10)
    assert done.state == "exited" and done.exit_code == 7
    assert manager.logs(info.id).text == f"{workspace}\nto stderr\n{session_id} {info.id}\n"


def test_bg1_logs_by_offset_across_a_wrapped_buffer(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, buffer_bytes=1000, grace_seconds=0.5)
    try:
        # 5000 numbered 10-byte lines: 50000 bytes through a 1000-byte buffer.
        info = manager.start("for i in $(seq 0 4999); do printf '%09d\\n' $i; done")
        assert manager.join(info.id, 20).exit_code == 0
        chunk = manager.logs(info.id, 0)
        assert chunk.total == 50000 and chunk.offset == 49000 and chunk.dropped == 49000
        assert chunk.text.splitlines()[0] == "000004900" and chunk.text.endswith("000004999\n")
        window = manager.logs(info.id, 49500, 30)
        assert window.text == "000004950\n000004951\n000004952\n" and window.next_offset == 49530
        assert window.remaining == 470
        tail = manager.logs(info.id, None, 20)
        assert tail.text == "000004998\n000004999\n" and tail.offset == 49980
        with pytest.raises(ToolError, match="past the end"):
            manager.logs(info.id, 50001)
    finally:
        manager.close()


def test_bg5_stdin_is_closed(manager: JobManager):
    started = time.monotonic()
    info = manager.start("cat; echo cat-ended")
    done = manager.join(info.id, 10)
    assert time.monotonic() - started < 3
    assert done.exit_code == 0 and manager.logs(info.id).text == "cat-ended\n"


def test_bg1_stop_kills_a_grandchild_that_ignores_sigterm(manager: JobManager, workspace: Path):
    # The job forks a grandchild that ignores TERM and moves to a session of its own.
    command = (
        "setsid bash -c 'trap \"\" TERM; echo $$ >> pids; while true; do sleep 0.1; done' & "
        "echo $$ >> pids; wait"
    )
    info = manager.start(command)
    pids = read_pids(workspace / "pids", 2)
    assert all(alive(p) for p in pids)
    started = time.monotonic()
    done = manager.stop(info.id)
    elapsed = time.monotonic() - started
    assert done.state == "stopped" and done.signal == "SIGTERM"
    assert 0.4 <= elapsed < 4, elapsed  # TERM ignored: KILL after the 0.5 s grace
    assert not any(alive(p) for p in pids)
    assert not alive(info.pid)


def test_bg1_stop_of_a_finished_job_is_harmless(manager: JobManager):
    info = manager.start("exit 0")
    manager.join(info.id, 10)
    assert manager.stop(info.id).state == "exited"


def test_bg1_a_job_is_its_whole_tree(manager: JobManager, workspace: Path):
    """What the shell leaves running in the background is stopped when it exits."""
    info = manager.start("sleep 300 & echo $! > pids; echo left")
    done = manager.join(info.id, 10)
    assert done.exit_code == 0
    (pid,) = read_pids(workspace / "pids", 1)
    assert wait_until(lambda: not alive(pid), 3)


def test_bg4_the_33rd_active_job_is_refused(manager: JobManager, workspace: Path):
    for _ in range(32):
        manager.start("sleep 300")
    assert manager.active_count == 32
    with pytest.raises(ToolError) as refused:
        manager.start("echo one too many")
    message = str(refused.value)
    assert "32 are running and the limit is 32" in message and "bash_stop" in message
    # A finished job frees its slot and stays queryable.
    manager.stop("j5")
    info = manager.start("echo fits")
    assert info.id == "j33"  # the refused start used no id
    assert manager.join(info.id, 10).exit_code == 0
    assert manager.status("j5").state == "stopped"
    assert len(manager.status()) == 33


def test_bg3_background_timeout(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, timeout_seconds=0.5, grace_seconds=0.5)
    try:
        info = manager.start("echo begun; sleep 300")
        done = manager.join(info.id, 10)
        assert done.state == "timed out" and done.signal == "SIGTERM"
        assert 0.5 <= done.runtime_seconds < 3
        assert manager.logs(info.id).text == "begun\n"
        # A job that ends in time is unaffected.
        quick = manager.start("echo quick")
        assert manager.join(quick.id, 10).state == "exited"
    finally:
        manager.close()


def test_bg3_no_timeout_when_unlimited(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, timeout_seconds=None, grace_seconds=0.5)
    try:
        info = manager.start("sleep 1; echo still here")
        assert info.timeout_seconds is None
        assert manager.join(info.id, 10).state == "exited"
    finally:
        manager.close()


def test_bg2_close_stops_everything_and_refuses_new_jobs(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, grace_seconds=0.5)
    manager.start("trap '' TERM; sleep 300")
    manager.start("sleep 300 & sleep 300 & wait")
    assert wait_until(lambda: len(session_processes(session_id)) >= 5)
    started = time.monotonic()
    manager.close()
    assert time.monotonic() - started < 4
    assert [i.state for i in manager.status()] == ["stopped", "stopped"]
    assert wait_until(lambda: not session_processes(session_id), 3)
    with pytest.raises(ToolError, match="session is closed"):
        manager.start("echo late")


def test_unknown_job_and_empty_command(manager: JobManager):
    manager.start("true")
    with pytest.raises(ToolError, match="No background job 'j9' in this session \\(jobs: j1\\)"):
        manager.status("j9")
    with pytest.raises(ToolError, match="empty"):
        manager.start("   ")
    with pytest.raises(ToolError, match="does not exist"):
        manager.start("true", cwd=Path("/nonexistent/folder"))
    assert [i.id for i in manager.status()] == ["j1"]


def test_status_file_and_log_mirror(manager: JobManager, workspace: Path, session_id: str):
    info = manager.start("echo mirrored; exit 3")
    manager.join(info.id, 10)
    folder = workspace / ".crystal" / "data" / "jobs" / session_id
    status = json.loads((folder / "j1.json").read_text())
    assert status["version"] == 1 and status["id"] == "j1" and status["sessionId"] == session_id
    assert status["state"] == "exited" and status["exitCode"] == 3 and status["bytes"] == 9
    assert status["hostPid"] == os.getpid() and status["pid"] == info.pid
    assert status["logFile"] == "j1.log" and status["logStart"] == 0 and status["logPrevious"] is None
    assert status["startedAt"].endswith("+00:00") and status["endedAt"]
    assert (folder / "j1.log").read_text() == "mirrored\n"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_log_file_rotates_and_stays_bounded(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, log_bytes=10_000, grace_seconds=0.5)
    try:
        info = manager.start("for i in $(seq 0 4999); do printf '%09d\\n' $i; done")
        manager.join(info.id, 20)
        folder = workspace / ".crystal" / "data" / "jobs" / session_id
        status = json.loads((folder / "j1.json").read_text())
        current, previous = folder / "j1.log", folder / "j1.log.1"
        assert status["logPrevious"] == "j1.log.1"
        assert current.stat().st_size <= 10_000 and previous.stat().st_size == 10_000
        # logStart is the absolute offset of the current file's first byte.
        assert status["logStart"] + current.stat().st_size == 50_000
        assert current.read_text().startswith(f"{status['logStart'] // 10:09d}\n")
        assert current.read_text().endswith("000004999\n")
    finally:
        manager.close()


def test_stale_running_status_is_marked_lost_and_ids_continue(workspace: Path, session_id: str):
    folder = workspace / ".crystal" / "data" / "jobs" / session_id
    folder.mkdir(parents=True)
    dead = 2**22 + 12345  # above pid_max on most systems: never alive
    (folder / "j4.json").write_text(json.dumps({"id": "j4", "state": "running", "hostPid": dead, "extra": 1}))
    (folder / "j2.json").write_text("{not json")
    manager = JobManager(workspace, session_id, grace_seconds=0.5)
    try:
        assert manager.lost == ["j4"]
        data = json.loads((folder / "j4.json").read_text())
        assert data["state"] == "lost" and data["extra"] == 1
        assert (folder / "j2.json").read_text() == "{not json"
        assert manager.start("true").id == "j5"
    finally:
        manager.close()


def test_without_files(workspace: Path, session_id: str):
    manager = JobManager(workspace, session_id, write_files=False, grace_seconds=0.5)
    try:
        info = manager.start("echo only memory")
        assert manager.join(info.id, 10).log_file is None
        assert manager.logs(info.id).text == "only memory\n"
        assert not (workspace / ".crystal").exists()
    finally:
        manager.close()


def test_pipes_end_with_sigpipe_as_in_a_terminal(manager: JobManager):
    info = manager.start("yes | head -n 3; echo ${PIPESTATUS[0]}")
    manager.join(info.id, 10)
    assert manager.logs(info.id).text == "y\ny\ny\n141\n"


async def test_async_wait_and_astop(manager: JobManager):
    info = manager.start("echo a; sleep 300")
    assert await manager.wait_output(info.id, 0, 5)
    assert (await manager.wait(info.id, 0.2)).state == "running"
    stopped = await manager.astop(info.id)
    assert stopped.state == "stopped"


def test_a_job_killed_from_outside_says_so(manager: JobManager, workspace: Path):
    """SIGTERM to the supervisor from elsewhere (the sidebar's Stop, a terminal) stops
    the whole tree; the state is `killed`, with the signal."""
    info = manager.start("sleep 300 & echo $! > pids; wait")
    (pid,) = read_pids(workspace / "pids", 1)
    os.kill(info.pid, 15)
    done = manager.join(info.id, 10)
    assert done.state == "killed" and done.signal == "SIGTERM" and done.exit_code is None
    assert not alive(pid)


def test_a_killed_supervisor_leaves_no_escaped_process(manager: JobManager, workspace: Path, session_id: str):
    """Even if the supervisor itself is SIGKILLed, the host finds what it left behind
    (a grandchild in a session of its own holding the output pipe) and kills it."""
    info = manager.start("setsid bash -c 'echo $$ > pids; trap \"\" TERM; while true; do sleep 0.1; done' & wait")
    (pid,) = read_pids(workspace / "pids", 1)
    os.kill(info.pid, 9)
    done = manager.join(info.id, 10)
    assert done.state == "killed" and done.signal == "SIGKILL"
    assert wait_until(lambda: not alive(pid), 3)
    assert wait_until(lambda: not session_processes(session_id), 3)
