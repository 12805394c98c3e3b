"""TRUST-4 and ROBUST-3 attacks on the ``python`` notebook tool, which runs the model's
code inside a kernel process: a real Crystal kernel (and a stock python3 kernel with the
``%crystal`` magics) under jupyter_client, the model on the loopback server.

The model's code looks for the key every way it can without digging through the
interpreter's memory — ``os.environ``, ``env`` in a subprocess, ``!env``, the kernel's
``/proc/self/environ`` and, from a child shell, ``/proc/$PPID/environ`` — and what it
printed reaches the model in its next request. No key may be in it; the turn works and
a later ``/model`` switch still authenticates with the key. Processes the tool's code
starts die with a kernel killed by SIGKILL. The person allows each python call: it runs
unsandboxed in the kernel, so it is asked in `full` too (SANDBOX-1).
"""

from __future__ import annotations

import json
import os
import signal
import time

import psutil

from crystal_kernel.jupyter.driver import click
from crystal_kernel.testing.llm_server import LLMServer
from tests.jupyter.conftest import start_kernel
from tests.magics.conftest import start_python_kernel

ALLOW = [click("Allow once")]
KEY = "sk-kernel-secret-0123456789abcdef"
OTHER = "sk-openai-other-9876543210fedcba"

SNOOP = "\n".join([
    "import os, subprocess",
    "print('ENVIRON', os.environ.get('CRYSTAL_TEST_KEY'), os.environ.get('OPENAI_API_KEY'))",
    "print('CHILD-ENV', subprocess.run(['env'], capture_output=True, text=True).stdout)",
    "!env",
    "print('PROC-SELF', open('/proc/self/environ', 'rb').read().decode('latin-1'))",
    "print('PROC-PARENT', subprocess.run(['sh', '-c', 'cat /proc/$PPID/environ'],"
    " capture_output=True).stdout.decode('latin-1'))",
])


def tool_results(body: dict) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m["role"] == "tool")


def test_python_tool_code_finds_no_key_and_model_switch_still_authenticates(tmp_path):
    with LLMServer(max_hang=20) as server:
        kernel = start_kernel(tmp_path, server, env_extra={"CRYSTAL_TEST_KEY": KEY, "OPENAI_API_KEY": OTHER})
        try:
            assert kernel.run("/approval full").status == "ok"
            server.add({"tool_calls": [{"name": "python", "arguments": {"code": SNOOP}}]},
                       {"text": "Looked around."})
            first = kernel.run("Print the environment", actions=ALLOW)
            server.add({"text": "Hello from the other model."})
            switched = kernel.run("/model gpt-4o")
            second = kernel.run("Still there?")
            bodies = server.bodies("chat")
            requests = [r for r in server.requests if r["path"].endswith("/chat/completions")]
        finally:
            kernel.stop()
    assert first.status == "ok", first.texts()
    assert "Looked around." in " ".join(first.texts())
    seen = tool_results(bodies[1])
    # The snooping ran: its markers and ordinary variables are in the result the model read.
    for marker in ("ENVIRON None None", "CHILD-ENV", "PROC-SELF", "PROC-PARENT", "PATH="):
        assert marker in seen, seen[:2000]
    assert KEY not in seen and OTHER not in seen, "the python tool's code found a model key"
    assert "CRYSTAL_TEST_KEY=****" in seen  # the initial environment block is masked
    # The provider kept its key: every request authenticated, the one after /model too.
    assert switched.status == "ok", switched.texts()
    assert second.status == "ok" and "Hello from the other model." in " ".join(second.texts())
    assert bodies[-1]["model"] == "gpt-4o"
    assert [r["headers"].get("authorization") for r in requests] == [f"Bearer {KEY}"] * 3


def test_pass_keys_to_tools_lets_the_python_tool_see_the_key(tmp_path):
    with LLMServer(max_hang=20) as server:
        home = tmp_path / "home"
        (home / ".crystal").mkdir(parents=True)
        (home / ".crystal" / "config.json").write_text(json.dumps({"topicNaming": False, "passKeysToTools": True}))
        kernel = start_kernel(tmp_path, server, home=home, env_extra={"CRYSTAL_TEST_KEY": KEY})
        try:
            assert kernel.run("/approval full").status == "ok"
            server.add({"tool_calls": [{"name": "python", "arguments": {
                "code": "import os, subprocess\nprint(os.environ.get('CRYSTAL_TEST_KEY'))\n"
                        "print(subprocess.run(['env'], capture_output=True, text=True).stdout)"}}]},
                       {"text": "ok"})
            run = kernel.run("Print the key", actions=ALLOW)
            seen = tool_results(server.bodies("chat")[1])
        finally:
            kernel.stop()
    assert run.status == "ok", run.texts()
    # The person opted in: the code and its subprocess see the key ...
    assert seen.count(KEY) == 2, seen[:2000]
    # ... and still no file the host wrote holds it.
    saved = [p.read_text(errors="replace") for p in (tmp_path / "ws" / ".crystal").rglob("*") if p.is_file()]
    assert saved and not any(KEY in text for text in saved)


def test_magics_hide_the_key_from_the_tool_but_not_from_the_persons_cells(tmp_path):
    with LLMServer(max_hang=20) as server:
        kernel = start_python_kernel(tmp_path, server, env_extra={"OPENAI_API_KEY": OTHER})
        try:
            assert kernel.run("%%crystal\n/approval full").status == "ok"
            server.add({"tool_calls": [{"name": "python", "arguments": {"code": SNOOP.replace(
                "CRYSTAL_TEST_KEY", "OPENAI_API_KEY")}}]}, {"text": "Looked around."})
            turn = kernel.run("%%crystal\nPrint the environment", actions=ALLOW)
            seen = tool_results(server.bodies("chat")[-1])
            mine = kernel.run(f"import os\nprint(os.environ['OPENAI_API_KEY'] == {OTHER!r})")
            server.add({"text": "Again."})
            again = kernel.run("%%crystal\nAnd again")
            auth = [r["headers"].get("authorization") for r in server.requests if r["path"].endswith("/chat/completions")]
        finally:
            kernel.stop()
    assert turn.status == "ok", turn.texts()
    assert "ENVIRON None None" in seen and "PATH=" in seen and "PROC-PARENT" in seen, seen[:2000]
    assert OTHER not in seen, "the python tool's code found the model key in the magics"
    # The person's own cells keep their environment.
    assert mine.status == "ok" and "True" in mine.streams, mine.streams
    assert again.status == "ok" and auth == [f"Bearer {OTHER}"] * 3


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_processes_the_python_tool_starts_die_with_a_killed_kernel_ROBUST_3(tmp_path):
    code = "\n".join([
        "import subprocess",
        "child = subprocess.Popen(['sleep', '300'])",
        "out = subprocess.run(['sh', '-c', 'sleep 301 >/dev/null 2>&1 & echo $!'], capture_output=True, text=True)",
        "print('PIDS', child.pid, out.stdout.strip())",
    ])
    with LLMServer(max_hang=20) as server:
        kernel = start_kernel(tmp_path, server)
        try:
            assert kernel.run("/approval full").status == "ok"
            server.add({"tool_calls": [{"name": "python", "arguments": {"code": code}}]}, {"text": "Started."})
            run = kernel.run("Start two sleepers", actions=ALLOW)
            seen = tool_results(server.bodies("chat")[1])
            pids = [int(p) for p in seen.split("PIDS", 1)[1].split()[:2]]
            assert all(_alive(p) for p in pids), seen
            os.kill(kernel.km.provisioner.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while any(_alive(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.1)
            survivors = [p for p in pids if _alive(p)]
        finally:
            for pid in pids if "pids" in locals() else ():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            kernel.driver.kc.stop_channels()
            kernel.km.shutdown_kernel(now=True)
    assert run.status == "ok", run.texts()
    assert not survivors, f"processes the python tool started outlived the killed kernel: {survivors}"
