"""Kernel process flags (FL-1, MODE-7, --unattended), sessions that follow the
notebook (JPY_SESSION_NAME, /resume after a restart, /sessions, /fork)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import psutil

from crystal_kernel.jupyter.notebook_map import map_path
from tests.sandbox_pids import host_pid


def test_flags_sessions_and_resume_after_restart(llm_server, tmp_path, kernel_factory):
    home = kernel_factory.make_home(tmp_path)
    folder = home / ".crystal" / "promptsets" / "locked"
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps({"enabled": False}))
    (folder / "work.md").write_text("Locked prompt. {{env}}")
    kernel = kernel_factory.start(home=home, flags=["--prompt-set", "locked", "--disable-tool", "python"],
                                  env_extra={"CRYSTAL_ARGS": "--unattended"})
    llm_server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo nobody"}}]}, {"text": "Denied."})
    run = kernel.run("Try a command")
    assert run.status == "ok"
    assert "prompts locked" in run.outputs()[0]["text/plain"], "FL-1 forces the set (PA-8 status line)"
    body = llm_server.bodies("chat")[-1]
    names = [t["function"]["name"] for t in body["tools"]]
    assert "python" not in names and "question" not in names and "variables" in names
    assert body["messages"][0]["content"].startswith("Locked prompt.")
    result = [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]
    assert "No person is present" in result, "--unattended: ask resolves to deny"
    run = kernel.run("/promptset default")
    assert run.status == "error", "FL-1: switching is refused while --prompt-set is given"

    sessions = kernel.run("/sessions").texts()[0]
    first = re.search(r"\* .*?\((\S+)\)", sessions).group(1)  # "* notebook · topic  (id)"
    assert json.loads(map_path(kernel.workspace).read_text())["notebooks"][kernel.notebook]["session"] == first

    # Reopen the notebook (a new kernel process) and /resume: the same session.
    kernel.km.restart_kernel(now=True)
    kernel.driver.kc.wait_for_ready(timeout=60)
    run = kernel.run("/resume")
    assert run.texts() == [f"Resumed session {first} (4 messages)."]
    llm_server.add({"text": "Still here."})
    kernel.run("Are you there?")
    assert len(llm_server.bodies("chat")[-1]["messages"]) == 1 + 4 + 1

    run = kernel.run("/fork")
    forked = re.search(r"into (\S+);", run.texts()[0]).group(1)
    assert forked != first
    assert json.loads(map_path(kernel.workspace).read_text())["notebooks"][kernel.notebook]["session"] == forked


def test_unknown_disabled_tool_refuses_to_start_MODE7(tmp_path):
    conn = tmp_path / "conn.json"
    conn.write_text("{}")
    proc = subprocess.run([sys.executable, "-m", "crystal_kernel.jupyter", "-f", str(conn), "--disable-tool", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "crystal kernel: --disable-tool: unknown built-in tool 'nope'."


def test_kernel_restart_stops_background_jobs_BG2(kernel_factory):
    kernel = kernel_factory.start()
    kernel.run("/approval full")
    pid_file = kernel.workspace / "job.pid"
    kernel_factory.server.add({"tool_calls": [{"name": "bash_start", "arguments": {
        "command": f"echo $$ > {pid_file}; exec sleep 120"}}]}, {"text": "Started."})
    assert kernel.run("Start a long job").status == "ok"
    deadline = time.monotonic() + 5
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = host_pid(int(pid_file.read_text()), pid_file.parent)  # SANDBOX-2: the host's id
    assert pid is not None
    os.kill(pid, 0)  # running
    kernel.km.restart_kernel(now=False)  # what the notebook's restart button does
    kernel.driver.kc.wait_for_ready(timeout=60)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break  # dead; only an init that does not reap keeps the entry
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the background job outlived the kernel")
    assert kernel.run("/jobs").texts() == ["No background jobs in this session."]
