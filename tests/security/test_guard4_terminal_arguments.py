"""GUARD-4 in the interactive `crystal`: an approval shows every argument of the call,
whole, escaped for the terminal (TRUST-6). It did not: a call with a string
``command`` argument was shown as ``$ <command>`` only, and the ``→ tool {…}`` line cut
at 200 characters, so ``run_program{command: <230 chars>, args: [push, --force]}`` was
approved with ``args`` nowhere on screen.

A real `crystal` in a real terminal (tmux, tests/cli/tmux_terminal.py), an exec tool of
the person's Home with two arguments, the loopback model server scripting the call. The
unit tests below check the same text (and the unsandboxed line, SANDBOX-1) where a
front builds it: the terminal's ``approval_text`` and the ACP permission request.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from crystal_kernel.acp.interaction import AcpInteraction
from crystal_kernel.cli.terminal_person import approval_text
from crystal_kernel.core.interaction import ApprovalRequest
from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.tmux_terminal import TmuxTerminal

CRYSTAL = str(Path(sys.executable).parent / "crystal")
# 230 characters of command; what follows it in the arguments must still be seen.
LONG = "git -c core.sshCommand='ssh -o StrictHostKeyChecking=no' " + "x" * 161 + " origin main"
NOTE = "It runs unsandboxed in the kernel: outside the sandbox."


def program_set(home: Path) -> None:
    """A Home exec set (the person's own, no trust step) with a two-argument tool."""
    folder = home / "tools" / "programs"
    folder.mkdir(parents=True)
    schema = {"type": "object", "properties": {"command": {"type": "string"},
                                               "args": {"type": "array", "items": {"type": "string"}}},
              "required": ["command"]}
    (folder / "tools.json").write_text(json.dumps({"command": ["true"], "tools": [
        {"name": "run_program", "description": "Run a program.", "inputSchema": schema, "output": "text"}]}))


def test_the_terminal_approval_shows_every_argument_of_a_long_command__GUARD_4(workspace, private_home):
    """The approval shows the command whole and ``args`` after it: ``--force`` is on the
    screen before the person answers (it was not)."""
    assert len(LONG) >= 230
    program_set(private_home)
    call = {"name": "run_program", "arguments": {"command": LONG, "args": ["push", "--force"]}}
    with LLMServer([{"tool_calls": [call]}, {"text": "Not pushed."}]) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-test", OPENAI_API_KEY="sk-test")
        line = " ".join(shlex.quote(a) for a in [CRYSTAL, "--workspace", str(workspace)])
        term = TmuxTerminal(f"{line}; echo EXIT=$?; sleep 120", env)
        try:
            term.wait_for("›", timeout=90)
            term.type("push it")
            term.key("Enter")
            screen = term.wait_for("choice [1/2/3]:")
            term.deny("no force push")
            term.wait_for("Not pushed.")
        finally:
            term.close()
        denied = [m["content"] for m in server.bodies("chat")[-1]["messages"] if m["role"] == "tool"]
    approval = screen[screen.rindex("Allow run_program?"):]
    assert "--force" in approval, approval
    assert f"  $ {LONG}" in approval and 'with {"args": ["push", "--force"]}' in approval, approval
    assert "no force push" in denied[-1], "denied: the tool never ran"


def _request(**extra: Any) -> ApprovalRequest:
    return ApprovalRequest(call_id="c1", tool="python", arguments={"code": "print(1)"}, risk="execute",
                           authority="workspace", **extra)


def test_the_terminal_and_acp_forms_say_a_call_runs_unsandboxed__SANDBOX_1(workspace):
    """The host's sandbox line (ApprovalRequest.sandbox_note) reaches the terminal prompt
    and the ACP permission request; a call without one shows no such line."""
    from crystal_kernel.host.bootstrap import SessionOptions, open_session

    session = open_session(SessionOptions(str(workspace), person_present=False, saves=False))

    class Client:
        """The ACP connection: records the permission request and rejects it."""

        def __init__(self) -> None:
            self.asked: list[Any] = []

        async def request_permission(self, session_id: str, tool_call: Any, options: Any) -> Any:
            self.asked.append(tool_call)
            return None

    async def ask(request: ApprovalRequest) -> str:
        await session.prepare_tools()
        client = Client()
        announced = asyncio.Event()
        announced.set()
        front = AcpInteraction(client, session, "s1", elicitation=False, announced=lambda _id: announced)
        await front.ask_approval(request)
        return json.dumps([c.model_dump(mode="json") for c in client.asked[0].content or []])

    try:
        assert NOTE in approval_text(session, _request(sandbox_note=NOTE), colour=False)
        assert "unsandboxed" not in approval_text(session, _request(), colour=False)
        assert NOTE in asyncio.run(ask(_request(sandbox_note=NOTE)))
        assert "unsandboxed" not in asyncio.run(ask(_request()))
    finally:
        asyncio.run(session.close())
