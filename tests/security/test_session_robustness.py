"""Input from the model or the file system never leaves a session unusable (ROBUST-1, ROBUST-2):
file names that are not UTF-8, absurdly nested tool arguments, and host files (config,
session documents) that are not UTF-8 or nest too deeply. Real `crystal run` processes
against the loopback model server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def crystal(args, *, env_extra=None, timeout=90):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([CRYSTAL, *args], capture_output=True, text=True, env=env, timeout=timeout)


def openai_env(server):
    return {"CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
            "OPENAI_API_KEY": "sk-test"}


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def bad_names(workspace: Path) -> None:
    root = os.fsencode(workspace)
    with open(os.path.join(root, b"caf\xe9-latin1.txt"), "wb") as handle:
        handle.write(b"needle in latin-1 \xe9\n")
    os.mkdir(os.path.join(root, b"dir\xff\xfe"))
    with open(os.path.join(root, b"dir\xff\xfe", b"inner\x80.txt"), "wb") as handle:
        handle.write(b"needle inside\n")
    (workspace / "plain.txt").write_text("needle plain\n")


def test_non_utf8_names_and_deep_arguments_end_in_results_and_the_session_saves(workspace):
    bad_names(workspace)
    replies = [
        {"tool_calls": [{"name": "list", "arguments": {"path": "."}},
                        {"name": "glob", "arguments": {"pattern": "**/*.txt"}},
                        {"name": "tree", "arguments": {}},
                        {"name": "grep", "arguments": {"pattern": "needle"}},
                        {"name": "bash", "arguments": {"command": "ls"}}]},
        # 300 levels deep: refused as a failed result, never a crash.
        {"tool_calls": [{"name": "read", "arguments": {"path": "plain.txt", "x": deep(300)}}]},
        # A lone surrogate sent by the model itself.
        {"tool_calls": [{"name": "write", "arguments": '{"path": "w.txt", "content": "x\\udcff\\ud800y"}'}]},
        {"text": "Listed."},
    ]
    with LLMServer(replies) as server:
        out = crystal(["run", "look around", "--workspace", str(workspace), "--format", "jsonl",
                       "--approval", "full"], env_extra=openai_env(server))
        bodies = server.bodies("chat")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[-1]["type"] == "turn_end" and events[-1]["stopReason"] == "end_turn"
    # Keyed by the call's position: read-only calls run side by side and may end in any order.
    order = {e["id"]: i for i, e in enumerate(e for e in events if e["type"] == "tool_call")}
    results = {e["name"] + str(order[e["id"]]): e for e in events if e["type"] == "tool_result"}
    assert all(results[k]["ok"] for k in ("list0", "glob1", "tree2", "grep3", "bash4"))
    # The names are shown with their bytes escaped, the same way everywhere.
    for key in ("list0", "glob1", "tree2"):
        assert "caf\\xe9-latin1.txt" in results[key]["text"], results[key]["text"]
    assert "dir\\xff\\xfe" in results["list0"]["text"]
    assert "needle in latin-1" in results["grep3"]["text"] and "caf\\xe9-latin1.txt" in results["grep3"]["text"]
    deep_result = results["read5"]
    assert not deep_result["ok"] and "nested at most 64 levels" in deep_result["text"]
    assert results["write6"]["ok"] and (workspace / "w.txt").read_text(encoding="utf-8") == "x\\xff\\ud800y"
    # The model got every result, escaped, in its next request.
    tool_messages = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 5 and "caf\\\\xe9-latin1.txt" in json.dumps(tool_messages)
    # The session document is valid UTF-8 JSON holding the turn.
    doc_path = workspace / ".crystal" / "sessions" / f"{events[-1]['sessionId']}.jsonl"
    assert all(json.loads(line) for line in doc_path.read_bytes().decode("utf-8").splitlines())
    doc = SessionStore(workspace).load(events[-1]["sessionId"])
    assert doc["transcript"][-1]["parts"][0]["text"] == "Listed."

    # The session is not broken for good: it resumes, and the next turn works.
    with LLMServer([{"tool_calls": [{"name": "list", "arguments": {"path": "."}}]}, {"text": "Again."}]) as server:
        again = crystal(["run", "once more", "--workspace", str(workspace), "--format", "jsonl",
                         "--resume", events[-1]["sessionId"], "--approval", "full"], env_extra=openai_env(server))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["stopReason"] == "end_turn"
    assert SessionStore(workspace).load(events[-1]["sessionId"])["turns"] == 2


def test_arguments_too_deep_for_the_json_parser_fail_the_call(workspace):
    """Deeper than Python's recursion limit: the argument text itself cannot be parsed."""
    raw = '{"path": ' + "[" * 5000 + "]" * 5000 + "}"
    with LLMServer([{"tool_calls": [{"name": "read", "arguments": raw}]}, {"text": "ok"}]) as server:
        out = crystal(["run", "go", "--workspace", str(workspace), "--format", "jsonl"],
                      env_extra=openai_env(server))
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    result = next(e for e in events if e["type"] == "tool_result")
    assert not result["ok"] and "not a valid JSON object" in result["text"]
    assert events[-1]["type"] == "turn_end"


@pytest.mark.parametrize("content, message", [
    (b'{"model": "caf\xe9"}', "is not valid UTF-8"),
    (("[" * 100_000 + "]" * 100_000).encode(), "nests deeper than"),
    (('{"forbidden": [' + '{"a": ' * 500 + "{}" + "}" * 500 + "]}").encode(), "nests deeper than"),
])
def test_bad_config_json_is_one_line_and_exit_2(workspace, content, message):
    home = Path(os.environ["CRYSTAL_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_bytes(content)
    out = crystal(["run", "hi", "--workspace", str(workspace)])
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "config" in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert (home / "config.json").read_bytes() == content  # nothing changed


@pytest.mark.parametrize("content, message", [
    (b'{"id": "s1", "transcript": [], "topic": "caf\xe9"}', "is not valid UTF-8"),
    (('{"id": "s1", "transcript": [{"role": "user", "parts": [' + '{"a": ' * 1000 + "{}" + "}" * 1000
      + "]}]}").encode(), "nests deeper than"),
])
def test_bad_session_document_is_one_line_and_exit_2(workspace, content, message):
    folder = workspace / ".crystal" / "sessions"
    folder.mkdir(parents=True)
    (folder / "s1.json").write_bytes(content)
    with LLMServer([{"text": "never asked"}]) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace), "--resume", "s1"],
                      env_extra=openai_env(server))
        asked = server.bodies("chat")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "ession document" in lines[0], out.stderr
    assert asked == []
    assert (folder / "s1.json").read_bytes() == content


# ----- one front per session (ROBUST-1, ROBUST-2) ------------------------------------------------

def first_session(workspace: Path) -> str:
    with LLMServer([{"text": "First answer."}]) as server:
        out = crystal(["run", "first", "--workspace", str(workspace), "--format", "jsonl"],
                      env_extra=openai_env(server))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])["sessionId"]


def start_slow_resume(workspace: Path, server: LLMServer, session_id: str) -> subprocess.Popen:
    """`crystal run --resume`, once its request to the model is in."""
    env = dict(os.environ)
    env.update(openai_env(server))
    proc = subprocess.Popen([CRYSTAL, "run", "second", "--workspace", str(workspace), "--format", "jsonl",
                             "--resume", session_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    deadline = time.monotonic() + 30
    while not server.bodies("chat") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.bodies("chat"), "the first front never asked the model"
    return proc


def test_a_second_front_resuming_an_open_session_is_refused_and_no_turn_is_lost(workspace):
    session_id = first_session(workspace)
    doc_path = workspace / ".crystal" / "sessions" / f"{session_id}.jsonl"
    assert doc_path.exists()
    # The first front's answer stops mid-stream until the second front has been refused:
    # it holds the session for as long as the second takes to start, however loaded the
    # machine (max_hang bounds the hold if the second front never returns).
    with LLMServer([{"text": "Slow second answer.", "chunk": 1, "hold_after": 3},
                    {"text": "never sent"}], max_hang=120) as server:
        holder = start_slow_resume(workspace, server, session_id)
        assert server.wait_held(timeout=60), "the first front's answer never started"
        other = crystal(["run", "third", "--workspace", str(workspace), "--format", "jsonl",
                         "--resume", session_id], env_extra=openai_env(server))
        server.release()
        out, err = holder.communicate(timeout=60)
        asked = len(server.bodies("chat"))
    assert other.returncode == 2
    lines = other.stderr.strip().splitlines()
    assert len(lines) == 1 and f"Session {session_id} is open in another Crystal front (process {holder.pid})" \
        in lines[0], other.stderr
    assert holder.returncode == 0, err
    assert asked == 1  # the refused front never reached the model
    doc = SessionStore(workspace).load(session_id)
    prompts = [m["parts"][0]["text"] for m in doc["transcript"] if m["role"] == "user"]
    assert prompts == ["first", "second"] and doc["turns"] == 2
    # Once the holder is done, the session can be resumed again.
    with LLMServer([{"text": "Third answer."}]) as server:
        third = crystal(["run", "third", "--workspace", str(workspace), "--resume", session_id],
                        env_extra=openai_env(server))
    assert third.returncode == 0, third.stderr
    assert SessionStore(workspace).load(session_id)["turns"] == 3


def test_a_killed_front_leaves_no_stale_lock(workspace):
    session_id = first_session(workspace)
    with LLMServer([{"text": "x", "hang": 30}]) as server:
        holder = start_slow_resume(workspace, server, session_id)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    with LLMServer([{"text": "Back."}]) as server:
        again = crystal(["run", "again", "--workspace", str(workspace), "--resume", session_id],
                        env_extra=openai_env(server))
    assert again.returncode == 0, again.stderr


def test_resuming_a_copied_document_continues_the_copy(workspace):
    session_id = first_session(workspace)
    folder = workspace / ".crystal" / "sessions"
    original = (folder / f"{session_id}.jsonl").read_bytes()
    (folder / "copy-1.jsonl").write_bytes(original)
    with LLMServer([{"text": "On the copy."}]) as server:
        out = crystal(["run", "on the copy", "--workspace", str(workspace), "--format", "jsonl",
                       "--resume", "copy-1"], env_extra=openai_env(server))
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[-1]["sessionId"] == "copy-1"
    assert any(e["type"] == "note" and "continues as copy-1" in e["text"] for e in events)
    assert (folder / f"{session_id}.jsonl").read_bytes() == original
    copy = SessionStore(workspace).load("copy-1")
    assert copy["id"] == "copy-1" and copy["turns"] == 2
