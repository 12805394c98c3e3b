"""Topic naming through the real ``crystal run`` (PH-11, SPEC §12 ``topicModel``):
the side model ``topicModel`` names the session, the recording keeps that request, a
replay answers it from the cassette, and a cassette recorded without one replays with
no note at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def run(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI"))}
    env.update(CRYSTAL_HOME=os.environ["CRYSTAL_HOME"], OPENAI_API_KEY="sk-test")  # topic naming on (default)
    return subprocess.run([CRYSTAL, "run", "Say hello to the team", "--workspace", str(workspace),
                           "--format", "jsonl", *args], capture_output=True, text=True, env=env, timeout=60)


def resume_hint(workspace: Path) -> str:
    """The last line of a text-mode run: the session it saved and how to continue it."""
    (path,) = (workspace / ".crystal" / "sessions").glob("*.jsonl")
    return (f"Session {path.stem} saved; continue it with: crystal run --resume {path.stem} "
            f"--workspace {workspace} \"…\"")


def session_doc(workspace: Path) -> dict:
    (path,) = (workspace / ".crystal" / "sessions").glob("*.jsonl")
    return SessionStore(workspace).load(path.stem)


def test_topic_model_names_the_session_is_recorded_and_replayed(private_home, workspace, tmp_path):
    cassette = workspace / ".crystal" / "cassettes" / "default.json"
    with LLMServer([{"text": "Hello, team!"}, {"text": "\"Greeting the team.\""}]) as server:
        (private_home / "config.json").write_text(json.dumps({
            "provider": "openai", "baseUrl": server.base_url, "model": "gpt-big", "topicModel": "gpt-small",
            "record": True}))
        recorded = run(workspace)
        bodies = server.bodies("chat")
    assert recorded.returncode == 0, recorded.stderr
    # The turn went to the session's model, the one naming request to the small model.
    assert [b["model"] for b in bodies] == ["gpt-big", "gpt-small"]
    assert "tools" not in bodies[1] and "Say hello to the team" in json.dumps(bodies[1]["messages"])
    assert session_doc(workspace)["topic"] == "Greeting the team"
    interactions = json.loads(cassette.read_text())["interactions"]
    assert [(i["match"]["purpose"], i["model"]) for i in interactions] == [("turn", "gpt-big"), ("topic", "gpt-small")]

    # Replay in a fresh copy of the workspace: the cassette answers the naming request too.
    again = tmp_path / "again"
    (again / ".crystal" / "cassettes").mkdir(parents=True)
    (again / ".crystal" / "cassettes" / "default.json").write_text(cassette.read_text())
    (private_home / "config.json").write_text(json.dumps({"provider": "replay", "topicModel": "gpt-small"}))
    replayed = run(again)
    assert replayed.returncode == 0, replayed.stderr
    events = [json.loads(line) for line in replayed.stdout.splitlines()]
    assert [e["type"] for e in events if e["type"] in ("note", "error")] == []
    assert session_doc(again)["topic"] == "Greeting the team"

    # A cassette recorded without the naming request replays quietly, unnamed.
    bare = tmp_path / "bare"
    (bare / ".crystal" / "cassettes").mkdir(parents=True)
    (bare / ".crystal" / "cassettes" / "default.json").write_text(
        json.dumps({"version": 1, "interactions": interactions[:1]}))
    quiet = run(bare, "--format", "text")
    assert quiet.returncode == 0, quiet.stderr
    # No note: stderr holds only the line every text-mode run ends with (how to continue).
    assert quiet.stdout == "Hello, team!\n" and quiet.stderr.splitlines() == [resume_hint(bare)]
    assert session_doc(bare)["topic"] is None


def test_a_bad_topic_model_never_fails_the_turn(private_home, workspace):
    with LLMServer([{"text": "Hi."}, {"status": 404, "message": "model gpt-nope not found"}]) as server:
        (private_home / "config.json").write_text(json.dumps({
            "provider": "openai", "baseUrl": server.base_url, "model": "gpt-big", "topicModel": "gpt-nope"}))
        out = run(workspace, "--format", "text")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hi.\n"
    line, hint = out.stderr.splitlines()
    assert hint == resume_hint(workspace)
    assert line.startswith("note: The session was left unnamed: the topic request failed: ") and not line.endswith("..")
