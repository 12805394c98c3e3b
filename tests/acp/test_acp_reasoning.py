"""ACP: the model's reasoning reaches the client as ``agent_thought_chunk`` updates,
never inside the answer's ``agent_message_chunk`` text (SPEC §12 reasoning)."""

from __future__ import annotations

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp


async def test_reasoning_is_sent_as_thought_chunks(workspace):
    client = RecordingClient()
    replies = [{"reasoning": "The person greets me; greet back.", "text": "Hello!"}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            response = await conn.prompt(session_id=sid, prompt=[{"type": "text", "text": "hi"}])
    assert response.stop_reason == "end_turn"
    thoughts = "".join(u.content.text for u in client.of("agent_thought_chunk", sid))
    assert "The person greets me; greet back." in thoughts
    assert client.agent_text(sid) == "Hello!"
    kinds = client.kinds(sid)
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")


async def test_client_passed_stdio_mcp_server_is_used_and_capabilities_advertised(workspace):
    """ACP schema: every agent supports stdio MCP servers passed in session/new. The
    client's server runs under the same supervisor and rules as a configured one."""
    import sys
    from pathlib import Path

    from acp.schema import EnvVariable, McpServerStdio

    server_script = Path(__file__).resolve().parent.parent / "mcp" / "servers" / "stdio_server.py"
    client = RecordingClient()
    replies = [{"tool_calls": [{"id": "m1", "name": "demo_echo", "arguments": {"text": "via the client"}}]},
               {"text": "Echoed."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            caps = init.agent_capabilities
            assert caps.session_capabilities.additional_directories is not None
            assert caps.mcp_capabilities.http is True
            stdio = McpServerStdio(name="demo", command=sys.executable, args=[str(server_script)],
                                   env=[EnvVariable(name="DEMO_FLAG", value="1")])
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[stdio])).session_id
            response = await conn.prompt(session_id=sid, prompt=[{"type": "text", "text": "echo"}])
        bodies = server.bodies("chat")
    assert response.stop_reason == "end_turn"
    notes = "".join(u.content.text for u in client.of("agent_thought_chunk"))
    assert "demo_echo" in {t["function"]["name"] for t in bodies[0]["tools"]}, notes
    updates = client.tool_updates("m1")
    assert updates[-1].status == "completed"
    assert "echo: via the client" in updates[-1].content[0].content.text
    assert "echo: via the client" in str(bodies[1]["messages"])
