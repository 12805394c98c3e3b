"""MCP tools inside real turns (the turn loop with the scripted in-process provider),
/tools, and approval in Plan (MODE-3 floor)."""

from __future__ import annotations

from mcp_support import session_for, stdio_entry, write_config

from crystal_kernel.core.events import ApprovalEvent, ToolCallStarted, ToolResultEvent
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import text_reply, tool_reply
from crystal_kernel.tools.images import NO_IMAGES_TEXT


async def events_of(session, prompt="go"):
    return [e async for e in run_turn(session, prompt)]


async def test_a_turn_calls_an_mcp_tool(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace, [tool_reply([("demo_echo", {"text": "from the model"})]), text_reply("done")])
    try:
        events = await events_of(session)
        started = next(e for e in events if isinstance(e, ToolCallStarted))
        result = next(e for e in events if isinstance(e, ToolResultEvent))
        assert started.name == "demo_echo" and started.arguments == {"text": "from the model"}
        assert result.ok and result.text == "echo: from the model"
        request = session.provider.requests[0]
        echo = next(t for t in request.tools if t.name == "demo_echo")
        assert echo.input_schema["properties"]["text"]["type"] == "string"
        # The model saw the result in the next request.
        assert "echo: from the model" in str(session.provider.requests[1].messages[-1])
    finally:
        await session.close()


async def test_text_only_model_gets_the_exact_refusal(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace, [tool_reply([("demo_picture", {})]), text_reply("ok")], images=False)
    try:
        result = next(e for e in await events_of(session) if isinstance(e, ToolResultEvent))
        assert not result.ok and result.text == NO_IMAGES_TEXT and result.images == []
    finally:
        await session.close()


async def test_plan_mode_asks_and_no_person_means_deny(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry(catalogs=["plan", "work"])})
    session = session_for(workspace, [tool_reply([("demo_echo", {"text": "x"})]), text_reply("ok")],
                          mode="plan", approval="plan")
    try:
        events = await events_of(session)
        approvals = [(e.name, e.outcome) for e in events if isinstance(e, ApprovalEvent)]
        # The host asks (write floor, MODE-3); with nobody present the ask resolves to deny.
        assert approvals[0] == ("demo_echo", "ask") and approvals[-1] == ("demo_echo", "deny")
        result = next(e for e in events if isinstance(e, ToolResultEvent))
        assert not result.ok
    finally:
        await session.close()


async def test_slash_tools_shows_server_and_state(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace)
    try:
        text = (await run_command(session, "/tools")).text
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("demo_echo"))
        assert lines[at + 1].strip() == "from MCP server 'demo': running"
        assert sum("from MCP server" in line for line in lines) == len(
            [t for t in (await session.prepare_tools()) if t.name.startswith("demo_")])  # built-ins have no such line
        await run_command(session, "/tools")  # a second listing reuses the running server
    finally:
        await session.close()


async def test_progress_notifications_show_on_the_tool_card(home, workspace):
    """The server's notifications/progress reach the fronts as ToolProgress
    events, and the notebook card shows the latest while the call runs."""
    from crystal_kernel.core.events import ToolProgress
    from crystal_kernel.jupyter.render import RecordingOutput, Renderer

    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace, [tool_reply([("demo_steps", {"count": 3})]), text_reply("done")])
    try:
        events = await events_of(session)
        progress = [e for e in events if isinstance(e, ToolProgress)]
        assert [e.line() for e in progress] == ["1/3: step 1", "2/3: step 2", "3/3: step 3"]
        kinds = [type(e) for e in events]
        assert kinds.index(ToolCallStarted) < kinds.index(ToolProgress) < kinds.index(ToolResultEvent)
        out = RecordingOutput()
        renderer = Renderer(out, max_rate=1000)
        shown = []
        for event in events:
            renderer.render(event)
            if isinstance(event, ToolProgress):
                shown.append(next(o for o in out.outputs if 'data-tool="demo_steps"' in o.get("text/html", "")))
        assert "progress 2/3: step 2" in shown[1]["text/plain"]
        card = next(o for o in out.outputs if 'data-tool="demo_steps"' in o.get("text/html", ""))
        assert "3 steps done" in card["text/plain"] and "progress" not in card["text/plain"]
    finally:
        await session.close()
