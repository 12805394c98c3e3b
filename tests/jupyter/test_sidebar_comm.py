"""The ``crystal.sidebar`` comm (jupyter/sidebar_comm.py) in the real kernel: what the
sidebar asks a kernel that runs elsewhere (through a gateway) and what it gets back —
sessions, transcripts, jobs and their logs, Stop, prompt sets (PS-5) — all from the
kernel's own Home and workspace, also while a cell waits for a person."""

from __future__ import annotations

import itertools
import json
import queue
import time
import uuid

from crystal_kernel.jupyter.driver import click

_IDS = itertools.count(1000)


def open_sidebar(kernel) -> str:
    comm_id = uuid.uuid4().hex
    kc = kernel.driver.kc
    kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": comm_id, "target_name": "crystal.sidebar",
                                                      "data": {}}))
    return comm_id


def ask(kernel, comm_id: str, *requests: dict, timeout: float = 20) -> list[dict]:
    """Send ``requests`` (ids added in order) on the comm; return their replies in order."""
    kc = kernel.driver.kc
    ids = []
    for request in requests:
        rid = next(_IDS)
        ids.append(rid)
        kernel.driver.send_comm(comm_id, {"id": rid, **request})
    replies: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    while len(replies) < len(ids):
        assert time.monotonic() < deadline, f"no reply to {requests} within {timeout} s"
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        content = msg["content"]
        if msg["msg_type"] == "comm_msg" and content.get("comm_id") == comm_id and content["data"].get("id") in ids:
            replies[content["data"]["id"]] = content["data"]
    return [replies[i] for i in ids]


def test_sessions_jobs_logs_and_transcript_come_from_the_kernel_side(kernel):
    """BG-1: the job the model started is listed with its log, and its session with the
    transcript, read from the kernel's own workspace."""
    kernel.reset(approval="full")
    kernel.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": "echo from-the-job; sleep 30"}}]},
                      {"text": "Started a job for the sidebar."})
    assert kernel.run("Start the sidebar job").status == "ok"
    session_id = kernel.driver.kc.kernel_info(reply=True)["content"]["crystal"]["session"]
    comm = open_sidebar(kernel)
    sessions, jobs, transcript, info = ask(kernel, comm, {"op": "sessions"}, {"op": "jobs"},
                                          {"op": "transcript", "args": {"id": session_id}}, {"op": "info"})
    assert info["data"]["workspace"] == str(kernel.workspace.resolve())
    assert session_id in [s["id"] for s in sessions["data"]["sessions"]]
    job = next(j for j in jobs["data"]["jobs"] if j["session"] == session_id and j["command"].startswith("echo from-the-job"))
    assert job["state"] == "running" and job["stoppable"]
    texts = [p.get("text", "") for m in transcript["data"]["messages"] for p in m["parts"]]
    assert "Start the sidebar job" in texts and "Started a job for the sidebar." in texts
    deadline = time.monotonic() + 10
    while True:
        (log,) = ask(kernel, comm, {"op": "log", "args": {"session": session_id, "job": job["id"]}})
        if "from-the-job" in log["data"]["text"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert log["ok"] and "from-the-job" in log["data"]["text"]
    (stopped,) = ask(kernel, comm, {"op": "stop", "args": {"session": session_id, "job": job["id"]}})
    assert stopped == {"id": stopped["id"], "ok": True,
                       "data": {"session": session_id, "id": job["id"], "message": f"Stopping job '{job['id']}'."}}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        (jobs,) = ask(kernel, comm, {"op": "jobs"})
        row = next(j for j in jobs["data"]["jobs"] if j["session"] == session_id and j["id"] == job["id"])
        if row["state"] != "running":
            break
        time.sleep(0.2)
    assert row["state"] != "running"


def test_prompt_sets_are_the_kernels_home_PS5_PS7(kernel):
    """Enabling a set over the comm writes the kernel's Home and, as ``/promptset``
    does (PS-7), replaces the session's system message: the next turn uses the set."""
    assert kernel.run("/sessions").status == "ok"  # a session is open
    folder = kernel.home / ".crystal" / "promptsets" / "kernel-side"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompt.json").write_text(json.dumps({"name": "Kernel side", "keep": "me"}))
    (folder / "work.md").write_text("Kernel side.\n")
    comm = open_sidebar(kernel)
    listing, enabled = ask(kernel, comm, {"op": "promptsets"},
                           {"op": "promptsets_action", "args": {"action": "enable", "name": "kernel-side"}})
    assert "kernel-side" in [s["name"] for s in listing["data"]["sets"]]
    assert enabled["ok"] and enabled["data"]["selected"] == "kernel-side", enabled
    assert json.loads((folder / "prompt.json").read_text()) == {"name": "Kernel side", "keep": "me", "enabled": True}
    kernel.server.add({"text": "Using it."})
    assert kernel.run("Which prompts?").status == "ok"
    assert kernel.last_body()["messages"][0]["content"].startswith("Kernel side."), kernel.last_body()["messages"][0]
    (disabled,) = ask(kernel, comm, {"op": "promptsets_action", "args": {"action": "disable"}})
    assert disabled["data"]["selected"] == "default"
    assert json.loads((folder / "prompt.json").read_text())["enabled"] is False


def test_bad_requests_get_one_english_line_and_change_nothing(kernel):
    comm = open_sidebar(kernel)
    unknown, bad_id, missing, no_job, bad_args, bad_action = ask(
        kernel, comm, {"op": "delete-everything"}, {"op": "transcript", "args": {"id": "../etc"}},
        {"op": "transcript", "args": {"id": "no-such-session"}},
        {"op": "log", "args": {"session": "no-such-session", "job": "j9"}},
        {"op": "log", "args": "nope"}, {"op": "promptsets_action", "args": {"action": "explode"}})
    assert unknown["ok"] is False and unknown["status"] == 400
    assert unknown["error"].startswith("Unknown sidebar request 'delete-everything'")
    assert bad_id["status"] == 400 and bad_id["error"] == "'../etc' is not a valid session id."
    assert missing["status"] == 404 and missing["error"] == "No session 'no-such-session' in this workspace."
    assert no_job["status"] == 404
    assert bad_args["status"] == 400 and bad_args["error"] == "'args' must be a JSON object."
    assert bad_action["status"] == 400 and bad_action["error"] == "'action' must be one of: enable, disable."


def test_the_sidebar_is_answered_while_a_cell_waits_for_a_person(kernel):
    """A remote kernel's sidebar follows a running turn: the comm is answered while the
    approval form waits, then the form is answered as usual."""
    kernel.reset(approval="default")
    kernel.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo waited"}}]},
                      {"text": "Done waiting."})
    state: dict = {"comm": None, "reply": None, "clicked": False}

    def on_message(msg, driver):
        forms = [s for s in driver.open_widgets().values() if s.get("description") == "Allow once"]
        if forms and state["comm"] is None:
            state["comm"] = open_sidebar(kernel)
            driver.send_comm(state["comm"], {"id": 7, "op": "sessions"})
        if (msg is not None and msg["msg_type"] == "comm_msg" and state["comm"]
                and msg["content"]["comm_id"] == state["comm"] and msg["content"]["data"].get("id") == 7):
            state["reply"] = msg["content"]["data"]
        if state["reply"] is not None and not state["clicked"]:
            state["clicked"] = driver._try(click("Allow once"))

    run = kernel.run("Wait for me", on_message=on_message, timeout=60)
    assert run.status == "ok" and state["clicked"]
    assert state["reply"]["ok"] and state["reply"]["data"]["sessions"], state["reply"]


def test_answering_loads_no_server_library(tmp_path):
    """The kernel answers from the same readers as the REST API without importing
    jupyter_server (the readers have no Jupyter imports; only the handlers do)."""
    import os
    import subprocess
    import sys

    code = ("import sys; from types import SimpleNamespace as NS; "
            "from crystal_kernel.jupyter.sidebar_comm import answer; k = NS(workspace=sys.argv[1], crystal=None); "
            "replies = [answer(k, {'id': i, 'op': op}) for i, op in "
            "enumerate(['sessions', 'jobs', 'promptsets', 'attachments', 'info'])]; "
            "print(all(r['ok'] for r in replies), 'jupyter_server' in sys.modules)")
    env = dict(os.environ, CRYSTAL_HOME=str(tmp_path / "home"))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]
