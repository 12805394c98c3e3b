"""`crystal acp` at the edges of its input: end of input right after a request, and
regular files instead of pipes (`crystal acp < requests.jsonl > replies.jsonl`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import CRYSTAL, model_env


def requests(workspace) -> str:
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
             {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}}]
    return "".join(json.dumps(line) + "\n" for line in lines)


def env_for(server) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model_env(server))
    return env


def test_input_closed_right_after_session_new_ends_quietly(workspace):
    """The input (a pipe) holds initialize and session/new and then ends at once: the agent
    exits 0 with nothing on stderr (no traceback from the commands update it could no
    longer send)."""
    with LLMServer([]) as server:
        for _ in range(3):  # the race is in the agent's shutdown; try it a few times
            out = subprocess.run([CRYSTAL, "acp"], input=requests(workspace), capture_output=True, text=True,
                                 cwd=workspace, env=env_for(server), timeout=60)
            assert out.returncode == 0, out.stderr
            assert out.stderr == ""


def replies(text: str) -> dict:
    """The JSON-RPC answers by id, and the session updates, from the agent's output."""
    answers, updates = {}, []
    for line in text.splitlines():
        message = json.loads(line)
        if "id" in message:
            answers[message["id"]] = message
        else:
            updates.append(message)
    return {"answers": answers, "updates": updates}


def check_replies(text: str, workspace) -> None:
    got = replies(text)
    assert sorted(got["answers"]) == [1, 2]
    assert got["answers"][1]["result"]["agentInfo"]["name"] == "crystal"
    session_id = got["answers"][2]["result"]["sessionId"]
    # Updates for a request answered before the end of input still go out (the new
    # session's command list).
    kinds = [(u["params"]["sessionId"], u["params"]["update"]["sessionUpdate"]) for u in got["updates"]]
    assert (session_id, "available_commands_update") in kinds


@pytest.mark.parametrize("stdin_kind,stdout_kind", [("file", "file"), ("file", "pipe"), ("pipe", "file")])
def test_regular_files_as_stdin_and_stdout(workspace, tmp_path, stdin_kind, stdout_kind):
    """`crystal acp < requests.jsonl > replies.jsonl`: regular files work like pipes; every
    request read before the end of input is answered, then the agent exits 0."""
    request_file, reply_file = tmp_path / "requests.jsonl", tmp_path / "replies.jsonl"
    request_file.write_text(requests(workspace))
    with LLMServer([]) as server, open(request_file) as stdin, open(reply_file, "w") as stdout:
        out = subprocess.run(
            [CRYSTAL, "acp"], cwd=workspace, env=env_for(server), timeout=60,
            stdin=stdin if stdin_kind == "file" else None,
            input=requests(workspace) if stdin_kind == "pipe" else None,
            stdout=stdout if stdout_kind == "file" else subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
    assert out.stderr == ""
    assert out.returncode == 0
    check_replies(reply_file.read_text() if stdout_kind == "file" else out.stdout, workspace)


def test_last_request_without_newline_and_empty_input(workspace, tmp_path):
    request_file = tmp_path / "requests.jsonl"
    request_file.write_text(requests(workspace).rstrip("\n"))
    with LLMServer([]) as server:
        with open(request_file) as stdin:
            out = subprocess.run([CRYSTAL, "acp"], cwd=workspace, env=env_for(server), timeout=60, stdin=stdin,
                                 capture_output=True, text=True)
        assert (out.returncode, out.stderr) == (0, "")
        check_replies(out.stdout, workspace)
        # /dev/null is a character device the event loop cannot watch: no input, no output.
        out = subprocess.run([CRYSTAL, "acp"], cwd=workspace, env=env_for(server), timeout=60,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True)
        assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


async def test_input_closed_during_a_prompt_answers_it_cancelled(workspace):
    """An interactive client closes the input while the model streams: the prompt is
    cancelled and still answered (`stopReason: cancelled`), the partial text went out,
    and the agent exits 0 with nothing on stderr."""
    replies_ = [{"text": "Partial answer that", "chunk": 4, "hang": 30, "hang_after": 2}]
    with LLMServer(replies_) as server:
        proc = await asyncio.create_subprocess_exec(
            CRYSTAL, "acp", cwd=workspace, env=env_for(server), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            async def read() -> dict:
                return json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))

            proc.stdin.write(requests(workspace).encode())
            seen = [await read(), await read()]
            session_id = seen[1]["result"]["sessionId"]
            prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                      "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "talk"}]}}
            proc.stdin.write((json.dumps(prompt) + "\n").encode())
            while not any(m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
                          for m in seen):
                seen.append(await read())
            proc.stdin.close()
            rest = await asyncio.wait_for(proc.stdout.read(), 20)
            seen += [json.loads(line) for line in rest.decode().splitlines()]
            assert await asyncio.wait_for(proc.wait(), 20) == 0
            assert (await proc.stderr.read()).decode() == ""
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    answer = [m for m in seen if m.get("id") == 3]
    assert answer and answer[0]["result"]["stopReason"] == "cancelled"


def test_a_line_that_is_not_json_gets_a_parse_error_and_one_line(workspace):
    """JSON-RPC 2.0: text that is not JSON is answered with error -32700 (id null), JSON
    that is not an object with -32600; stderr says so in one line each, with no traceback,
    and the requests around them are answered as usual (SPEC §11: one English line)."""
    garbage = "hello, is this the agent?\n[1, 2, 3]\n"
    with LLMServer([]) as server:
        out = subprocess.run([CRYSTAL, "acp"], input=garbage + requests(workspace), capture_output=True, text=True,
                             cwd=workspace, env=env_for(server), timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[0] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    assert lines[1] == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
    check_replies("\n".join(json.dumps(line) for line in lines[2:]), workspace)
    assert out.stderr.splitlines() == [
        "crystal acp: a line of input is not JSON; answered with JSON-RPC error -32700 (parse error).",
        "crystal acp: a line of input is not a JSON object; answered with JSON-RPC error -32600 (invalid request).",
    ], out.stderr
    assert "hello" not in out.stderr  # the client's text is not echoed to the terminal
