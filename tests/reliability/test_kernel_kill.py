"""The kernel is SIGKILLed in the middle of a turn (a background job running, the model
stream hanging; or a foreground bash call running): no child process survives, the
session document is intact (valid JSON, the turns before), and the next kernel on the
notebook resumes it.
"""

from __future__ import annotations

import os
import signal
import time

from reliability_support import clear, kernel_helpers, session_documents, user_prompts, wait_gone

from tests.sandbox_pids import host_pid


def wait_for_pid(path, seconds: float = 20.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            found = host_pid(int(path.read_text().strip()), path.parent)  # SANDBOX-2: the host's id
            assert found is not None, f"the process of {path.name} is not running"
            return found
        time.sleep(0.05)
    raise AssertionError(f"{path.name} was never written")


def test_sigkill_during_a_bash_call_leaves_no_children(llm_server, tmp_path):
    """A foreground bash call runs under the jobs supervisor: its shell, a background
    child and one in a session of its own all end with the SIGKILLed kernel."""
    clear(llm_server)
    kernel = kernel_helpers.start_kernel(tmp_path, llm_server)
    names = ("fg.pid", "bgfg.pid", "setsid.pid")
    try:
        kernel.reset(approval="full")
        ws = kernel.workspace
        command = (f"echo $$ > {ws / 'fg.pid'}; sleep 300 & echo $! > {ws / 'bgfg.pid'}; "
                   f"setsid sleep 300 & echo $! > {ws / 'setsid.pid'}; sleep 300")
        llm_server.add({"tool_calls": [{"name": "bash", "arguments": {"command": command}}]})
        kernel.driver.kc.execute("Run a long command, then get killed")
        pids = [wait_for_pid(ws / name) for name in names]
        time.sleep(0.2)
        kernel_pid = kernel.km.provisioner.process.pid
        os.kill(kernel_pid, signal.SIGKILL)
        assert wait_gone(kernel_pid)
        left = [pid for pid in pids if not wait_gone(pid, 5)]
        assert not left, f"the bash call's processes {left} outlived the kernel"
    finally:
        kernel.driver.kc.stop_channels()
        kernel.km.shutdown_kernel(now=True)
        for name in names:
            path = kernel.workspace / name
            if path.exists() and path.read_text().strip():
                found = host_pid(int(path.read_text()), path.parent, wait=0)
                try:
                    if found is not None:
                        os.kill(found, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_sigkill_mid_turn_leaves_no_children_and_a_resumable_session(llm_server, tmp_path):
    clear(llm_server)
    kernel = kernel_helpers.start_kernel(tmp_path, llm_server)
    try:
        kernel.reset(approval="full")
        llm_server.add({"text": "The first answer."})
        assert kernel.run("Before the kill").status == "ok"
        doc_before = session_documents(kernel.workspace)[0]
        bg = kernel.workspace / "bg.pid"
        llm_server.add(
            {"tool_calls": [{"name": "bash_start", "arguments": {"command": f"sleep 300 & echo $! > {bg}; wait"}}]},
            {"text": "Working on it and then", "chunk": 6, "hang": 20, "hang_after": 2},
        )
        kernel.driver.kc.execute("Start things, then get killed")
        bg_pid = wait_for_pid(bg)
        deadline = time.monotonic() + 10
        while llm_server.pending and time.monotonic() < deadline:  # the hanging request has begun
            time.sleep(0.05)
        time.sleep(0.3)
        kernel_pid = kernel.km.provisioner.process.pid
        os.kill(kernel_pid, signal.SIGKILL)
        assert wait_gone(kernel_pid)
        assert wait_gone(bg_pid, 5), "the background job's child outlived the kernel"
    finally:
        kernel.driver.kc.stop_channels()
        kernel.km.shutdown_kernel(now=True)
        for name in ("bg.pid",):
            path = kernel.workspace / name
            if path.exists() and path.read_text().strip():
                found = host_pid(int(path.read_text()), path.parent, wait=0)
                try:
                    if found is not None:
                        os.kill(found, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # The document is valid JSON and holds the completed turn (the killed turn was never saved).
    docs = session_documents(kernel.workspace)
    assert len(docs) == 1 and docs[0]["id"] == doc_before["id"]
    assert user_prompts(docs[0])[:1] == ["Before the kill"]
    assert not list((kernel.workspace / ".crystal" / "sessions").glob(".*.tmp"))

    # The next kernel on the same notebook resumes the session (/resume: the notebook's last one).
    clear(llm_server)
    again = kernel_helpers.start_kernel(tmp_path, llm_server, home=kernel.home, workspace=kernel.workspace,
                                        notebook=kernel.notebook)
    try:
        resumed = again.run("/resume")
        assert resumed.status == "ok", resumed.texts()
        llm_server.add({"text": "Resumed."})
        result = again.run("After the kill")
        assert result.status == "ok"
        sent = [m for m in llm_server.bodies("chat")[-1]["messages"] if m["role"] == "user"]
        assert sent[0]["content"] == "Before the kill"
        docs = session_documents(again.workspace)
        assert len(docs) == 1 and docs[0]["id"] == doc_before["id"]
        assert user_prompts(docs[0])[0] == "Before the kill" and user_prompts(docs[0])[-1] == "After the kill"
    finally:
        again.stop()
