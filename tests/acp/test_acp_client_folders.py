"""TRUST-6: folders a client adds (ACP ``additionalDirectories``) go through
the one check of ``/access add`` (host/folders.py): resolved against the session's cwd,
never the agent process's; refused for ``/``, Home and the Crystal Home; noted in the
session; for that session only — never a signed grant that a later ``crystal run
--resume`` honours without the person. Attacked through a real ``crystal acp`` (the ACP
SDK's client over stdio, the agent started from another folder) and a real ``crystal
run``. On the old code ``/`` became a silent read-write grant, ``../shared`` resolved
against the agent's cwd, and the resumed run read outside the workspace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def text(prompt: str) -> list[dict]:
    return [{"type": "text", "text": prompt}]


def read_call(path: Path) -> dict:
    return {"tool_calls": [{"name": "read", "arguments": {"path": str(path)}}]}


async def test_client_folders_are_checked_noted_and_end_with_the_session(workspace, tmp_path, private_home):
    # The agent runs from tmp/a/b, the session's cwd is tmp/ws: "../shared" must mean
    # tmp/shared (beside the workspace), not tmp/a/shared (beside the agent).
    agent_cwd = tmp_path / "a" / "b"
    agent_cwd.mkdir(parents=True)
    (tmp_path / "a" / "shared").mkdir()
    (tmp_path / "a" / "shared" / "marker.txt").write_text("beside the agent\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "marker.txt").write_text("beside the workspace\n")
    home = Path(os.environ["HOME"])
    client = RecordingClient()
    replies = [read_call(shared / "marker.txt"), {"text": "Read it."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=agent_cwd, args=("--approval", "full")) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace), additional_directories=[
                "/", "~", str(private_home), "../shared"])).session_id
            await conn.prompt(session_id=sid, prompt=text("/access"))
            # The answer is a notification: the SDK client may hand it over just after
            # the prompt's response.
            await client.wait_for(lambda: "for this session only" in client.agent_text(sid), 10)
            listing = client.agent_text(sid)
            response = await conn.prompt(session_id=sid, prompt=text("read the shared marker"))
        bodies = server.bodies("chat")
    assert response.stop_reason == "end_turn"
    # Only the relative folder was added, resolved against the session's cwd.
    assert f"{shared} (rw), added by the client for this session only" in listing
    assert "\n/ (rw)" not in listing and f"{home} (rw)" not in listing
    assert str(tmp_path / "a" / "shared") not in listing
    # The refusals and the addition are said in the session (thoughts), one line each.
    thoughts = "".join(u.content.text for u in client.of("agent_thought_chunk", sid))
    assert "The client's folder / was not added: '/' is the root of the file system" in thoughts
    assert "The client's folder ~ was not added:" in thoughts and "your home folder" in thoughts
    assert f"The client's folder {private_home} was not added:" in thoughts
    assert f"The client added the folder {shared} (read and write) for this session only" in thoughts
    # Scoped to the session: the model could read there during it...
    assert "beside the workspace" in json.dumps(bodies[1]["messages"])
    # ...but the saved document grants nothing.
    assert SessionStore(workspace).load(sid)["directories"] == []

    # A later `crystal run --resume` does not honour the client's folder.
    with LLMServer([read_call(shared / "marker.txt"), {"text": "Could not."}]) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-test", OPENAI_API_KEY="sk-test")
        out = await asyncio.to_thread(
            subprocess.run, [CRYSTAL, "run", "read the shared marker again", "--resume", sid, "--workspace",
                             str(workspace), "--approval", "full", "--format", "jsonl"],
            capture_output=True, text=True, env=env, timeout=120)
        bodies = server.bodies("chat")
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines() if '"tool_result"' in line]
    assert len(results) == 1 and not results[0]["ok"]
    assert "outside the workspace" in results[0]["text"]
    assert "beside the workspace" not in json.dumps(bodies[1]["messages"][-1])


def test_access_add_refuses_root_and_home_and_resolves_against_the_workspace(workspace, tmp_path):
    """The person's /access add goes through the same check (a real `crystal run`)."""
    (tmp_path / "shared").mkdir()
    with LLMServer([]) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-test", OPENAI_API_KEY="sk-test")

        def run(command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([CRYSTAL, "run", command, "--workspace", str(workspace)], capture_output=True,
                                  text=True, env=env, timeout=120, cwd=tmp_path / "shared")

        root, home, relative = run("/access add /"), run("/access add ~"), run("/access add ../shared")
    assert root.returncode == 2 and "is the root of the file system" in root.stderr
    assert home.returncode == 2 and "your home folder" in home.stderr
    assert relative.returncode == 0, relative.stderr
    assert f"Added {tmp_path / 'shared'} (rw)." in relative.stdout
