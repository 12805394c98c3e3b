"""SPEC §13 "Waits": every wait for a person ends within
personTimeoutSeconds in every front, ACP included. A real `crystal acp` driven over
stdio by the ACP SDK's client, whose permission handler never answers: after the
timeout the call is denied with a note saying why and the prompt ends. On the old code
the prompt waited forever (this test's 60 s limit fails it)."""

from __future__ import annotations

import asyncio
import json

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp


async def test_a_client_that_never_answers_a_permission_request_gets_the_call_denied(workspace, private_home):
    (private_home / "config.json").write_text(json.dumps({"personTimeoutSeconds": 2}))
    client = RecordingClient()

    async def never_answer(session_id, tool_call):
        await asyncio.Event().wait()

    client.on_permission = never_answer
    replies = [{"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo hi > b.txt"}}]},
               {"text": "Nobody answered, so I left it."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            response = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[{"type": "text", "text": "make b.txt"}]), 60)
        bodies = server.bodies("chat")
    assert response.stop_reason == "end_turn"
    assert len(client.permission_requests) == 1  # it was asked
    assert not (workspace / "b.txt").exists()
    said = "Nobody answered within 2 seconds (personTimeoutSeconds)."
    assert said in client.tool_updates("b1")[-1].content[0].content.text
    assert said in json.dumps(bodies[1]["messages"])  # the model was told why
    thoughts = "".join(u.content.text for u in client.of("agent_thought_chunk"))
    assert said in thoughts and "The bash call was denied." in thoughts
    assert client.agent_text() == "Nobody answered, so I left it."
