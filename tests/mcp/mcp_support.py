"""Helpers for the MCP tests: configuration files, sessions, process checks, and a
streamable-HTTP test server on loopback (all real processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.providers.base import Capabilities
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolResult

PY = sys.executable
SERVERS = Path(__file__).parent / "servers"
STDIO_SERVER = SERVERS / "stdio_server.py"
HTTP_SERVER = SERVERS / "http_server.py"


# The test servers are written with the project venv's mcp 1.x server side (FastMCP),
# also when the client under test runs on 2.x (PYTHONPATH=build/mcp2, test_mcp_sdk_lines.py):
# they start with no PYTHONPATH of their own.
SERVER_ENV = {"PYTHONPATH": ""}

# The test servers import the SDK's server side (FastMCP): with jsonschema's format
# checkers that takes seconds on a loaded two-core machine, beyond the 30 s default.
TEST_STARTUP_SECONDS = 60


def stdio_entry(*extra_args: str, pidfile: Path | None = None, marks: Path | None = None, **keys: Any) -> dict:
    keys.setdefault("startupTimeoutSeconds", TEST_STARTUP_SECONDS)
    env = dict(SERVER_ENV)
    if pidfile is not None:
        env["MCP_TEST_PIDFILE"] = str(pidfile)
    if marks is not None:
        env["MCP_TEST_MARKS"] = str(marks)
    return {"command": PY, "args": [str(STDIO_SERVER), *extra_args], "env": env, **keys}


def write_config(path: Path, servers: dict[str, Any], *, trusted: bool = True) -> Path:
    """Write an mcp.json; a workspace one is trusted by the person unless ``trusted`` is
    False (TRUST-2; tests/security attacks untrusted files)."""
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.core.trust import TrustStore, needs_trust

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    if trusted and needs_trust(home_dir(), path):
        TrustStore(home_dir()).trust("mcp", path)
    return path


def session_for(workspace: Path, replies: list | None = None, *, mode: str = "work", approval: str = "full",
                images: bool = True) -> Session:
    config = load_config(overrides={"approval": approval, "mode": mode})
    provider = ScriptedProvider(replies or [], capabilities=Capabilities(images=images))
    return Session(workspace=workspace, config=config, provider=provider, person_present=False)


async def call(session: Session, name: str, arguments: dict[str, Any], *, images_ok: bool = True) -> ToolResult:
    """Parse and run as the loop would (a ToolError becomes a failed result)."""
    await session.prepare_tools()
    tool = session.tool(name)
    assert tool is not None, f"{name} not in {[t.name for t in session.catalog]}"
    ctx = session.tool_context(NoPerson(), call_id="c1", images_ok=images_ok)
    try:
        return await tool.run(tool.parse(arguments), ctx)
    except ToolError as exc:
        return ToolResult.fail(str(exc))


def pids(pidfile: Path) -> list[int]:
    if not pidfile.exists():
        return []
    return [int(line) for line in pidfile.read_text().split()]


def alive(pid: int) -> bool:
    """Running and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"


def wait_until(check: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """``servers/http_server.py`` in a child process on 127.0.0.1; can be killed and
    started again on the same port."""

    def __init__(self, folder: Path, lost_session: str = "404"):
        self.lost_session = lost_session  # how it refuses an unknown session (http_server.py)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = folder / "deletes.log"
        self.pidfile = folder / "http-pids"
        self.marks = folder / "http-marks"
        self.marks.mkdir(exist_ok=True)
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, MCP_TEST_PIDFILE=str(self.pidfile), MCP_TEST_MARKS=str(self.marks), **SERVER_ENV)
        self.proc = subprocess.Popen([PY, str(HTTP_SERVER), str(self.port), str(self.log), self.lost_session], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_until(self._listening, TEST_STARTUP_SECONDS), "the HTTP MCP server did not start"

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def deletes(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []
