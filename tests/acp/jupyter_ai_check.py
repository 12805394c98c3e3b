"""Scripted check: Crystal under Jupyter AI's ACP client (``jupyter-ai-acp-client``).

Not collected by pytest: jupyter-ai-acp-client pins agent-client-protocol<0.12 and
brings jupyterlab-chat and two server extensions, so it is not in the project's
environment. Run it from an environment that has it (docs/acp.md, "Jupyter AI")::

    python -m venv /tmp/jai && /tmp/jai/bin/pip install jupyter-ai-acp-client
    /tmp/jai/bin/pip install --no-deps -e .
    CRYSTAL_ACP_COMMAND="$PWD/.venv/bin/crystal acp" /tmp/jai/bin/python tests/acp/jupyter_ai_check.py

What it shows, with Jupyter AI's own classes and no browser: the PersonaManager finds
the Crystal persona through the ``jupyter_ai.personas`` entry point; a chat message
routed to it starts ``crystal acp`` through Jupyter AI's JaiAcpClient, Crystal calls a
tool and answers from the loopback model, and the answer lands in the chat document;
shutting the personas down ends the Crystal process. Prints one line per step and
exits 0 when every step held.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from jupyter_ai_persona_manager import PersonaManager
from jupyterlab_chat.models import NewMessage, User
from jupyterlab_chat.ychat import YChat

from crystal_kernel.testing.llm_server import LLMServer

ANSWER = "Hello from Crystal in Jupyter AI."


def step(ok: bool, text: str) -> None:
    print(("ok   " if ok else "FAIL ") + text, flush=True)
    if not ok:
        sys.exit(1)


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="crystal-jai-"))
    home = root / "home"
    (home / ".crystal").mkdir(parents=True)
    workspace = root / "project"
    workspace.mkdir()
    replies = [
        {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "written by crystal\n"}}]},
        {"text": ANSWER},
    ]
    server = LLMServer(replies).start()
    os.environ.update({
        "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_TOPIC_NAMING": "off",
        "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
        "OPENAI_API_KEY": "k",
        # No one clicks Jupyter AI's permission buttons here: allow every call.
        "CRYSTAL_APPROVAL": "full",
        # Only entry-point personas (the vendored ones need CLIs that are not here).
        "JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY": "1",
    })
    log = logging.getLogger("jai-check")
    logging.basicConfig(level=logging.ERROR)

    chat = YChat()
    chat.initial_path = "project/notes.chat"
    manager = PersonaManager(chat=chat, root_dir=str(root), event_loop=asyncio.get_running_loop(), log=log)
    names = {p.name: p for p in manager.personas.values()}
    step("Crystal" in names, f"PersonaManager registered the personas {sorted(names)}")
    persona = names["Crystal"]

    chat.set_user(User(username="person", name="Person", display_name="Person"))
    message_id = chat.add_message(NewMessage(body="Say hello and leave a note.", sender="person"), trigger_actions=[])
    message = chat.get_message(message_id)
    message.metadata = {PersonaManager.TO_PERSONA_METADATA_KEY: persona.id}
    started = time.monotonic()
    manager.on_chat_message(chat.get_id(), message)

    def answer() -> str:
        return "".join(m.body for m in chat.get_messages() if m.sender == persona.id)

    while ANSWER not in answer() and time.monotonic() - started < 60:
        await asyncio.sleep(0.1)
    if os.environ.get("CRYSTAL_CHECK_VERBOSE"):
        for m in chat.get_messages():
            print(repr(m.sender), m.body[:600], m.metadata)
    step(ANSWER in answer(), f"the chat shows Crystal's answer ({time.monotonic() - started:.1f} s)")
    step((workspace / "hello.txt").read_text() == "written by crystal\n",
         "Crystal's write tool ran in the chat's folder")
    sessions = list((workspace / ".crystal" / "sessions").glob("*.jsonl"))
    acp_ids = chat.get_metadata().get("acp_session_ids", {})
    step(len(sessions) == 1 and sessions[0].stem == acp_ids.get(persona.id),
         "the chat's ACP session id is the saved Crystal session")

    process = await persona.get_agent_subprocess()
    await manager.shutdown_personas()
    try:
        await asyncio.wait_for(process.wait(), 10)
    except asyncio.TimeoutError:
        pass
    step(process.returncode is not None, f"shutting the personas down ended crystal acp (exit {process.returncode})")
    server.stop()
    print("Crystal answered under jupyter-ai-acp-client.")


if __name__ == "__main__":
    asyncio.run(main())
