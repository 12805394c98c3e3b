"""/jobs, /logs JOB [--follow] and /stop JOB through the shared command runner every
front uses, on a real Session with real jobs; follow_logs as the kernel iterates it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.session import Session
from crystal_kernel.jobs.commands import follow_logs, jobs_rows
from crystal_kernel.testing.scripted import ScriptedProvider
from tests.jobs.conftest import session_processes, wait_until


@pytest.fixture
async def session(workspace: Path, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    s = Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider(), person_present=False)
    yield s
    await s.close()
    assert wait_until(lambda: not session_processes(s.id), 5)


async def test_jobs_table_and_rows(session: Session):
    empty = await run_command(session, "/jobs")
    assert empty.text == "No background jobs in this session." and empty.kind == "jobs"
    session.jobs.start("echo hi; exit 1")
    session.jobs.join("j1", 10)
    session.jobs.start("sleep 300")
    result = await run_command(session, "/jobs")
    lines = result.text.splitlines()
    assert lines[1].startswith("j1  exited   exit 1")
    assert lines[2].startswith("j2  running  -")
    assert lines[-1] == "1 running (limit 32), 1 finished."
    rows = result.data["jobs"]
    assert [r["id"] for r in rows] == [r["id"] for r in jobs_rows(session)] == ["j1", "j2"]
    assert rows[0]["exitCode"] == 1 and rows[0]["result"] == "exit 1" and rows[0]["bytes"] == 3
    assert rows[1]["state"] == "running" and rows[1]["endedAt"] is None
    with pytest.raises(UserError, match="Usage: /jobs"):
        await run_command(session, "/jobs extra")


async def test_logs_snapshot_and_follow_flag(session: Session):
    session.jobs.start("echo one; echo two")
    session.jobs.join("j1", 10)
    result = await run_command(session, "/logs j1")
    assert result.kind == "logs"
    assert result.text == "[job j1 exited; bytes 0-8 of 8; next offset 8]\none\ntwo"
    assert result.data["follow"] is False and result.data["nextOffset"] == 8
    session.jobs.start("sleep 300")
    follow = await run_command(session, "/logs j2 --follow")
    assert follow.data == {"jobId": "j2", "follow": True, "nextOffset": 0, "state": "running",
                           "logFile": str(session.workspace / ".crystal" / "data" / "jobs" / session.id / "j2.log")}
    with pytest.raises(UserError, match=r"Usage: /logs JOB \[--follow\]"):
        await run_command(session, "/logs")
    with pytest.raises(UserError, match="unknown option --tail"):
        await run_command(session, "/logs j1 --tail")
    with pytest.raises(UserError, match="No background job 'j9'"):
        await run_command(session, "/logs j9")


async def test_follow_logs_streams_until_the_job_ends(session: Session):
    info = session.jobs.start("for i in 1 2 3; do echo line $i; sleep 0.2; done; printf 'caf\\xc3'; sleep 0.2; printf '\\xa9'")
    pieces = [piece async for piece in follow_logs(session.jobs, info.id, 0)]
    assert "".join(pieces) == "line 1\nline 2\nline 3\ncafé"
    assert len(pieces) >= 3  # it arrived in several pieces, live
    assert session.jobs.status(info.id).state == "exited"


async def test_follow_logs_announces_dropped_output(workspace: Path, tmp_path: Path):
    from crystal_kernel.jobs.manager import JobManager

    manager = JobManager(workspace, "follow-drop", buffer_bytes=100, grace_seconds=0.5)
    try:
        info = manager.start("head -c 1000 /dev/zero | tr '\\0' x")
        manager.join(info.id, 10)
        pieces = [p async for p in follow_logs(manager, info.id, 0)]
        assert pieces[0] == "\n[... 900 bytes were dropped from the buffer before they could be shown ...]\n"
        assert pieces[1] == "x" * 100
    finally:
        manager.close()


async def test_stop_command(session: Session):
    session.jobs.start("sleep 300")
    result = await run_command(session, "/stop j1")
    assert result.text.startswith("Stopped job j1 (SIGTERM) after ")
    again = await run_command(session, "/stop j1")
    assert again.text == "Job j1 had already ended (stopped, SIGTERM)."
    with pytest.raises(UserError, match="Usage: /stop JOB"):
        await run_command(session, "/stop")
    with pytest.raises(UserError, match="No background job 'j2'"):
        await run_command(session, "/stop j2")


async def test_cd_moves_later_jobs_and_their_files_to_the_new_workspace(session: Session, tmp_path: Path):
    first = session.workspace
    session.jobs.start("echo before")
    session.jobs.join("j1", 10)
    other = tmp_path / "other"
    other.mkdir()
    await run_command(session, f"/cd {other}")
    session.jobs.start("pwd")
    session.jobs.join("j2", 10)
    assert session.jobs.logs("j2", 0, 1000).text.strip() == str(other.resolve())
    assert (first / ".crystal" / "data" / "jobs" / session.id / "j1.log").exists()
    moved = other.resolve() / ".crystal" / "data" / "jobs" / session.id
    assert (moved / "j2.log").read_text().strip() == str(other.resolve())
    assert (moved / "j2.json").exists()
