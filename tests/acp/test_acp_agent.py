"""`crystal acp` as a real subprocess, driven by the ACP SDK's client side, against the
loopback model server."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import time

import pytest
from acp import RequestError

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import CRYSTAL, RecordingClient, crystal_acp, pid_alive
from tests.sandbox_pids import host_pid


def text(prompt: str) -> list[dict]:
    return [{"type": "text", "text": prompt}]


async def read_pid(path) -> int:
    """The pid a command wrote; it may take a moment to appear."""
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            found = host_pid(int(path.read_text()), path.parent)  # SANDBOX-2: the host's id
            assert found is not None, f"the process of {path.name} is not running"
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} was never written")


async def pid_gone(pid: int) -> bool:
    """Whether the process ends within about five seconds."""
    for _ in range(100):
        if not pid_alive(pid):
            break
        await asyncio.sleep(0.05)
    return not pid_alive(pid)


# The model starts one background job that writes its pid, then answers.
JOB_REPLIES = [{"tool_calls": [{"name": "bash_start", "arguments": {"command": "echo $$ > job.pid; exec sleep 300"}}]},
               {"text": "Started."}]


async def start_job(conn, workspace) -> tuple[str, int]:
    """Open a session, have the model start the job, and return the session id and the
    job's pid (checked alive)."""
    sid = (await conn.new_session(cwd=str(workspace))).session_id
    await conn.prompt(session_id=sid, prompt=text("start a job"))
    pid = await read_pid(workspace / "job.pid")
    assert pid_alive(pid)
    return sid, pid


def tool_names(body: dict) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools", [])}


async def test_initialize_advertises_load_images_and_session_list(workspace):
    with LLMServer([]) as server:
        async with crystal_acp(RecordingClient(), server, cwd=workspace) as (conn, proc, init):
            caps = init.agent_capabilities
            assert init.protocol_version == 1
            assert init.agent_info.name == "crystal"
            assert caps.load_session is True
            assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
            assert caps.session_capabilities.list is not None
            new = await conn.new_session(cwd=str(workspace))
            assert new.modes.current_mode_id == "work"
            assert [m.id for m in new.modes.available_modes] == ["plan", "work"]
            options = {o.id: o for o in new.config_options}
            assert options["approval"].current_value == "default"
            assert [o.value for o in options["approval"].options] == ["plan", "default", "edit", "review", "audit", "full"]
            # Bad input is one English line and changes nothing.
            with pytest.raises(RequestError) as err:
                await conn.new_session(cwd=str(workspace / "missing"))
            assert str(err.value) == f"The cwd '{workspace / 'missing'}' is not a folder."
            with pytest.raises(RequestError) as err:
                await conn.prompt(session_id="nope", prompt=text("hi"))
            assert "No open session 'nope'" in str(err.value)
            with pytest.raises(RequestError) as err:
                await conn.set_config_option(session_id=new.session_id, config_id="approval", value="yolo")
            assert str(err.value).startswith("Unknown approval mode 'yolo'")
            assert not (workspace / ".crystal" / "sessions").exists()


async def test_prompt_with_tool_calls_and_permissions_allowed_and_rejected(workspace):
    """A write the person allows once (shown as a diff before and after) and a bash
    call the person rejects: the file exists, the command never ran, the model was told."""
    (workspace / "notes").mkdir()
    (workspace / "notes" / "a.txt").write_text("old line\n")
    client = RecordingClient(permissions=["allow_once", "reject"])
    replies = [
        {"tool_calls": [{"id": "w1", "name": "edit", "arguments": {
            "path": "notes/a.txt", "old_string": "old line", "new_string": "new line"}}]},
        {"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "echo hi > b.txt"}}]},
        {"text": "Edited; the command was rejected."},
    ]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            new = await conn.new_session(cwd=str(workspace))
            response = await conn.prompt(session_id=new.session_id, prompt=text("fix the note"))
        bodies = server.bodies("chat")
    assert response.stop_reason == "end_turn"
    assert response.usage.input_tokens > 0
    assert (workspace / "notes" / "a.txt").read_text() == "new line\n"
    assert not (workspace / "b.txt").exists()
    # Permission requests: the edit's diff is shown before it runs; three choices.
    (edit_call, options), (bash_call, _) = client.permission_requests
    assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
    assert edit_call.tool_call_id == "w1" and edit_call.kind == "edit"
    assert edit_call.content[0].type == "diff"
    assert edit_call.content[0].old_text == "old line\n" and edit_call.content[0].new_text == "new line\n"
    assert bash_call.tool_call_id == "b1" and bash_call.kind == "execute"
    # Tool-call updates: announced before the permission request, then the result.
    edit_updates = client.tool_updates("w1")
    assert edit_updates[0].session_update == "tool_call" and edit_updates[0].title == "edit: notes/a.txt"
    assert edit_updates[0].locations[0].path == str(workspace / "notes" / "a.txt")
    assert edit_updates[-1].status == "completed"
    diff = edit_updates[-1].content[0]
    assert diff.type == "diff" and diff.path == str(workspace / "notes" / "a.txt")
    assert (diff.old_text, diff.new_text) == ("old line\n", "new line\n")
    bash_updates = client.tool_updates("b1")
    assert bash_updates[-1].status == "failed"
    assert "denied by the person" in bash_updates[-1].content[0].content.text
    assert client.agent_text() == "Edited; the command was rejected."
    assert "denied by the person" in json.dumps(bodies[2]["messages"])
    # No elicitation offered by this client: the question tool is not registered.
    assert "question" not in tool_names(bodies[0])


async def test_allow_always_covers_the_same_call_for_the_session(workspace):
    client = RecordingClient(permissions=["allow_session"])
    call = {"name": "bash", "arguments": {"command": "echo ran >> log.txt"}}
    replies = [{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "Twice."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            new = await conn.new_session(cwd=str(workspace))
            response = await conn.prompt(session_id=new.session_id, prompt=text("run it twice"))
    assert response.stop_reason == "end_turn"
    assert len(client.permission_requests) == 1
    assert (workspace / "log.txt").read_text() == "ran\nran\n"
    results = [u for u in client.of("tool_call_update") if u.status == "completed"]
    assert len(results) == 2 and "```" in results[0].content[0].content.text  # terminal output, fenced


async def test_cancel_ends_the_turn_and_kills_the_running_command(workspace):
    client = RecordingClient()
    replies = [
        {"tool_calls": [{"id": "s1", "name": "bash", "arguments": {"command": "echo $$ > pid.txt; sleep 60"}}]},
        {"text": "After the cancel."},
    ]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            new = await conn.new_session(cwd=str(workspace))
            sid = new.session_id
            running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("sleep")))
            await client.wait_for(lambda: any(u.status == "in_progress" for u in client.tool_updates("s1")))
            pid = await read_pid(workspace / "pid.txt")
            started = time.monotonic()
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(running, 10)
            assert response.stop_reason == "cancelled"
            assert time.monotonic() - started < 5
            assert await pid_gone(pid)
            assert client.tool_updates("s1")[-1].status == "failed"
            # The session goes on: the next prompt works and sees the cancelled call.
            again = await conn.prompt(session_id=sid, prompt=text("still there?"))
            assert again.stop_reason == "end_turn"
        body = server.bodies("chat")[-1]
    assert client.agent_text().endswith("After the cancel.")
    assert "Cancelled" in json.dumps(body["messages"])


async def test_cancel_while_the_model_streams_keeps_the_partial_answer(workspace):
    client = RecordingClient()
    replies = [{"text": "Partial answer that", "chunk": 4, "hang": 30, "hang_after": 2}, {"text": "Next."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("talk")))
            await client.wait_for(lambda: client.agent_text() != "")
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(running, 10)
            assert response.stop_reason == "cancelled"
            await conn.prompt(session_id=sid, prompt=text("again"))
        body = server.bodies("chat")[-1]
    assistant = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistant and assistant[0]["content"].startswith("Part")


async def test_load_replays_the_saved_session_and_continues_it(workspace):
    first = RecordingClient()
    replies = [
        {"tool_calls": [{"id": "r1", "name": "write", "arguments": {"path": "plan.md", "content": "# Plan\n"}}]},
        {"text": "Wrote the plan."},
    ]
    with LLMServer(replies) as server:
        async with crystal_acp(first, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.prompt(session_id=sid, prompt=text("write a plan"))

    second = RecordingClient()
    with LLMServer([{"text": "I remember."}]) as server:
        async with crystal_acp(second, server, cwd=workspace) as (conn, proc, init):
            listed = await conn.list_sessions(cwd=str(workspace))
            assert sid in [s.session_id for s in listed.sessions]
            loaded = await conn.load_session(cwd=str(workspace), session_id=sid)
            assert loaded.modes.current_mode_id == "work"
            # The conversation came back (the agent writes it before the load response;
            # the SDK client may hand the notifications over just after that response).
            await second.wait_for(lambda: len(second.kinds(sid)) >= 5, 10)
            kinds = second.kinds(sid)
            assert kinds[:5] == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk",
                                 "available_commands_update"]
            assert second.of("user_message_chunk")[0].content.text == "write a plan"
            assert second.of("tool_call")[0].title == "write: plan.md"
            assert second.of("tool_call_update")[0].status == "completed"
            assert second.agent_text(sid) == "Wrote the plan."
            response = await conn.prompt(session_id=sid, prompt=text("do you remember?"))
            assert response.stop_reason == "end_turn"
            with pytest.raises(RequestError) as err:
                await conn.load_session(cwd=str(workspace), session_id="no-such-session")
            assert "No session 'no-such-session'" in str(err.value)
            # ACP's resource not found, not invalid params.
            assert err.value.code == -32002, err.value
            with pytest.raises(RequestError) as err:
                await conn.resume_session(cwd=str(workspace), session_id="no-such-session")
            assert err.value.code == -32002 and "No session 'no-such-session'" in str(err.value)
        body = server.bodies("chat")[0]
    assert "write a plan" in json.dumps(body["messages"])
    doc = SessionStore(workspace).load(sid)
    assert doc["turns"] == 2


async def test_a_mode_set_without_a_prompt_after_it_is_kept(workspace):
    """session/set_mode with no prompt after it, then the agent ends: a later
    session/load reports the mode set, not `work`. (The approval is the agent's own,
    from its flags and config, whatever a document says.)"""
    first = RecordingClient()
    with LLMServer([{"text": "Hello."}]) as server:
        async with crystal_acp(first, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.prompt(session_id=sid, prompt=text("hello"))
            await conn.set_session_mode(session_id=sid, mode_id="plan")
    second = RecordingClient()
    with LLMServer([]) as server:
        async with crystal_acp(second, server, cwd=workspace) as (conn, proc, init):
            loaded = await conn.load_session(cwd=str(workspace), session_id=sid)
    assert loaded.modes.current_mode_id == "plan"
    assert {o.id: o.current_value for o in loaded.config_options}["mode"] == "plan"


async def test_set_mode_and_approval_change_the_catalog_and_the_asking(workspace):
    client = RecordingClient()
    replies = [
        {"text": "Planning."},
        {"tool_calls": [{"name": "write", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"text": "Written."},
    ]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            await conn.prompt(session_id=sid, prompt=text("plan it"))
            with pytest.raises(RequestError) as err:
                await conn.set_session_mode(session_id=sid, mode_id="chaos")
            assert "Unknown mode 'chaos'" in str(err.value)
            changed = await conn.set_config_option(session_id=sid, config_id="approval", value="full")
            assert {o.id: o.current_value for o in changed.config_options} == {"mode": "plan", "approval": "full"}
            # A slash command switches back to work; the client is told the new mode.
            await conn.prompt(session_id=sid, prompt=text("/mode work"))
            # The update is a notification: the SDK client may hand it over just after
            # the prompt's response.
            await client.wait_for(lambda: any(u.current_mode_id == "work" for u in client.of("current_mode_update")), 10)
            response = await conn.prompt(session_id=sid, prompt=text("write it"))
            assert response.stop_reason == "end_turn"
        bodies = server.bodies("chat")
    assert not tool_names(bodies[0]) & {"edit", "write", "bash"}
    assert {"edit", "write", "bash"} <= tool_names(bodies[1])
    assert client.permission_requests == []  # full approval: nothing asked
    assert (workspace / "x.txt").read_text() == "x"
    doc = SessionStore(workspace).load(next((workspace / ".crystal" / "sessions").glob("*.jsonl")).stem)
    assert doc["mode"] == "work" and doc["approval"] == "full"


async def test_todowrite_sends_the_plan(workspace):
    client = RecordingClient()
    todos = [{"content": "Read the code", "status": "completed"}, {"content": "Fix the bug", "status": "pending"}]
    replies = [{"tool_calls": [{"name": "todowrite", "arguments": {"todos": todos}}]}, {"text": "Planned."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.prompt(session_id=sid, prompt=text("plan"))
    plan = client.of("plan")[-1]
    assert [(e.content, e.status) for e in plan.entries] == [("Read the code", "completed"), ("Fix the bug", "pending")]
    assert client.of("tool_call")[0].kind == "think"


async def test_the_plan_follows_the_todos_event(workspace):
    """The plan is sent from the host's typed todos event, once per change, not
    guessed from a tool's name: the same list written again and a failed todowrite send
    no plan; the changed list does."""
    first = [{"content": "Read the code", "status": "in_progress"}]
    second = [{"content": "Read the code", "status": "completed"}]
    replies = [{"tool_calls": [{"name": "todowrite", "arguments": {"todos": first}}]},
               {"tool_calls": [{"name": "todowrite", "arguments": {"todos": first}}]},
               {"tool_calls": [{"name": "todowrite", "arguments": {"todos": [{"content": " ", "status": "pending"}]}}]},
               {"tool_calls": [{"name": "todowrite", "arguments": {"todos": second}}]},
               {"text": "Planned."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client := RecordingClient(), server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.prompt(session_id=sid, prompt=text("plan"))
    plans = [[(e.content, e.status) for e in plan.entries] for plan in client.of("plan")]
    assert plans == [[("Read the code", "in_progress")], [("Read the code", "completed")]]


async def test_question_tool_uses_an_elicitation_form_when_the_client_has_one(workspace):
    client = RecordingClient(form_answers=[{"q1": "Postgres", "q1__other": ""}])
    question = {"header": "Database", "question": "Which database?",
                "options": [{"label": "Postgres", "description": "the usual"}, {"label": "SQLite"}]}
    replies = [{"tool_calls": [{"name": "question", "arguments": {"questions": [question]}}]}, {"text": "Postgres it is."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace, elicitation=True) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            await conn.prompt(session_id=sid, prompt=text("ask me"))
        bodies = server.bodies("chat")
    assert "question" in tool_names(bodies[0])
    message, mode = client.elicitations[0]
    assert message == "Which database?"
    schema = mode.requested_schema.model_dump(by_alias=True, exclude_none=True)
    assert [o["const"] for o in schema["properties"]["q1"]["oneOf"]] == ["Postgres", "SQLite"]
    assert "q1__other" in schema["properties"]  # custom answers are on by default
    result = [u for u in client.of("tool_call_update") if u.status == "completed"][0]
    assert json.loads(result.content[0].content.text) == [["Postgres"]]


@pytest.mark.parametrize("how", ["eof", "sigterm"])
async def test_background_jobs_die_with_the_acp_process(workspace, how):
    client = RecordingClient()
    with LLMServer(JOB_REPLIES) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            _sid, pid = await start_job(conn, workspace)
            if how == "sigterm":
                proc.send_signal(signal.SIGTERM)
            else:
                proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), 15) == 0
    assert await pid_gone(pid)


def test_help_says_what_the_command_is_for():
    """`crystal acp --help` starts with a line saying what the command does, before the
    flags (a person who runs it by hand learns it is for an ACP client to start)."""
    out = subprocess.run([CRYSTAL, "acp", "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    usage, description = out.stdout.split("\n\n")[:2]
    assert usage.startswith("usage: crystal acp")
    assert " ".join(description.split()).startswith(
        "Serve Crystal as an Agent Client Protocol (ACP) agent: an ACP client (an editor, Jupyter AI) starts "
        "this command and speaks JSON-RPC with it on stdin and stdout"), description


def test_bad_flags_refuse_to_start_with_one_line(workspace):
    out = subprocess.run([CRYSTAL, "acp", "--approval", "bogus"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "crystal: Unknown approval mode 'bogus'; use one of: plan, default, edit, review, audit, full."]
    out = subprocess.run([CRYSTAL, "acp", "--workspace", str(workspace / "missing")], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=60)
    # One line naming the folder (its wording is the shared flag check's).
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and str(workspace / "missing") in lines[0], out.stderr
    assert out.stdout == ""


async def test_cancel_while_a_permission_request_is_open(workspace):
    """ACP's cancel flow: the client sends session/cancel and answers the open request
    with `cancelled`; the prompt ends cancelled, the call never ran and is not left pending."""
    client = RecordingClient(permissions=["cancel"])
    replies = [{"tool_calls": [{"id": "p1", "name": "bash", "arguments": {"command": "touch ran.txt"}}]},
               {"text": "Fine."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id

            async def cancel_first(session_id, tool_call):
                await conn.cancel(session_id=session_id)

            client.on_permission = cancel_first
            response = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("touch it")), 20)
            assert response.stop_reason == "cancelled"
            assert client.tool_updates("p1")[-1].status == "failed"
            again = await conn.prompt(session_id=sid, prompt=text("ok?"))
            assert again.stop_reason == "end_turn"
        body = server.bodies("chat")[-1]
    assert not (workspace / "ran.txt").exists()
    assert "Cancelled before it ran." in json.dumps(body["messages"])


async def test_close_session_stops_its_jobs(workspace):
    client = RecordingClient()
    with LLMServer(JOB_REPLIES) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            sid, pid = await start_job(conn, workspace)
            await conn.close_session(session_id=sid)
            assert await pid_gone(pid)
            assert proc.returncode is None  # the agent itself keeps serving
            with pytest.raises(RequestError) as err:
                await conn.prompt(session_id=sid, prompt=text("hello?"))
            assert f"No open session '{sid}'" in str(err.value)


async def test_prompt_images_and_attached_files_reach_the_model(workspace):
    from tests.acp.test_acp_mapping import PNG

    client = RecordingClient()
    prompt = [{"type": "text", "text": "What is in the picture?"},
              {"type": "image", "data": PNG, "mimeType": "image/png"},
              {"type": "resource_link", "uri": (workspace / "notes.ipynb").as_uri(), "name": "notes.ipynb"}]
    with LLMServer([{"text": "A tiny image."}]) as server:
        # gpt-4o takes images (the capability table); the default test model does not.
        async with crystal_acp(client, server, cwd=workspace, args=("--model", "gpt-4o")) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            response = await conn.prompt(session_id=sid, prompt=prompt)
        body = server.bodies("chat")[0]
    assert response.stop_reason == "end_turn"
    user = json.dumps([m for m in body["messages"] if m["role"] == "user"])
    assert "What is in the picture?" in user and f"data:image/png;base64,{PNG}" in user
    assert str(workspace / "notes.ipynb") in user


async def test_a_clients_images_are_checked_and_bounded_before_they_reach_the_model(workspace):
    """An image the client sends is untrusted input: bytes that are not the declared type
    (or beyond 20 MiB) are not sent to the model, which every later request of the
    session would carry and a model service would refuse; past 8 images a prompt's
    images are left out. The person is told in a note; the model in a line of text."""
    from tests.acp.test_acp_mapping import PNG

    client = RecordingClient()
    bad = base64.b64encode(b"GIF89a not a png at all").decode()
    prompt = [{"type": "text", "text": "Compare these."}, {"type": "image", "data": bad, "mimeType": "image/png"},
              *[{"type": "image", "data": PNG, "mimeType": "image/png"} for _ in range(9)]]
    with LLMServer([{"text": "Eight pictures."}]) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--model", "gpt-4o")) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            response = await conn.prompt(session_id=sid, prompt=prompt)
            await client.wait_for(lambda: len(client.of("agent_thought_chunk", sid)) >= 2, 10)
        body = server.bodies("chat")[0]
    assert response.stop_reason == "end_turn"
    user = json.dumps([m for m in body["messages"] if m["role"] == "user"])
    assert user.count("data:image/png;base64,") == 8 and bad not in user
    assert "could not be used: Attached image 1 is declared as image/png but the bytes are image/gif" in user
    notes = "".join(u.content.text for u in client.of("agent_thought_chunk", sid))
    assert "Note: Attached image 1 is declared as image/png but the bytes are image/gif" in notes
    assert "Note: Only 8 images of a prompt are sent to the model; image 10 and those after it were not." in notes


async def test_listing_commands_answer_during_a_turn_and_changes_are_refused_PA8(workspace):
    """PA-8, FL-1, FL-2: read-only commands run during a turn in every front; a second prompt
    that is not a command is still refused."""
    client = RecordingClient()
    replies = [{"tool_calls": [{"id": "s1", "name": "bash", "arguments": {"command": "echo $$ > pid.txt; sleep 60"}}]},
               {"text": "Done."}]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full")) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            running = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("sleep")))
            await client.wait_for(lambda: any(u.status == "in_progress" for u in client.tool_updates("s1")))
            before = len(client.agent_text(sid))
            listed = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/promptattach")), 10)
            assert listed.stop_reason == "end_turn"
            # A listing of several lines comes as a fenced block (Markdown clients, acp/commands.py).
            assert client.agent_text(sid)[before:].startswith("```text\nPrompt attachments:")
            before = len(client.agent_text(sid))
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=text("/mode plan")), 10)
            assert client.agent_text(sid)[before:] == "Cannot switch mode while a turn is running."
            with pytest.raises(RequestError) as err:
                await conn.prompt(session_id=sid, prompt=text("another question"))
            assert str(err.value) == "A prompt is already running in this session."
            assert not running.done()
            await conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"
