"""SPEC §13 "Session files": a session file exists only once it holds a
prompt. Through a real `crystal run` against the loopback model server: a slash command
alone writes nothing to .crystal/sessions/; a prompt whose request failed (HTTP 500, a
URL nothing listens on) is kept, so it can be resumed, and /sessions says it was never
answered. On the old code `crystal run /help` left an empty "turns 0" session and the
failed runs were listed like any other, so these tests fail there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
NOT_ANSWERED = "(not answered: its last prompt got no reply)"


def crystal(workspace: Path, *args: str, base_url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=base_url, CRYSTAL_MODEL="gpt-test",
               OPENAI_API_KEY="sk-test")
    return subprocess.run([CRYSTAL, "run", *args, "--workspace", str(workspace)], capture_output=True, text=True,
                          env=env, timeout=120)


def session_files(workspace: Path) -> list[str]:
    folder = workspace / ".crystal" / "sessions"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("command", ["/help", "/mode plan", "/sessions", "/todos", "/access"])
def test_a_slash_command_alone_writes_no_session(workspace, command):
    with LLMServer([]) as server:
        out = crystal(workspace, command, base_url=server.base_url)
        assert server.requests == []
    assert out.returncode == 0, out.stderr
    assert session_files(workspace) == []


@pytest.mark.parametrize("failure", ["http 500", "nothing listening"])
def test_a_failed_request_keeps_the_prompt_and_sessions_says_it_was_never_answered(workspace, failure):
    with LLMServer([]) as server:  # an empty script: every request is answered HTTP 500
        url = server.base_url if failure == "http 500" else "http://127.0.0.1:9/v1"
        failed = crystal(workspace, "summarise the repository", "--format", "jsonl", base_url=url)
    assert failed.returncode == 2
    session_id = [json.loads(line) for line in failed.stdout.splitlines()][-1]["sessionId"]
    doc = SessionStore(workspace).load(session_id)
    assert doc["history"][0]["parts"][0]["text"] == "summarise the repository"
    assert doc["answered"] is False

    with LLMServer([]) as server:
        listed = crystal(workspace, "/sessions", base_url=server.base_url)
    row = next(line for line in listed.stdout.splitlines() if session_id in line)
    assert NOT_ANSWERED in row

    # Resumed, the prompt is there for the model, and once answered the mark goes.
    with LLMServer([{"text": "Here is the summary."}]) as server:
        again = crystal(workspace, "try again", "--resume", session_id, base_url=server.base_url)
        body = server.bodies("chat")[0]
    assert again.returncode == 0, again.stderr
    assert "summarise the repository" in json.dumps(body["messages"])
    with LLMServer([]) as server:
        listed = crystal(workspace, "/sessions", base_url=server.base_url)
    row = next(line for line in listed.stdout.splitlines() if session_id in line)
    assert NOT_ANSWERED not in row
    assert session_files(workspace) == [f"{session_id}.jsonl"]
