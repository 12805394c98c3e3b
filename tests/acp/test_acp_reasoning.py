"""ACP: the model's reasoning reaches the client as ``agent_thought_chunk`` updates,
never inside the answer's ``agent_message_chunk`` text (SPEC §12 reasoning; issue 20)."""

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
