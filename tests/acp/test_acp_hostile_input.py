"""`crystal acp` against hostile or malformed client input (docs/acp.md "What the
agent refuses"). The client's every field is untrusted: each bad one gets a JSON-RPC
error with one English line (or a documented note), changes nothing on disk outside the
workspace and the Crystal Home, and the agent reads on, bounded in memory (SPEC §11 one
English line; ROBUST-1; TRUST-6).

Each test drives a real `crystal acp` process over its stdin and stdout, raw JSON-RPC
lines with no SDK in between (the SDK's client would refuse to send most of them), on
the loopback model server. On the old code: a deeply nested line ended the agent (exit
1, every session gone); the request after an overlong line was lost (the library glued
it to the overlong line) and such a line was held whole in memory; a lone surrogate
failed the prompt with an internal error; a relative ``cwd`` opened a workspace in the
agent's own folder and ``/`` or the Crystal Home were workspaces; a refused
``session/load`` closed the open session of that id; an error or a malformed answer to a
permission request failed the whole turn; and stderr carried a traceback for every
error answered."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import CRYSTAL, model_env

MIB = 1024 * 1024


class RawAgent:
    """`crystal acp` as a child process: raw bytes in, JSON lines out, in order."""

    def __init__(self, cwd: Path, server: LLMServer, *args: str):
        env = dict(os.environ)
        env.update(model_env(server))
        self.process = subprocess.Popen([CRYSTAL, "acp", *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.buffer = b""
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.write((json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
                    + "\n").encode())
        return self.next_id

    def read(self, timeout: float = 60) -> dict[str, Any]:
        assert self.process.stdout is not None
        end = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, end - time.monotonic()))
            assert ready, f"no answer within {timeout} s; seen: {self.seen[-3:]}"
            chunk = os.read(self.process.stdout.fileno(), MIB)
            assert chunk, f"the agent ended (exit {self.process.wait()}): {self.stderr()}"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message = json.loads(line)
        self.seen.append(message)
        return message

    def answer(self, ident: Any) -> dict[str, Any]:
        """The response to request ``ident`` (id null: the next error without an id)."""
        while True:
            message = self.read()
            if "method" not in message and message.get("id") == ident:
                return message

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.answer(self.send(method, params))

    def peak_memory_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(60)
        return code

    def __enter__(self) -> RawAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:  # a failed test: no process is left behind
            self.process.kill()
            self.process.wait()

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace") if self.process.poll() is not None else ""


def start(cwd: Path, server: LLMServer, *args: str) -> RawAgent:
    agent = RawAgent(cwd, server, *args)
    assert "result" in agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return agent


def new_session(agent: RawAgent, cwd: Path, **params: Any) -> str:
    reply = agent.call("session/new", {"cwd": str(cwd), "mcpServers": [], **params})
    assert "result" in reply, reply
    return str(reply["result"]["sessionId"])


def error(reply: dict[str, Any]) -> tuple[int, str]:
    assert "error" in reply, reply
    return reply["error"]["code"], reply["error"]["message"]


def thoughts(agent: RawAgent) -> str:
    return "".join(m["params"]["update"]["content"]["text"] for m in agent.seen
                   if m.get("method") == "session/update"
                   and m["params"]["update"]["sessionUpdate"] == "agent_thought_chunk")


def notes_of_one_turn(agent, workspace, **session_options) -> str:
    """Open a session with ``session_options``, run one prompt to its end, and return
    the notes (thoughts) the client was sent."""
    session_id = new_session(agent, workspace, **session_options)
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    assert agent.call("session/prompt", prompt)["result"]["stopReason"] == "end_turn"
    return thoughts(agent)


def prompt_to_the_end(agent, session_id: str, text: str, on_message) -> None:
    """Send a prompt and read until its response (which must be ``end_turn``), handing
    every other message to ``on_message`` (to answer the client requests of the turn)."""
    ident = agent.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
    while True:
        message = agent.read()
        if message.get("id") == ident and "method" not in message:
            assert message.get("result", {}).get("stopReason") == "end_turn", message
            return
        on_message(message)


def test_deep_and_overlong_lines_are_answered_and_the_agent_reads_on(workspace):
    """A line that is not UTF-8 is a parse error (-32700). A line nested 100,000 deep
    (beyond the JSON parser), a request nested 100 deep (within it, beyond the 64 levels
    a message may have), and a line of 180 MiB (beyond the 50 MiB limit) each get -32600 with one line saying why, answered with the
    request's id when it can be read; the requests after them are answered, the agent's
    memory stays bounded by the limit, not by the line, and stderr has one line each."""
    with LLMServer([]) as server:
        with start(workspace, server) as agent:
            agent.write(b'{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp/\xff\xfe"}}\n')
            assert error(agent.answer(None)) == (-32700, "Parse error")  # not UTF-8: not JSON text
            agent.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
            assert error(agent.answer(None)) == (-32600, "Invalid Request: the message nests deeper than 64 levels.")
            agent.write(json.dumps({"jsonrpc": "2.0", "id": "deep", "method": "session/new",
                                    "params": {"cwd": str(workspace), "mcpServers": [],
                                               "_meta": json.loads("[" * 100 + "]" * 100)}}).encode() + b"\n")
            assert error(agent.answer("deep")) == (-32600, "Invalid Request: the message nests deeper than 64 levels.")
            piece = b"x" * MIB
            for _ in range(180):
                agent.write(piece)
            agent.write(b"\n")
            # The very next request is answered (the old code glued it to the overlong line).
            session_id = new_session(agent, workspace)
            assert error([m for m in agent.seen if m.get("id") is None][-1]) == (
                -32600, "Invalid Request: the line is longer than 50 MiB, the agent's limit; it was skipped.")
            assert agent.peak_memory_kib() < 260 * 1024  # the old code held the line: ~400 MiB
            assert agent.call("session/close", {"sessionId": session_id})["result"] == {}
            assert agent.close() == 0
            assert agent.stderr().splitlines() == [
                "crystal acp: a line of input is not JSON; answered with JSON-RPC error -32700 (parse error).",
            ] + [
                "crystal acp: a line of input nests deeper than 64 levels; answered with JSON-RPC error -32600 "
                "(invalid request).",
            ] * 2 + [
                "crystal acp: a line of input is longer than 50 MiB; answered with JSON-RPC error -32600 "
                "(invalid request).",
            ]
    assert not (workspace / ".crystal" / "sessions").exists()


def test_a_lone_surrogate_in_a_prompt_is_kept_visible_not_a_failed_turn(workspace):
    """ROBUST-1: ``"\\ud800"`` is valid JSON but no UTF-8 file, log or model request can
    hold it. The prompt runs; the model and the saved session get it as visible text."""
    with LLMServer([{"text": "Fine."}]) as server:
        with start(workspace, server) as agent:
            session_id = new_session(agent, workspace)
            line = json.dumps({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "odd SURROGATE text"}]}})
            agent.write(line.replace("SURROGATE", "\\ud800").encode() + b"\n")
            reply = agent.answer("p")
            assert reply.get("result", {}).get("stopReason") == "end_turn", reply
            assert "odd \\\\ud800 text" in json.dumps(server.bodies()[0])
            assert agent.close() == 0
    saved = next((workspace / ".crystal" / "sessions").glob("*.jsonl")).read_text(encoding="utf-8")
    assert "odd \\\\ud800 text" in saved


def test_a_clients_cwd_must_be_an_absolute_project_folder(workspace, tmp_path, private_home):
    """ACP's cwd is an absolute path. A relative one (the old code read it against the
    agent's own folder), ``~``, a file, a path with a newline or NUL, ``/`` (every file
    in the workspace) and the Crystal Home (which only Crystal changes) are each refused
    with one line naming the value; a symbolic link to a project folder is used. Nothing
    is created anywhere, and stderr stays empty (no traceback per error)."""
    (workspace / "sub").mkdir()
    (workspace / "file.txt").write_text("x")
    (tmp_path / "link").symlink_to(workspace)
    (tmp_path / "root-link").symlink_to("/")
    refused = {
        "sub": "The cwd 'sub' is not an absolute path; ACP clients send the folder's absolute path.",
        "~": "The cwd '~' is not an absolute path; ACP clients send the folder's absolute path.",
        str(workspace / "file.txt"): f"The cwd '{workspace / 'file.txt'}' is not a folder.",
        f"{workspace}\nx": f"The cwd '{workspace}\\nx' contains a control character; send the folder's absolute path.",
        f"{workspace}\x00": f"The cwd '{workspace}^@' contains a control character; send the folder's absolute path.",
        "/": "The cwd '/' is the root of the file system; open a project folder instead.",
        str(tmp_path / "root-link"): f"The cwd '{tmp_path / 'root-link'}' is the root of the file system; "
                                     "open a project folder instead.",
        str(private_home): f"The cwd '{private_home}' is the Crystal Home or inside it, which only Crystal "
                           "changes; open a project folder instead.",
    }
    with LLMServer([]) as server:
        with start(workspace, server) as agent:  # the agent's own folder: where "sub" would have resolved
            for cwd, message in refused.items():
                for method in ("session/new", "session/load", "session/list"):
                    params = {"cwd": cwd, "mcpServers": [], "sessionId": "20261203-000000-abcdef"}
                    assert error(agent.call(method, params)) == (-32602, message), (method, cwd)
            session_id = new_session(agent, tmp_path / "link")
            assert agent.call("session/close", {"sessionId": session_id})["result"] == {}
            assert agent.close() == 0
            assert agent.stderr() == ""
    assert not (workspace / "sub" / ".crystal").exists()
    assert not (private_home / ".crystal").exists()


def test_a_refused_load_leaves_the_open_session_and_messages_stay_one_line(workspace, tmp_path):
    """`session/load` of an open session's id in a folder where it is not saved is
    -32002 and the open session goes on (the old code closed it first); an id that is
    no session id, however long or with newlines, is one bounded line."""
    other = tmp_path / "other"
    other.mkdir()
    with LLMServer([{"text": "One."}, {"text": "Two."}]) as server:
        with start(workspace, server) as agent:
            session_id = new_session(agent, workspace)
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            assert agent.call("session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            code, message = error(agent.call("session/load", {"cwd": str(other), "sessionId": session_id,
                                                              "mcpServers": []}))
            assert (code, message) == (-32002, f"No session '{session_id}' in {other / '.crystal' / 'sessions'}.")
            assert agent.call("session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            for bad in ("../../etc/passwd", "id\nwith\nnewlines" + "x" * 5000):
                code, message = error(agent.call("session/load", {"cwd": str(workspace), "sessionId": bad,
                                                                  "mcpServers": []}))
                assert code == -32602 and message.startswith("'"), message
                assert message.endswith(("' is not a valid session id.", "…")), message
                assert "\n" not in message and len(message) <= 400, message
            code, message = error(agent.call("session/set_mode", {"sessionId": session_id, "modeId": "x\ny"}))
            assert (code, message) == (-32602, "Unknown mode 'x\\ny'; use plan or work.")
            assert agent.close() == 0
            assert agent.stderr() == ""
    assert not (other / ".crystal").exists()


def test_client_mcp_servers_with_names_that_cannot_be_shown_are_left_out(workspace):
    """A client's MCP server named with control characters (an escape sequence, a
    newline) or 10 MB long is left out with a one-line note that quotes the name made
    visible and cut; the session opens and the good entries are still used. No secret
    the client passed with a server (env, headers, a password in its URL) is shown."""
    servers = [{"name": "evil\x1b[31m\x07\nname", "command": "/bin/false", "args": [], "env": []},
               {"name": "n" * (10 * MIB), "command": "/bin/false", "args": [], "env": []},
               {"name": "fine", "command": "/bin/false", "args": [], "env": [{"name": "TOKEN", "value": "ENVSECRET"}]},
               {"type": "http", "name": "web", "url": "http://me:URLSECRET@127.0.0.1:1/mcp",
                "headers": [{"name": "Authorization", "value": "Bearer HEADERSECRET"}]}]
    with LLMServer([{"text": "Hello."}]) as server:
        with start(workspace, server) as agent:
            notes = notes_of_one_turn(agent, workspace, mcpServers=servers)
            assert ("Note: An MCP server passed by the client is left out: its name contains a control character "
                    "('evil^[[31m^G\\nname').\n") in notes
            assert ("Note: An MCP server passed by the client is left out: its name is longer than 64 characters ('"
                    + "n" * 40 + "…').\n") in notes
            assert "MCP server 'fine' (stdio: /bin/false; passed by the ACP client) could not start" in notes
            assert "\x1b" not in notes and len(notes) < 2000
            # The secrets the client passed are never said back: env, headers, a URL's password.
            assert "MCP server 'web' (http: http://***@127.0.0.1:1/mcp; passed by the ACP client)" in notes
            said = json.dumps(agent.seen)
            assert not any(secret in said for secret in ("ENVSECRET", "URLSECRET", "HEADERSECRET"))
            assert agent.close() == 0


def test_an_error_or_a_malformed_answer_to_a_permission_request_denies_the_call(workspace):
    """The client answers a permission request with a JSON-RPC error, with a result that
    is no ACP answer, or with an option it was never offered: the call is denied with a
    line saying so, nothing runs, and the turn goes on to its end (the old code failed
    the turn with a multi-line internal error). A second answer to the same request and
    an answer to a request never sent are ignored."""
    answers = [
        {"error": {"code": -32000, "message": "client broke"}},
        {"result": {"outcome": 5}},
        {"result": {"outcome": {"outcome": "selected", "optionId": "allow_everything_forever"}}},
    ]
    reasons = [
        "The client answered the permission request with an error (JSON-RPC -32000), so nobody approved this call.",
        "The client's answer to the permission request is not a valid ACP answer, so nobody approved this call.",
        "The person rejected this call.",
    ]
    replies = []
    for n in range(len(answers)):
        replies += [{"tool_calls": [{"name": "bash", "arguments": {"command": f"echo {n} > out{n}.txt"}}]},
                    {"text": "Done."}]
    with LLMServer(replies) as server:
        with start(workspace, server) as agent:
            session_id = new_session(agent, workspace)
            for n, answer in enumerate(answers):
                def answer_permission(message: dict, answer: dict = answer) -> None:
                    if message.get("method") == "session/request_permission":
                        for reply in (answer, {"result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}):
                            agent.write((json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n").encode())
                        agent.write(b'{"jsonrpc": "2.0", "id": 987654, "result": {}}\n')

                prompt_to_the_end(agent, session_id, f"write {n}", answer_permission)
                failed = [m["params"]["update"] for m in agent.seen if m.get("method") == "session/update"
                          and m["params"]["update"].get("status") == "failed"]
                assert reasons[n] in failed[-1]["content"][0]["content"]["text"]
            assert agent.close() == 0
            assert agent.stderr() == ""
    assert not list(workspace.glob("out*.txt"))


def test_an_error_or_a_malformed_answer_to_a_question_form_is_a_dismissed_form(workspace):
    """Q-5: a client with form elicitation answers the question form with an error, or
    with a result that is no ACP answer: the form counts as dismissed and the turn goes
    on to its end (the old code handed the model an internal error with the SDK's
    multi-line validation text)."""
    question = {"header": "Database", "question": "Which database?",
                "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    answers = [{"error": {"code": -32000, "message": "form broke"}}, {"result": {"action": 7}}]
    replies = []
    for _ in answers:
        replies += [{"tool_calls": [{"name": "question", "arguments": {"questions": [question]}}]},
                    {"text": "Going on."}]
    with LLMServer(replies) as server:
        agent = RawAgent(workspace, server)
        with agent:
            assert "result" in agent.call("initialize", {"protocolVersion": 1,
                                                         "clientCapabilities": {"elicitation": {"form": {}}}})
            session_id = new_session(agent, workspace)
            for n, answer in enumerate(answers):
                def answer_form(message: dict, answer: dict = answer) -> None:
                    if message.get("method") == "elicitation/create":
                        agent.write((json.dumps({"jsonrpc": "2.0", "id": message["id"], **answer}) + "\n").encode())

                prompt_to_the_end(agent, session_id, f"ask {n}", answer_form)
            assert agent.close() == 0
            assert agent.stderr() == ""
    # The model's next request carries the question call's result: a dismissed form.
    tool_results = [json.dumps(body["messages"][-1]) for body in server.bodies()[1::2]]
    assert len(tool_results) == 2 and all("dismissed" in text for text in tool_results), tool_results


def test_client_folders_are_taken_once_each_and_bounded(workspace, tmp_path):
    """TRUST-6: the folders a client adds (``additionalDirectories``) are each checked
    once (the old code added and noted the same folder once per mention), at most 32,
    and one with a newline is left out with a one-line note naming it visibly."""
    folders = [tmp_path / f"extra{n}" for n in range(40)]
    for folder in folders:
        folder.mkdir()
    asked = [str(folders[0])] * 50 + [f"{folders[1]}\nx"] + [str(f) for f in folders[1:]]
    with LLMServer([{"text": "Hello."}]) as server:
        with start(workspace, server) as agent:
            notes = notes_of_one_turn(agent, workspace, additionalDirectories=asked)
            assert notes.count("Note: The client added the folder ") == 32
            assert notes.count(f"The client added the folder {folders[0]} ") == 1
            assert (f"Note: The client's folder '{folders[1]}\\nx' was not added: it contains a control "
                    "character.\n") in notes
            assert (f"Note: The client passed more than 32 folders; '{folders[32]}' and those after it were not "
                    "added.\n") in notes
            assert agent.close() == 0


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_a_client_that_stops_reading_cannot_keep_the_agent_alive(workspace, how):
    """BG-2: a client that sends requests, never reads the answers (its end of the pipe
    full) and then closes the input or sends SIGTERM: the agent drops the output it
    cannot send after 10 s without progress, says so in one line, closes its sessions and
    exits 0 (the old code waited on the full pipe for ever, SIGTERM included)."""
    with LLMServer([]) as server:
        with start(workspace, server) as agent:
            for _ in range(400):  # ~1 MB of answers and command lists, none of it read
                agent.send("session/new", {"cwd": str(workspace), "mcpServers": []})
            time.sleep(2)
            started = time.monotonic()
            if how == "eof":
                assert agent.process.stdin is not None
                agent.process.stdin.close()
            else:
                agent.process.send_signal(signal.SIGTERM)
            assert agent.process.wait(60) == 0
            assert time.monotonic() - started < 40
            lines = agent.stderr().splitlines()
            assert len(lines) == 1 and re.fullmatch(
                r"crystal acp: the client stopped reading the agent's output; \d+ bytes of it were not sent\.",
                lines[0]), lines
