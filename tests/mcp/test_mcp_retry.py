"""MCP-R: a server that failed is tried again at a later call with a bounded backoff,
and the message says what happened last and when the next try is. Real servers, taken
down and brought back twice within one long-lived session: its tools come back without
a restart of the session."""

from __future__ import annotations

import datetime
import re
import time

import pytest
from mcp_support import call, pids, session_for, stdio_entry, write_config

from crystal_kernel.mcp.backoff import CAP_SECONDS, Backoff

NEXT_TRY = re.compile(r"next try after (\d\d:\d\d:\d\d)")


def next_try(text: str) -> str:
    found = NEXT_TRY.search(text)
    assert found, text
    return found.group(1)


def wait_past(clock: str) -> None:
    """Sleep until the local time of day ``clock`` (HH:MM:SS) has passed."""
    now = datetime.datetime.now()
    at = datetime.datetime.combine(now.date(), datetime.time.fromisoformat(clock))
    if at - now > datetime.timedelta(hours=12):  # shown before midnight, now after
        at -= datetime.timedelta(days=1)
    seconds = (at - now).total_seconds()
    assert seconds <= CAP_SECONDS + 1, f"the next try at {clock} is beyond the cap"
    time.sleep(max(0.0, seconds) + 0.1)


async def until_backing_off(session, name: str, arguments: dict) -> str:
    """Call while the server is down until an answer names its next try (the first
    call after a server went away may only say it stopped); that answer."""
    for _ in range(3):
        result = await call(session, name, arguments)
        assert not result.ok, result.text
        if NEXT_TRY.search(result.text):
            return result.text
    raise AssertionError(f"no next try named: {result.text}")


@pytest.mark.timeout(240)
async def test_http_server_down_twice_comes_back_each_time(home, workspace, http_server):
    write_config(home / "mcp.json", {"web": {"url": http_server.url, "timeoutSeconds": 10}})
    session = session_for(workspace)
    try:
        assert (await call(session, "web_echo", {"text": "up"})).ok
        for outage in range(2):
            http_server.kill()
            failed = await until_backing_off(session, "web_echo", {"text": "down"})
            assert f"The MCP server 'web' could not reach {http_server.url}: connection refused at " in failed, failed
            after = next_try(failed)
            assert session.tool("web_echo").state.endswith(f"; next try after {after}")
            # Inside the backoff window: no try, the same last failure and next try.
            early = await call(session, "web_echo", {"text": "early"})
            assert not early.ok and early.text.startswith("The MCP server 'web' is not tried again yet: it could "
                                                          f"not reach {http_server.url}: connection refused at ")
            assert next_try(early.text) == after
            http_server.start()
            wait_past(after)
            back = await call(session, "web_echo", {"text": f"back {outage}"})
            assert back.ok and back.text == f"echo: back {outage}", back.text
            assert session.tool("web_echo").state == "running"
    finally:
        await session.close()


@pytest.mark.timeout(240)
async def test_stdio_server_that_exited_and_cannot_start_comes_back_twice(home, workspace, tmp_path):
    """A stdio server exits (its `crash` tool) and fails to start while a marker file
    exists; inside the backoff window no process is started; once it can start again
    the next call after the window starts it."""
    pidfile, down = tmp_path / "pids", tmp_path / "down"
    entry = stdio_entry(pidfile=pidfile)
    entry["env"]["MCP_TEST_DOWN"] = str(down)
    write_config(home / "mcp.json", {"demo": entry})
    session = session_for(workspace)
    try:
        assert (await call(session, "demo_echo", {"text": "up"})).ok
        for outage in range(2):
            down.touch()
            crashed = await call(session, "demo_crash", {})
            assert not crashed.ok and "It is started again at the next call." in crashed.text, crashed.text
            failed = await call(session, "demo_echo", {"text": "down"})
            assert not failed.ok and "The MCP server 'demo' could not start: " in failed.text, failed.text
            assert "down for maintenance" in failed.text  # its own last words on stderr
            after = next_try(failed.text)
            tries = len(pids(pidfile))
            early = await call(session, "demo_echo", {"text": "early"})
            assert not early.ok and early.text.startswith("The MCP server 'demo' is not tried again yet: it could "
                                                          "not start: "), early.text
            assert next_try(early.text) == after and len(pids(pidfile)) == tries  # nothing was started
            down.unlink()
            wait_past(after)
            back = await call(session, "demo_echo", {"text": f"back {outage}"})
            assert back.ok and back.text == f"echo: back {outage}", back.text
            assert len(pids(pidfile)) == tries + 1
    finally:
        await session.close()


def test_backoff_doubles_to_the_cap_and_a_stop_after_an_answer_is_tried_at_once():
    """The schedule itself: 1, 2, 4, ... seconds, never beyond the cap; an answer starts
    the count again; a server that stopped after answering may start at once."""
    backoff = Backoff()
    gaps = []
    for _ in range(8):
        before = time.time()
        backoff.failed("could not start: no", stopped=False)
        after = datetime.datetime.combine(datetime.date.today(), datetime.time.fromisoformat(backoff.next_try()))
        gaps.append(after.timestamp() - before)
    # Shown rounded up to the second: never early, at most a second late.
    assert all(want <= gap <= want + 1 for want, gap in zip([1, 2, 4, 8, 16, 30, 30, 30], gaps)), gaps
    assert backoff.waiting()
    backoff.answered()
    assert not backoff.waiting()
    backoff.failed("stopped", stopped=True)
    assert not backoff.waiting() and backoff.last().endswith("it is started again at the next call.")
