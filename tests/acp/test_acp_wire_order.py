"""On the wire, an answer's updates come before the answer (ACP; docs/acp.md).

A client may hand notifications to its code after the response it is waiting on (the
Python SDK resolves responses at once and dispatches notifications through a queue), but
what Crystal writes must be in order: every ``session/update`` a request produced is on
stdout before that request's response. These tests read ``crystal acp``'s stdout raw,
line by line, with no SDK in between: a prompt's tool call and answer, a command's
(``/mode``) update, and a ``session/load``'s replayed conversation.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import CRYSTAL, model_env


class RawAgent:
    """``crystal acp`` as a child process, its stdout read as JSON lines in order."""

    def __init__(self, workspace: Path, server: LLMServer):
        env = dict(os.environ)
        env.update(model_env(server))
        env["CRYSTAL_APPROVAL"] = "full"
        self.process = subprocess.Popen([CRYSTAL, "acp"], cwd=workspace, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Send one request; return its response and every message written before it."""
        self.next_id += 1
        ident = self.next_id
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                             "params": params}) + "\n")
        self.process.stdin.flush()
        before: list[dict[str, Any]] = []
        while True:
            message = self.lines.get(timeout=60)
            assert message is not None, f"the agent ended before answering {method}"
            self.seen.append(message)
            if message.get("id") == ident and "method" not in message:
                assert "error" not in message, message
                return message, before
            before.append(message)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        assert self.process.stderr is not None
        self.process.stderr.close()
        assert self.process.stdout is not None
        self.process.stdout.close()


def updates(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(kind, text or title) of each session/update among ``messages``."""
    out = []
    for message in messages:
        if message.get("method") != "session/update":
            continue
        update = message["params"]["update"]
        content = update.get("content")
        text = content.get("text", "") if isinstance(content, dict) else ""
        out.append((update["sessionUpdate"], text or update.get("title", "") or update.get("currentModeId", "")))
    return out


def test_a_prompts_tool_call_and_answer_are_written_before_its_response_and_a_load_replays_first(workspace):
    replies = [{"text": "Writing it.", "tool_calls": [{"name": "write", "arguments": {
                   "path": "note.txt", "content": "hi\n"}}]},
               {"text": "The note is written."}]
    with LLMServer(replies) as server:
        agent = RawAgent(workspace, server)
        try:
            agent.request("initialize", {"protocolVersion": 1})
            created, _ = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})
            sid = created["result"]["sessionId"]
            answered, before = agent.request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "Leave a note."}]})
            assert answered["result"]["stopReason"] == "end_turn"
            kinds = updates(before)
            texts = "".join(text for kind, text in kinds if kind == "agent_message_chunk")
            assert "Writing it." in texts and "The note is written." in texts, kinds
            assert any(kind == "tool_call" for kind, _ in kinds), kinds
            assert any(kind == "tool_call_update" for kind, _ in kinds), kinds

            # A command's update (the new mode) comes before the command's response too.
            _, before = agent.request("session/prompt", {
                "sessionId": sid, "prompt": [{"type": "text", "text": "/mode plan"}]})
            assert ("current_mode_update", "plan") in updates(before), updates(before)
        finally:
            agent.close()
        assert (workspace / "note.txt").read_text() == "hi\n"

        # A second agent loads the session: the replayed conversation comes before the
        # load's response.
        agent = RawAgent(workspace, server)
        try:
            agent.request("initialize", {"protocolVersion": 1})
            _, before = agent.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            replayed = updates(before)
            assert ("user_message_chunk", "Leave a note.") in replayed, replayed
            assert any(kind == "agent_message_chunk" and "The note is written." in text
                       for kind, text in replayed), replayed
        finally:
            agent.close()
