"""MCP-R: Crystal is an MCP client on both lines of the ``mcp`` SDK. The real `crystal run`
command runs in a child process on the venv's mcp 1.x, and on mcp 2.x from build/mcp2
(made by `make mcp-2`'s stamp, a prerequisite of `make test`), first on its PYTHONPATH as
`pip install mcp-server-time` into Crystal's environment would leave it. Each run reaches
three real servers: the stdio test server and the streamable-HTTP test server (both
written with 1.x's server side) and the reference server mcp-server-time (written with
2.x), through the loopback model server."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import PY, stdio_entry, wait_until, write_config

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
ROOT = Path(__file__).resolve().parents[2]
MCP2 = ROOT / "build" / "mcp2"


def sdk2_folder() -> Path:
    """build/mcp2, made once (Makefile target; about a second) if this run is the first."""
    if not (MCP2 / ".installed").exists():
        MCP2.parent.mkdir(exist_ok=True)
        with open(MCP2.parent / ".mcp2.lock", "w") as lock:  # xdist workers make it once
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (MCP2 / ".installed").exists():
                made = subprocess.run(["make", "-s", f"PY={PY}", "build/mcp2/.installed"], cwd=ROOT,
                                      capture_output=True, text=True, timeout=300)
                assert made.returncode == 0, f"make build/mcp2/.installed failed:\n{made.stderr[-2000:]}"
    return MCP2


def sdk_major(pythonpath: str) -> str:
    """The `mcp` SDK version a child process with this PYTHONPATH imports."""
    # Distributions are found in path order: build/mcp2's first when it leads PYTHONPATH.
    probe = "import importlib.metadata as m; print(m.version('mcp'))"
    out = subprocess.run([PY, "-c", probe], env=dict(os.environ, PYTHONPATH=pythonpath),
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("line", ["1.x", "2.x"])
def test_crystal_run_calls_stdio_http_and_a_2x_reference_server(home, workspace, http_server, line):
    """Text, an image, a timeout that reaches the server as a cancellation, and a tool
    of a server written with 2.x: all work with Crystal's client on either SDK line
    (before MCP-R, every server failed on 2.x: "'ListToolsResult' object has no
    attribute 'nextCursor'")."""
    mcp2 = sdk2_folder()
    pythonpath = str(mcp2) if line == "2.x" else ""
    assert sdk_major(pythonpath).startswith(line[0]), f"the child would not run mcp {line}"
    write_config(home / "mcp.json", {
        "demo": stdio_entry(),
        "web": {"url": http_server.url, "timeoutSeconds": 3},
        # A server written with mcp 2.x, in both runs.
        "time": {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                 "env": {"PYTHONPATH": str(mcp2)}, "startupTimeoutSeconds": 60},
    })
    replies = [
        {"tool_calls": [{"name": "demo_echo", "arguments": {"text": "over stdio"}}]},
        {"tool_calls": [{"name": "demo_picture", "arguments": {}}]},
        {"tool_calls": [{"name": "web_echo", "arguments": {"text": "over http"}}]},
        {"tool_calls": [{"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"tool_calls": [{"name": "web_slow", "arguments": {"seconds": 60}}]},
        {"text": "Done."},
    ]
    with LLMServer(replies) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url,
                   CRYSTAL_MODEL="gpt-4o", OPENAI_API_KEY="sk-test", PYTHONPATH=pythonpath)
        out = subprocess.run([CRYSTAL, "run", "use the tools", "--workspace", str(workspace), "--approval", "full",
                              "--format", "jsonl"], capture_output=True, text=True, env=env, timeout=200,
                             stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    notes = [e["text"] for e in events if e["type"] == "note"]
    assert not any("could not start" in n for n in notes), notes
    results = {e["name"]: e for e in events if e["type"] == "tool_result"}
    assert results["demo_echo"]["ok"] and results["demo_echo"]["text"] == "echo: over stdio"
    assert results["demo_picture"]["ok"] and results["demo_picture"]["images"] == [{"mimeType": "image/png"}]
    assert results["web_echo"]["ok"] and results["web_echo"]["text"] == "echo: over http"
    now = results["time_get_current_time"]
    assert now["ok"] and json.loads(now["text"])["timezone"] == "UTC", now
    slow = results["web_slow"]
    assert not slow["ok"] and "timed out after 3 seconds" in slow["text"], slow
    assert wait_until(lambda: (http_server.marks / "cancelled").exists(), 15), "the server never saw the cancellation"
    assert events[-1]["type"] == "turn_end"
