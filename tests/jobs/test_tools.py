"""The four background tools through a real Session (scripted provider, no person):
what the model sees from bash_start, bash_status, bash_logs and bash_stop (BG-1 …
BG-5, MODE-2), with real processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import Authority, Risk, ToolContext, ToolResult
from crystal_kernel.tools.catalog import load_builtin
from tests.jobs.conftest import alive, read_pids, session_processes, wait_until


def _session(workspace: Path, tmp_path: Path, **config: Any) -> Session:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return Session(workspace=workspace, config=Config(home=home, **config), provider=ScriptedProvider(),
                   person_present=False)


@pytest.fixture
async def session(workspace: Path, tmp_path: Path):
    s = _session(workspace, tmp_path)
    yield s
    await s.close()
    assert wait_until(lambda: not session_processes(s.id), 5)


def _ctx(session: Session) -> ToolContext:
    return session.tool_context(NoPerson(), call_id="call-1")


async def call(name: str, session: Session, **arguments: Any) -> ToolResult:
    """As the loop runs a tool: parse, run; a ToolError becomes a failed result."""
    tool = load_builtin(name)
    try:
        return await tool.run(tool.parse(arguments), _ctx(session))
    except ToolError as exc:
        return ToolResult.fail(str(exc))


async def test_bg1_start_status_logs_while_running_and_after(session: Session):
    started = time.monotonic()
    result = await call("bash_start", session, command="echo working; sleep 0.5; echo done; exit 2")
    assert time.monotonic() - started < 1.0
    assert result.ok and result.text.startswith("Started background job j1 (pid ")
    status = await call("bash_status", session, job_id="j1")
    assert status.ok and "Job j1: running" in status.text and "Command: echo working" in status.text
    assert wait_until(lambda: session.jobs.status("j1").bytes >= 8)
    logs = await call("bash_logs", session, job_id="j1")
    assert logs.ok and logs.text == "[job j1 running; bytes 0-8 of 8; next offset 8]\nworking\n"
    session.jobs.join("j1", 10)
    logs = await call("bash_logs", session, job_id="j1", offset=8)
    assert logs.text == "[job j1 exited; bytes 8-13 of 13; next offset 13]\ndone\n"
    status = await call("bash_status", session, job_id="j1")
    assert "Job j1: exited" in status.text and "Exit code: 2" in status.text
    table = await call("bash_status", session)
    lines = table.text.splitlines()
    assert lines[0].split() == ["ID", "STATE", "RESULT", "STARTED", "RUNTIME", "OUTPUT", "COMMAND"]
    assert lines[1].startswith("j1  exited  exit 2")
    assert lines[-1] == "0 running (limit 32), 1 finished."


async def test_bg1_logs_are_bounded_by_the_tool_output_limit(workspace: Path, tmp_path: Path):
    session = _session(workspace, tmp_path, tool_output_limit=1000)
    try:
        await call("bash_start", session, command="for i in $(seq 0 4999); do printf '%09d\\n' $i; done")
        session.jobs.join("j1", 20)
        newest = await call("bash_logs", session, job_id="j1")
        assert len(newest.text) <= 1000
        assert newest.text.endswith("000004999\n")
        first_line = newest.text.splitlines()[0]
        assert "of 50000" in first_line and "next offset 50000" in first_line
        # Paging from an old offset says what was dropped and where to go on.
        page = await call("bash_logs", session, job_id="j1", offset=0, limit=30)
        header = page.text.splitlines()[0]
        assert "bytes 0-30 of 50000" in header and "read on with offset 30" in header
        assert page.text.splitlines()[1:] == ["000000000", "000000001", "000000002"]
        bad = await call("bash_logs", session, job_id="j1", offset=-3)
        assert not bad.ok and "offset" in bad.text
    finally:
        await session.close()


@pytest.mark.usefixtures("landlock_path")
async def test_bg1_bash_stop_kills_a_grandchild_ignoring_sigterm(session: Session, workspace: Path):
    await call("bash_start", session, command=(
        "setsid bash -c 'trap \"\" TERM; echo $$ >> pids; while true; do sleep 0.1; done' & "
        "echo $$ >> pids; wait"))
    pids = read_pids(workspace / "pids", 2)
    result = await call("bash_stop", session, job_id="j1")
    assert result.ok and result.text.startswith("Stopped job j1 and every process it started.")
    assert "Job j1: stopped" in result.text and "Ended by signal: SIGTERM" in result.text
    assert not any(alive(p) for p in pids)
    again = await call("bash_stop", session, job_id="j1")
    assert again.ok and again.text.startswith("Job j1 had already ended.")


async def test_bg4_the_33rd_job_is_a_failed_result_the_model_reads(session: Session):
    for _ in range(32):
        assert (await call("bash_start", session, command="sleep 300")).ok
    refused = await call("bash_start", session, command="echo 33")
    assert not refused.ok
    assert refused.text == ("Cannot start another background job: 32 are running and the limit is 32. "
                            "Stop one with bash_stop (or /stop JOB) or wait for one to finish.")


async def test_bg3_background_timeout_from_config(workspace: Path, tmp_path: Path):
    session = _session(workspace, tmp_path, background_bash_timeout_seconds=0.5)
    try:
        await call("bash_start", session, command="sleep 300")
        session.jobs.join("j1", 10)
        status = await call("bash_status", session, job_id="j1")
        assert "Job j1: timed out" in status.text
    finally:
        await session.close()


async def test_bg2_session_close_stops_jobs(workspace: Path, tmp_path: Path):
    session = _session(workspace, tmp_path)
    await call("bash_start", session, command="sleep 300 & sleep 300 & wait")
    assert wait_until(lambda: len(session_processes(session.id)) >= 4)
    await session.close()
    assert wait_until(lambda: not session_processes(session.id), 3)


async def test_unknown_job_is_a_clear_failed_result(session: Session):
    result = await call("bash_logs", session, job_id="j7")
    assert not result.ok and result.text == "No background job 'j7' in this session (jobs: none)."
    result = await call("bash_status", session)
    assert result.ok and result.text == "No background jobs in this session."


def test_risks_and_schemas(session: Session):
    ctx = _ctx(session)
    start = load_builtin("bash_start")
    classified = start.classify(start.parse({"command": "make serve"}), ctx)
    assert (classified.risk, classified.authority, classified.pattern) == (Risk.EXECUTE, Authority.WORKSPACE, "make serve")
    assert load_builtin("bash_stop").risk is Risk.WRITE
    assert load_builtin("bash_status").risk is Risk.READ and load_builtin("bash_logs").risk is Risk.READ
    schema = load_builtin("bash_logs").input_schema()
    assert schema["required"] == ["job_id"] and set(schema["properties"]) == {"job_id", "offset", "limit"}
    for name in ("bash_start", "bash_status", "bash_logs", "bash_stop"):
        tool = load_builtin(name)
        assert tool.description.startswith(("Start", "Show", "Read", "Stop")), name
    with pytest.raises(ToolError, match="Invalid arguments for bash_stop"):
        load_builtin("bash_stop").parse({"job_id": "j1", "signal": "KILL"})


async def test_bg1_status_can_wait_for_the_job_to_end(session: Session):
    await call("bash_start", session, command="sleep 0.6; echo finished")
    started = time.monotonic()
    status = await call("bash_status", session, job_id="j1", wait_seconds=20)
    waited = time.monotonic() - started
    assert status.ok and "Job j1: exited" in status.text and "Exit code: 0" in status.text
    assert 0.3 < waited < 10
    await call("bash_start", session, command="sleep 30")
    started = time.monotonic()
    status = await call("bash_status", session, job_id="j2", wait_seconds=0.3)
    assert "Job j2: running" in status.text and time.monotonic() - started < 5
    refused = await call("bash_status", session, wait_seconds=1)
    assert not refused.ok and refused.text == "wait_seconds needs a job_id."
    too_long = await call("bash_status", session, job_id="j2", wait_seconds=500)
    assert not too_long.ok and "wait_seconds" in too_long.text
