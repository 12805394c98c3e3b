"""Crystal under Jupyter AI's own classes, in this environment
(docs/acp.md "Jupyter AI"). jupyter-ai 3 is in the test extra: nothing is installed here.

A ``PersonaManager`` on a ``YChat`` document finds the Crystal persona through the
``jupyter_ai.personas`` entry point; its default command (no ``CRYSTAL_ACP_COMMAND``:
this Python, ``-m crystal_kernel.cli acp``) starts the real agent through Jupyter AI's
``JaiAcpClient``. The first message, ``/help``, reaches Crystal behind Jupyter AI's
"System note" and runs as a command; ``@Crystal /help`` too; a question then reaches the
loopback model, Crystal writes a file in the chat's folder and answers; shutting the
personas down ends the agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from jupyter_ai_persona_manager import PersonaManager
from jupyterlab_chat.models import NewMessage, User
from jupyterlab_chat.ychat import YChat

from crystal_kernel.testing.llm_server import LLMServer

ANSWER = "Hello from Crystal in Jupyter AI."


@pytest.fixture
def jupyter_ai_env(monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / ".crystal").mkdir(parents=True)
    monkeypatch.delenv("CRYSTAL_ACP_COMMAND", raising=False)
    for name, value in {
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_TOPIC_NAMING": "off",
        # No one clicks Jupyter AI's permission buttons here: allow every call.
        "CRYSTAL_APPROVAL": "full",
        # Only entry-point personas (the vendored ones need CLIs that are not here).
        "JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY": "1",
    }.items():
        monkeypatch.setenv(name, value)
    return tmp_path


async def wait_for(check, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return bool(check())


@pytest.mark.timeout(240)
async def test_crystal_answers_and_runs_commands_in_jupyter_ai_chat(jupyter_ai_env: Path, monkeypatch):
    root = jupyter_ai_env
    workspace = root / "project"
    workspace.mkdir()
    replies = [
        {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "written by crystal\n"}}]},
        # Held after the answer's text (the role event, then 9 pieces of 4 characters),
        # before the stream's end.
        {"text": ANSWER, "hold_after": 10},
    ]
    with LLMServer(replies) as server:
        for name, value in {"CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url,
                            "CRYSTAL_MODEL": "gpt-test", "OPENAI_API_KEY": "k"}.items():
            monkeypatch.setenv(name, value)
        chat = YChat()
        chat.initial_path = "project/notes.chat"
        manager = PersonaManager(chat=chat, root_dir=str(root), event_loop=asyncio.get_running_loop(),
                                 log=logging.getLogger("jupyter-ai-test"))
        names = {p.name: p for p in manager.personas.values()}
        assert "Crystal" in names, sorted(names)
        persona = names["Crystal"]
        chat.set_user(User(username="person", name="Person", display_name="Person"))

        def send(body: str) -> None:
            message_id = chat.add_message(NewMessage(body=body, sender="person"), trigger_actions=[])
            message = chat.get_message(message_id)
            message.metadata = {PersonaManager.TO_PERSONA_METADATA_KEY: persona.id}
            manager.on_chat_message(chat.get_id(), message)

        def replies_in_chat() -> list[str]:
            return [m.body for m in chat.get_messages() if m.sender == persona.id]

        try:
            send("/help")  # the session's first message: Jupyter AI puts its system note first
            assert await wait_for(lambda: any("- `/help`: this list" in b for b in replies_in_chat())), \
                replies_in_chat()
            send("@Crystal /help")
            assert await wait_for(lambda: sum("- `/help`: this list" in b for b in replies_in_chat()) == 2), \
                replies_in_chat()
            assert server.bodies() == [], f"a command reached the model: {server.bodies()}"

            send("@Crystal Say hello and leave a note.")
            assert await wait_for(lambda: any(ANSWER in b for b in replies_in_chat())), replies_in_chat()
            assert (workspace / "hello.txt").read_text() == "written by crystal\n"
            # The answer shows as it streams, before the turn ends; the session file is
            # written when the turn ends (held here, so that the test never reads the
            # folder in between: under load it did, found no file, and shut the agent
            # down mid-prompt, "ConnectionError: Connection closed").
            sessions_folder = workspace / ".crystal" / "sessions"
            assert server.wait_held(0) and not list(sessions_folder.glob("*.jsonl"))
            server.release()
            assert await wait_for(lambda: list(sessions_folder.glob("*.jsonl"))), "the turn ended and was saved"
            sessions = list(sessions_folder.glob("*.jsonl"))
            assert [s.stem for s in sessions] == [chat.get_metadata()["acp_session_ids"][persona.id]], \
                (sessions, chat.get_metadata())
            process = await persona.get_agent_subprocess()
        finally:
            await manager.shutdown_personas()
        await asyncio.wait_for(process.wait(), 15)
    assert process.returncode is not None
    assert len(server.bodies("chat")) == 2, [b.get("messages", [])[-1:] for b in server.bodies("chat")]
