"""A streamable-HTTP MCP server on 127.0.0.1 (the SDK's server side, in a child
process) used as a tool set: listing, text and image calls, reconnecting once after
the server went away, and the MCP session ended when the Crystal session closes."""

from __future__ import annotations

import pytest
from mcp_support import HttpServer, call, session_for, wait_until, write_config

from crystal_kernel.tools.images import NO_IMAGES_TEXT


async def test_list_and_call_text_and_images(home, workspace, http_server):
    write_config(workspace / ".crystal" / "mcp.json", {"web": {"url": http_server.url}})
    session = session_for(workspace)
    try:
        names = [t.name for t in (await session.prepare_tools())]
        assert {"web_echo", "web_picture"} <= set(names)
        echo = session.tool("web_echo")
        assert echo.source == "MCP server 'web'" and echo.state == "running"
        assert http_server.url in echo.origin
        assert (await call(session, "web_echo", {"text": "over http"})).text == "echo: over http"
        picture = await call(session, "web_picture", {})
        assert picture.ok and [i.mime_type for i in picture.images] == ["image/png"]
        refused = await call(session, "web_picture", {}, images_ok=False)
        assert not refused.ok and refused.text == NO_IMAGES_TEXT
    finally:
        await session.close()


async def test_session_close_ends_the_mcp_session(home, workspace, http_server):
    write_config(home / "mcp.json", {"web": {"url": http_server.url}})
    session = session_for(workspace)
    assert (await call(session, "web_echo", {"text": "x"})).ok
    assert http_server.deletes() == []
    await session.close()
    assert wait_until(lambda: len(http_server.deletes()) == 1, 10)
    after = await call(session, "web_echo", {"text": "x"})
    assert not after.ok and "closed with its session" in after.text


async def test_server_gone_then_back_reconnects_once(home, workspace, http_server):
    write_config(home / "mcp.json", {"web": {"url": http_server.url, "timeoutSeconds": 10}})
    session = session_for(workspace)
    try:
        assert (await call(session, "web_echo", {"text": "one"})).ok
        http_server.kill()
        lost = await call(session, "web_echo", {"text": "two"})
        assert not lost.ok and "MCP server 'web'" in lost.text
        http_server.start()
        back = await call(session, "web_echo", {"text": "three"})
        assert back.ok and back.text == "echo: three", back.text
        assert session.tool("web_echo").state == "running"
    finally:
        await session.close()


async def test_unreachable_url_is_a_note_not_a_hang(home, workspace):
    from mcp_support import free_port

    write_config(home / "mcp.json", {"nowhere": {"url": f"http://127.0.0.1:{free_port()}/mcp",
                                                  "startupTimeoutSeconds": 3}})
    session = session_for(workspace)
    try:
        assert not any(t.name.startswith("nowhere_") for t in (await session.prepare_tools()))
        notes = session.drain_notes()
        assert any("MCP server 'nowhere'" in n and "could not start" in n for n in notes), notes
    finally:
        await session.close()


async def test_timeout_reaches_the_http_server_as_cancellation(home, workspace, http_server):
    write_config(home / "mcp.json", {"web": {"url": http_server.url, "timeoutSeconds": 0.5}})
    session = session_for(workspace)
    try:
        result = await call(session, "web_slow", {"seconds": 30})
        assert not result.ok and "timed out after 0.5 seconds" in result.text
        assert wait_until(lambda: (http_server.marks / "cancelled").exists(), 10)
        assert (await call(session, "web_echo", {"text": "after"})).ok
    finally:
        await session.close()


async def test_a_restarted_server_that_forgot_the_session_is_reinitialized_and_the_call_retried(
        home, workspace, http_server):
    """The server restarts between calls (404 "Session not found" for our old
    session id); the call re-initializes and succeeds, and does so after every restart."""
    write_config(home / "mcp.json", {"web": {"url": http_server.url, "timeoutSeconds": 10}})
    session = session_for(workspace)
    try:
        assert (await call(session, "web_echo", {"text": "one"})).ok
        for n in range(2):
            http_server.kill()
            http_server.start()
            again = await call(session, "web_echo", {"text": f"after restart {n}"})
            assert again.ok and again.text == f"echo: after restart {n}", again.text
        assert session.tool("web_echo").state == "running"
    finally:
        await session.close()


@pytest.mark.parametrize("spelling", ["400-json", "400-text"])
async def test_a_restarted_server_that_answers_400_no_valid_session_is_reinitialized(
        home, workspace, tmp_path, spelling):
    """MCP-HTTP reconnect (docs/mcp.md): the SDK's own server, restarted
    mid-session, refuses our old session id the way server-everything (400, a JSON-RPC
    error without an id) or mcp 1.x's Python server (400, plain text) do: "Bad Request:
    No valid session ID provided". The client SDK reports that only as -32603; the next
    call still opens a new session and succeeds, after every restart."""
    server = HttpServer(tmp_path, lost_session=spelling)
    server.start()
    write_config(home / "mcp.json", {"web": {"url": server.url, "timeoutSeconds": 10}})
    session = session_for(workspace)
    try:
        assert (await call(session, "web_echo", {"text": "one"})).ok
        for n in range(2):
            server.kill()
            server.start()
            again = await call(session, "web_echo", {"text": f"after restart {n}"})
            assert again.ok and again.text == f"echo: after restart {n}", again.text
        assert session.tool("web_echo").state == "running"
    finally:
        await session.close()
        server.kill()
