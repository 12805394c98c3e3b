"""SPEC §13 "Waits": every wait for a person ends within personTimeoutSeconds in every
front, ACP included, and a form that times out is nobody's answer, not the person's
(core/interaction.py's ``nobody`` contract).

A real `crystal acp` driven over stdio by the ACP SDK's client, whose permission handler
never answers: after the timeout the call is denied by the host with a note saying why
and the prompt ends (the old code waited forever: this test's 60 s limit failed it). The
model is told nobody answered, never "denied by the person" (which reads as the person's
decision and steers the model to stop asking), and the audit log saved with the session
records the host, not the person (the old code recorded the person)."""

from __future__ import annotations

import asyncio
import json

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp

DENIED = "No person is present to approve; denied. Nobody answered within 1 seconds (personTimeoutSeconds)."


def saved_audit(workspace) -> list[dict]:
    """The audit entries of the workspace's one saved session (its journal's lines)."""
    (journal,) = (workspace / ".crystal" / "sessions").glob("*.jsonl")
    entries: list[dict] = []
    for line in journal.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("t") == "add" and record.get("k") == "audit":
            entries.extend(record["items"])
    return entries


async def test_a_permission_nobody_answers_is_denied_by_the_host_not_the_person(workspace, private_home):
    (private_home / "config.json").write_text(json.dumps({"personTimeoutSeconds": 1}))
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
    assert len(client.permission_requests) == 1 and not (workspace / "b.txt").exists()  # asked, then denied
    told = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"][-1]
    assert told == f"Error: The call was denied. Reason: {DENIED}", told
    shown = client.tool_updates("b1")[-1].content[0].content.text
    assert "denied by the person" not in shown and "Nobody answered within 1 seconds" in shown
    thoughts = "".join(u.content.text for u in client.of("agent_thought_chunk"))
    assert "Nobody answered within 1 seconds" in thoughts and "The bash call was denied." in thoughts
    assert client.agent_text() == "Nobody answered, so I left it."
    decisions = [(e["outcome"], e["by"], e["reason"]) for e in saved_audit(workspace) if e["call"]["id"] == "b1"]
    assert decisions[-1] == ("deny", "host", DENIED)
    assert not any(by == "person" for _, by, _ in decisions), decisions
