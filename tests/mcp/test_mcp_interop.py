"""MCP interop details: images that also come back in structuredContent are
never sent as base64 text; tools that only run as tasks are left out with a note;
start-failure notes read as sentences without exception class names."""

from __future__ import annotations

import base64
import builtins

from mcp import types as mcp_types
from mcp_support import session_for, write_config

from crystal_kernel.mcp.connection import _reason
from crystal_kernel.mcp.manager import start_failure_note, task_required
from crystal_kernel.mcp.results import map_result, without_binary

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 4000
B64 = base64.b64encode(PNG).decode()


def test_an_image_in_structured_content_is_not_copied_into_the_text():
    result = mcp_types.CallToolResult(
        content=[mcp_types.ImageContent(type="image", data=B64, mimeType="image/png")],
        structuredContent={"image": {"data": B64, "mimeType": "image/png"}, "width": 8})
    mapped = map_result("shot", result, limit=30000, images_ok=True)
    assert mapped.ok and [i.mime_type for i in mapped.images] == ["image/png"]
    assert B64[:100] not in mapped.text and len(mapped.text) < 200


def test_structured_content_alone_keeps_its_words_and_drops_binary():
    result = mcp_types.CallToolResult(content=[], structuredContent={
        "name": "plot", "png": B64, "preview": "data:image/png;base64," + B64, "rows": [1, 2]})
    mapped = map_result("plot", result, limit=30000, images_ok=False)
    assert mapped.ok and '"name": "plot"' in mapped.text and '"rows"' in mapped.text
    assert B64[:100] not in mapped.text
    assert f"[binary data omitted: {len(B64)} characters]" in mapped.text
    assert without_binary({"short": "abc=", "words": "a sentence " * 40}) == {"short": "abc=",
                                                                              "words": "a sentence " * 40}


def test_task_only_tools_are_recognised():
    def tool(support):
        return mcp_types.Tool(name="t", inputSchema={"type": "object"},
                              execution=mcp_types.ToolExecution(taskSupport=support) if support else None)

    assert task_required(tool("required"))
    assert not task_required(tool("optional")) and not task_required(tool(None))


def test_start_failure_notes_are_clean_sentences():
    assert start_failure_note("MCP server 'a' (from mcp.json)", "its command 'x' was not found on PATH.") == (
        "MCP server 'a' (from mcp.json) could not start: its command 'x' was not found on PATH. "
        "Its tools are left out for now; it is tried again when the tools are next gathered (a mode switch, /cd).")
    note = start_failure_note("MCP server 'b'", "The server stopped. Its last output on stderr:\nboom")
    assert note == ("MCP server 'b' could not start: The server stopped. Its tools are left out for now; it is "
                    "tried again when the tools are next gathered (a mode switch, /cd). Its last output on "
                    "stderr:\nboom")
    import httpx

    assert _reason(httpx.ConnectError("All connection attempts failed")) == \
        "nothing answered at its address (connection refused)"
    # A builtin from Python 3.11 (the SDK's task groups raise it); looked up like the code does.
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None:
        assert _reason(group("x", [ValueError("bad header")])) == "bad header"
    assert "Error" not in _reason(RuntimeError(""))


async def test_an_unreachable_server_note_names_no_exception_class(home, workspace):
    from mcp_support import free_port

    write_config(home / "mcp.json", {"nowhere": {"url": f"http://127.0.0.1:{free_port()}/mcp",
                                                  "startupTimeoutSeconds": 3}})
    session = session_for(workspace)
    try:
        await session.prepare_tools()
        note = next(n for n in session.drain_notes() if "nowhere" in n)
        assert "Error" not in note and ".." not in note and note.endswith("(a mode switch, /cd)."), note
    finally:
        await session.close()
