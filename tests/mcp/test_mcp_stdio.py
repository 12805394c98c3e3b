"""A real stdio MCP server (tests/mcp/servers, the SDK's server side) used as a tool set:
listing, calls with text and image results, restart after a crash, timeouts and
cancellation reaching the server, and no server process left after the session or the
host ends."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import textwrap
import time

from mcp_support import PY, alive, call, pids, session_for, stdio_entry, wait_until, write_config

from crystal_kernel.tools.base import Authority, Risk
from crystal_kernel.tools.images import NO_IMAGES_TEXT

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


async def test_tools_listed_with_server_names_and_schemas_passed_through(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace)
    try:
        names = [t.name for t in (await session.prepare_tools())]
        assert {"demo_echo", "demo_picture", "demo_crash", "demo_slow"} <= set(names)
        echo = session.tool("demo_echo")
        schema = echo.input_schema()
        assert schema["type"] == "object" and schema["properties"]["text"]["type"] == "string"
        assert schema["required"] == ["text"]
        assert echo.description == "Echo the text back."
        assert echo.source == "MCP server 'demo'" and echo.state == "running"
        assert "mcp.json" in echo.origin and echo.catalogs == frozenset({"work"})
        spec = next(s for s in session.build_request().tools if s.name == "demo_echo")
        assert spec.input_schema["properties"]["text"]["type"] == "string"
    finally:
        await session.close()


async def test_text_call_and_environment(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace)
    try:
        result = await call(session, "demo_echo", {"text": "hello"})
        assert result.ok and result.text == "echo: hello"
        ws = await call(session, "demo_getenv", {"name": "CRYSTAL_WORKSPACE"})
        assert ws.text == str(workspace.resolve())
        assert (await call(session, "demo_getenv", {"name": "CRYSTAL_SESSION"})).text == session.id
        assert (await call(session, "demo_getenv", {"name": "CRYSTAL_HOME"})).text == "<unset>"
        bad = await call(session, "demo_echo", {"text": 5})
        assert not bad.ok and bad.text.startswith("Invalid arguments for demo_echo")
        error = await call(session, "demo_broken", {})
        assert not error.ok and "broken" in error.text
    finally:
        await session.close()


async def test_image_results_use_the_shared_checks(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace)
    try:
        good = await call(session, "demo_picture", {})
        assert good.ok and good.text == "a png picture"
        assert [i.mime_type for i in good.images] == ["image/png"] and good.images[0].raw() == PNG
        text_only = await call(session, "demo_picture", {}, images_ok=False)
        assert not text_only.ok and text_only.text == NO_IMAGES_TEXT  # EX-12, exactly
        bad = await call(session, "demo_picture", {"kind": "bad"})
        assert not bad.ok and "declared as image/png but the bytes are image/gif" in bad.text
        many = await call(session, "demo_picture", {"kind": "many"})
        assert not many.ok and "at most 8" in many.text and not many.images
    finally:
        await session.close()


async def test_crash_restarts_at_the_next_call_each_time(home, workspace, tmp_path):
    """MCP-R: a server that stopped after answering is started again at the next call,
    after every crash (no longer once per session)."""
    pidfile = tmp_path / "pids"
    write_config(home / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    session = session_for(workspace)
    try:
        started = [int((await call(session, "demo_pid", {})).text)]
        for _ in range(2):
            crashed = await call(session, "demo_crash", {})
            assert not crashed.ok
            assert "stopped during the call to crash" in crashed.text and "started again at the next call" in crashed.text
            assert "crash requested" in crashed.text  # the server's own last words
            assert session.tool("demo_echo").state == "stopped (restarts on next use)"
            assert wait_until(lambda: not alive(started[-1]))
            again = await call(session, "demo_echo", {"text": "back"})
            assert again.ok and again.text == "echo: back"
            started.append(int((await call(session, "demo_pid", {})).text))
            assert started[-1] not in started[:-1] and session.tool("demo_echo").state == "running"
        assert pids(pidfile) == started
    finally:
        await session.close()


async def test_gone_after_the_session_closes_in_plan_mode_too(home, workspace, tmp_path):
    pidfile = tmp_path / "pids"
    write_config(home / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    # Plan mode: the server's tools are Work-only, so none is in the catalog, yet the
    # server was started by the catalog build and must still end with the session.
    session = session_for(workspace, mode="plan")
    assert not any(t.name.startswith("demo_") for t in (await session.prepare_tools()))
    assert wait_until(lambda: len(pids(pidfile)) == 1)
    server = pids(pidfile)[0]
    assert alive(server)
    await session.close()
    assert wait_until(lambda: not alive(server), 10), "the MCP server outlived its session"


async def test_plan_catalog_and_the_external_floor(home, workspace):
    write_config(home / "mcp.json", {
        "demo": stdio_entry(catalogs=["plan", "work"], tools={"crash": {"risk": "execute"},
                                                             "pid": {"risk": "read"}}),
    })
    session = session_for(workspace, mode="plan", approval="default")
    try:
        assert "demo_echo" in [t.name for t in (await session.prepare_tools())]
        notes = session.drain_notes()
        assert any("risk 'read' would lower the external floor" in n and "mcp.json" in n for n in notes)
        ctx = None
        echo, crash, pid = session.tool("demo_echo"), session.tool("demo_crash"), session.tool("demo_pid")
        c = echo.classify(echo.parse({"text": "x"}), ctx)
        assert (c.risk, c.authority, c.external) == (Risk.WRITE, Authority.WORKSPACE, True)
        assert crash.classify(crash.parse({}), ctx).risk == Risk.EXECUTE
        assert pid.classify(pid.parse({}), ctx).risk == Risk.WRITE  # never lowered
    finally:
        await session.close()


async def test_timeout_reaches_the_server_as_cancellation(home, workspace, marks):
    write_config(home / "mcp.json", {"demo": stdio_entry(marks=marks, timeoutSeconds=0.5)})
    session = session_for(workspace)
    try:
        started = time.monotonic()
        result = await call(session, "demo_slow", {"seconds": 30})
        assert time.monotonic() - started < 10
        assert not result.ok and "timed out after 0.5 seconds" in result.text
        assert wait_until(lambda: (marks / "cancelled").exists(), 10), "the server never saw the cancellation"
        assert (await call(session, "demo_echo", {"text": "still here"})).ok
    finally:
        await session.close()


async def test_cancelled_turn_cancels_the_call_on_the_server(home, workspace, marks):
    write_config(home / "mcp.json", {"demo": stdio_entry(marks=marks)})
    session = session_for(workspace)
    try:
        await session.prepare_tools()
        task = asyncio.ensure_future(call(session, "demo_slow", {"seconds": 60}))
        await asyncio.sleep(1.0)
        task.cancel()
        started = time.monotonic()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert time.monotonic() - started < 2
        assert wait_until(lambda: (marks / "cancelled").exists(), 10)
    finally:
        await session.close()


async def test_a_server_that_never_answers_is_bounded_and_noted(home, workspace, tmp_path):
    pidfile, bad_pids = tmp_path / "pids", tmp_path / "bad-pids"
    write_config(home / "mcp.json", {
        "hung": stdio_entry("--hang-start", pidfile=pidfile, startupTimeoutSeconds=1),
        "bad": stdio_entry("--fail-start", pidfile=bad_pids),
        "demo": stdio_entry(),
    })
    session = session_for(workspace)
    try:
        started = time.monotonic()
        names = [t.name for t in (await session.prepare_tools())]
        assert time.monotonic() - started < 12
        assert "demo_echo" in names and not any(n.startswith(("hung_", "bad_")) for n in names)
        notes = session.drain_notes()
        assert any("MCP server 'hung'" in n and "within 1 seconds" in n for n in notes)
        assert any("MCP server 'bad'" in n and "missing configuration: DEMO_TOKEN" in n for n in notes)
        assert wait_until(lambda: pids(pidfile) and not alive(pids(pidfile)[0]), 10)
        # MCP-R: rebuilding the catalog (a mode switch) after the backoff starts the failed
        # servers again (each note is shown once); right after, inside the hung server's
        # next (2 s) window, a rebuild does not start it. (The bad server failed at once,
        # so its window may be over by the time the hung one has been given up on.)
        await asyncio.sleep(2.2)  # past the first failure's 1 s, shown rounded up to the second
        session.set_mode("work")
        await session.prepare_tools()
        assert len(pids(pidfile)) == 2 and len(pids(bad_pids)) == 2
        session.set_mode("work")
        await session.prepare_tools()
        # The hung server is not started again inside its window, nor noted again. (The
        # bad one may be: on a loaded machine its own 2 s window can be over by now.)
        assert not any("'hung'" in note for note in session.drain_notes()) and len(pids(pidfile)) == 2
    finally:
        await session.close()


HOST = textwrap.dedent("""
    import asyncio, sys, time
    from pathlib import Path
    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.runner import run_to_completion
    from crystal_kernel.host.session import Session
    from crystal_kernel.testing.scripted import ScriptedProvider

    session = Session(workspace=Path(sys.argv[1]), config=load_config(), provider=ScriptedProvider([]),
                      person_present=False)
    print(len(run_to_completion(session.prepare_tools())), flush=True)
    time.sleep(120)
""")


def test_no_server_left_when_the_host_is_sigkilled(home, workspace, tmp_path):
    pidfile = tmp_path / "pids"
    write_config(home / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    script = tmp_path / "host.py"
    script.write_text(HOST)
    host = subprocess.Popen([PY, str(script), str(workspace)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        assert int(host.stdout.readline()) > 0
        assert wait_until(lambda: len(pids(pidfile)) == 1)
        server = pids(pidfile)[0]
        assert alive(server)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_until(lambda: not alive(server), 10), "the MCP server outlived a SIGKILLed host"
    finally:
        if host.poll() is None:
            host.kill()


def test_image_bytes_round_trip_through_base64():
    # The test server's PNG is what the checks expect: magic numbers of a PNG.
    assert base64.b64decode(base64.b64encode(PNG)) == PNG and json.dumps({"ok": True})
