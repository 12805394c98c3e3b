"""TRUST-4 attacks: a tool that prints `env` must not see the model keys, and no key
value reaches a file the host writes (session document, job log, job status) — even
when the person lets tools see the keys (`passKeysToTools: true`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.events import ToolResultEvent
from crystal_kernel.core.secrets import child_environment
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.jobs.logfile import RotatingLog
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply

OPENAI = "sk-openai-test-0123456789abcdef"
ANTHROPIC = "sk-ant-test-abcdef0123456789"
GATEWAY = "gw-key-test-9876543210"


@pytest.fixture
def keys(monkeypatch, private_home):
    """Provider keys in the host's environment, one behind a custom apiKeyEnv."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC)
    monkeypatch.setenv("MY_GATEWAY_KEY", GATEWAY)
    (private_home / "config.json").write_text(json.dumps({"apiKeyEnv": "MY_GATEWAY_KEY"}))
    return (OPENAI, ANTHROPIC, GATEWAY)


def files_under(folder: Path) -> str:
    text = []
    for path in folder.rglob("*"):
        if path.is_file():
            text.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(text)


async def env_turn(workspace: Path, **overrides):
    """A turn whose model runs `env` in bash and as a background job, then reads its log."""
    provider = ScriptedProvider([
        tool_reply([("bash", {"command": "env"})]),
        tool_reply([("bash_start", {"command": "env; echo JOB-DONE"})]),
        tool_reply([("bash", {"command": "sleep 1"})]),
        tool_reply([("bash_logs", {"job_id": "j1"})]),
        text_reply("done"),
    ])
    session = open_session(SessionOptions(workspace, overrides={"approval": "full", **overrides}, provider=provider,
                           person_present=False))
    events = [e async for e in run_turn(session, "print the environment")]
    session.save()
    await session.close()
    return session, [e for e in events if isinstance(e, ToolResultEvent)]


async def test_bash_and_jobs_see_no_key_and_nothing_persisted_holds_one(workspace, keys):
    session, results = await env_turn(workspace)
    assert results[0].ok and "PATH=" in results[0].text
    seen = "\n".join(r.text for r in results)
    assert "JOB-DONE" in seen
    for key in keys:
        assert key not in seen, "a child process saw a model key"
    persisted = files_under(workspace / ".crystal")
    assert "JOB-DONE" in persisted  # the job log and the session document were written
    for key in keys:
        assert key not in persisted


async def test_pass_keys_to_tools_shows_keys_to_tools_but_never_persists_them(workspace, keys, private_home):
    (private_home / "config.json").write_text(json.dumps({"apiKeyEnv": "MY_GATEWAY_KEY", "passKeysToTools": True}))
    session, results = await env_turn(workspace)
    seen = "\n".join(r.text for r in results)
    assert OPENAI in seen and GATEWAY in seen  # the person opted in
    persisted = files_under(workspace / ".crystal")
    for key in keys:
        assert key not in persisted, "a key value reached a file the host wrote"
    doc = session.store.load(session.id)
    assert "[redacted OPENAI_API_KEY]" in json.dumps(doc)


async def test_exec_tool_and_mcp_server_environments_hold_no_key(workspace, keys, private_home):
    from crystal_kernel.core.trust import trust_all

    folder = workspace / ".crystal" / "tools" / "envdump"
    folder.mkdir(parents=True)
    (folder / "dump.py").write_text("import os\nprint('\\n'.join(f'{k}={v}' for k, v in os.environ.items()))\n")
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "dump.py"], "tools": [
        {"name": "envdump", "description": "Prints the environment.", "output": "text"}]}))
    trust_all(private_home, workspace)
    provider = ScriptedProvider([tool_reply([("envdump", {})]), text_reply("done")])
    session = open_session(SessionOptions(workspace, overrides={"approval": "full"}, provider=provider, person_present=False))
    results = [e async for e in run_turn(session, "dump") if isinstance(e, ToolResultEvent)]
    assert results[0].ok and "CRYSTAL_WORKSPACE=" in results[0].text
    for key in keys:
        assert key not in results[0].text

    from crystal_kernel.mcp.config import ServerConfig
    from crystal_kernel.mcp.connection import ServerConnection

    conn = ServerConnection(ServerConfig(name="s", source=folder, transport="stdio", command="x"),
                            workspace, session.id, session.config)
    env = conn._child_env()
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_GATEWAY_KEY", "CRYSTAL_HOME"} & set(env)


def test_child_environment_is_the_one_place(keys):
    """The builder every child uses: no provider key, no apiKeyEnv key, no CRYSTAL_HOME."""
    env = child_environment()
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_GATEWAY_KEY", "CRYSTAL_HOME"} & set(env)
    assert "PATH" in env


def test_a_key_split_between_two_log_writes_is_masked(tmp_path, keys):
    """Job output arrives in pieces; a key cut in two by the pipe is still masked."""
    log = RotatingLog(tmp_path / "j1.log", 1 << 20)
    data = f"before {OPENAI} after\n".encode()
    cut = data.index(OPENAI.encode()) + 7
    log.write(data[:cut], cut)
    log.write(data[cut:], len(data))
    log.close()
    written = (tmp_path / "j1.log").read_bytes()
    assert OPENAI.encode() not in written
    assert len(written) == len(data) and written.startswith(b"before ") and written.endswith(b" after\n")
