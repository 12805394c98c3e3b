"""Slash commands the way Jupyter AI's chat sends them (docs/acp.md
"Slash commands"), through the real `crystal acp` process and the ACP SDK's client.

Jupyter AI's ACP client puts its "System note: …" paragraph before the first message of
a session, its conversation history before the first message after a restart, and keeps
the chat mention (`@Crystal /help`). The command still runs and the model receives
nothing; the answer is Markdown (the help as a list, other listings in a fenced block).
"""

from __future__ import annotations

import asyncio
import re

from jupyter_ai_acp_client.base_acp_persona import BaseAcpPersona

from crystal_kernel.host.commands import help_rows
from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp

# Jupyter AI's own text (jupyter-ai-acp-client), as it reaches the agent.
SYSTEM_NOTE = BaseAcpPersona.NOTEBOOK_EDITING_GUIDANCE


def text(prompt: str) -> list[dict]:
    return [{"type": "text", "text": prompt}]


async def answer(conn, client: RecordingClient, sid: str, prompt: str) -> str:
    """The agent's text for one prompt."""
    before = len(client.agent_text(sid))
    response = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text(prompt)), 30)
    assert response.stop_reason == "end_turn"
    return client.agent_text(sid)[before:]


async def test_wrapped_slash_commands_run_and_reach_no_model(workspace):
    """A system note, a mention, both, and Jupyter AI's recovered history in front of a
    command: each runs the command; the loopback model gets no request at all."""
    client = RecordingClient()
    history = ("<conversation_history>\nYou: what is /help?\nCrystal: </conversation_history> a list\n"
               "</conversation_history>\n\nCurrent user message:\n")
    with LLMServer([]) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            first = await answer(conn, client, sid, f"{SYSTEM_NOTE}\n\n/help")
            mentioned = await answer(conn, client, sid, "@Crystal /help")
            both = await answer(conn, client, sid, f"{SYSTEM_NOTE}\n\n@Crystal  /mode plan")
            recovered = await answer(conn, client, sid, history + "@Crystal /mode work")
        assert server.bodies() == [], "a command reached the model"
    assert first == mentioned
    assert both.startswith("Mode is now plan.") and recovered.startswith("Mode is now work.")
    modes = [u.current_mode_id for u in client.of("current_mode_update", sid)]
    assert modes[-2:] == ["plan", "work"]


async def test_help_is_a_markdown_list(workspace):
    """The help's plain-text columns would collapse into one paragraph under Markdown:
    over ACP it is a list, one command per item, every row of the help there."""
    client = RecordingClient()
    with LLMServer([]) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            shown = await answer(conn, client, sid, "/help")
    lines = shown.splitlines()
    assert lines[0] == "**Commands**" and lines[1] == ""
    items = lines[2:]
    assert len(items) == len(help_rows("acp")) and all(item.startswith("- `/") for item in items)
    assert "- `/help`: this list" in items
    assert "- `/jobs`, `/logs JOB [--follow]`, `/stop JOB`: background jobs" in items
    assert "- `/promptset [NAME]` (`/prompts`): list or switch prompt sets" in items
    assert "  " not in shown  # no column padding left to collapse


async def test_help_lists_only_what_acp_offers(workspace):
    """/help over ACP lists the commands this front offers: not /resume and /fork (the
    client owns its sessions and ACP refuses them) nor /expand (only the terminal folds
    tool output); each of them typed here says why it is not available."""
    client = RecordingClient()
    with LLMServer([]) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            shown = await answer(conn, client, sid, "/help")
            refused = {name: await answer(conn, client, sid, f"/{name}") for name in ("fork", "expand")}
            await client.wait_for(lambda: client.of("available_commands_update", sid), 10)
        assert server.bodies() == []
    assert "- `/sessions`: saved sessions" in shown.splitlines()
    # The commands announced to the client are the ones /help lists (aliases aside).
    announced = [c.name for c in client.of("available_commands_update", sid)[0].available_commands]
    listed = re.findall(r"`/([a-z]+)", re.sub(r"\(`/[a-z]+`\)", "", shown))
    assert announced == listed and {"reasoning", "trust"} <= set(announced), (announced, listed)
    for name in ("resume", "fork", "expand"):
        assert f"`/{name}" not in shown, shown
    assert refused["fork"] == "/fork is not available here: open or start sessions from your client's session list."
    assert refused["expand"] == "/expand is not available here: only the terminal folds tool output."


async def test_other_listings_keep_their_columns_in_a_fence(workspace):
    """A multi-line answer other than the help is shown as written (a fenced block);
    a one-line answer stays a sentence."""
    client = RecordingClient()
    with LLMServer([]) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            listing = await answer(conn, client, sid, "@Crystal /promptattach")
            refused = await answer(conn, client, sid, "/resume x")
    assert listing.startswith("```text\nPrompt attachments:\n") and listing.endswith("\n```")
    assert refused.startswith("/resume is not available here") and "```" not in refused


async def test_a_mention_before_a_question_is_still_a_prompt(workspace):
    """Only a command is looked past: a question that mentions a command goes to the
    model as written (system note and mention included)."""
    client = RecordingClient()
    with LLMServer([{"text": "It lists the commands."}]) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            said = await answer(conn, client, sid, f"{SYSTEM_NOTE}\n\n@Crystal what does /help do?")
        bodies = server.bodies("chat")
    assert said == "It lists the commands."
    user = [m for m in bodies[0]["messages"] if m["role"] == "user"]
    assert "@Crystal what does /help do?" in str(user[-1]["content"])
