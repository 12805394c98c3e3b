"""`crystal tools list|show|call` on MCP tools, through the installed `crystal` command
in a subprocess; no server process outlives the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import alive, pids, stdio_entry, wait_until, write_config

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def crystal(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CRYSTAL, *args], cwd=cwd, capture_output=True, text=True, timeout=90)


# Six `crystal` commands, each starting the SDK on both sides (seconds each under load).
@pytest.mark.timeout(360)
def test_list_show_and_call(home, workspace, tmp_path):
    pidfile = tmp_path / "pids"
    write_config(workspace / ".crystal" / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    listed = crystal("tools", "list", "--format", "json", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    echo = next(t for t in data["tools"] if t["name"] == "demo_echo")
    assert echo["server"] == "demo" and echo["tool"] == "echo" and echo["catalogs"] == ["work"]
    assert "MCP server 'demo'" in echo["source"] and echo["inputSchema"]["required"] == ["text"]
    assert data["notes"] == []

    text = crystal("tools", "list", cwd=workspace)
    assert "demo_echo" in text.stdout and "from MCP server 'demo' (stdio:" in text.stdout

    shown = crystal("tools", "show", "demo_picture", cwd=workspace)
    assert shown.returncode == 0 and "server: demo" in shown.stdout

    called = crystal("tools", "call", "demo_echo", "--args", '{"text": "cli"}', cwd=workspace)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"ok": True, "text": "echo: cli", "images": []}

    image = crystal("tools", "call", "demo_picture", "--images", cwd=workspace)
    assert json.loads(image.stdout)["images"] == [{"mimeType": "image/png", "bytes": 24}]
    text_only = crystal("tools", "call", "demo_picture", cwd=workspace)
    assert text_only.returncode == 1
    assert json.loads(text_only.stdout)["text"] == "This model cannot accept tool images."

    started = pids(pidfile)
    assert len(started) == 6  # one server per command: each listing and each call
    assert wait_until(lambda: not any(alive(p) for p in started), 10), "a server outlived the crystal command"


def test_call_refuses_bad_arguments_and_names(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    bad = crystal("tools", "call", "demo_echo", "--args", '{"text": 3}', cwd=workspace)
    assert bad.returncode == 1 and "Invalid arguments for demo_echo" in json.loads(bad.stdout)["text"]
    missing = crystal("tools", "call", "demo_nothing", cwd=workspace)
    assert missing.returncode == 2 and "No external tool named 'demo_nothing'" in missing.stderr
