"""Host overhead of MCP tools, against the SDK used directly.

1. A call: ``McpTool.run`` (argument check, the hop to the MCP loop thread and back,
   result mapping) against ``ClientSession.call_tool`` on an SDK stdio client of the
   same server, in the caller's own loop. Lowest time of alternating rounds.
2. Getting the tools of a fresh server: a session's first catalog build with an
   ``mcp.json`` (process under the jobs supervisor, initialize, tools/list, the whole
   catalog) against ``stdio_client`` + ``initialize`` + ``list_tools`` of the same server.

The server is tests/mcp/servers/stdio_server.py (the SDK's server side).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from crystal_kernel.core.config import load_config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider

SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "stdio_server.py"
ARGS = {"text": "hello"}


def _session(root: Path) -> Session:
    home, ws = root / "home", root / "ws"
    home.mkdir(parents=True, exist_ok=True)
    ws.mkdir(exist_ok=True)
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable,
                                                                     "args": [str(SERVER)]}}}))
    return Session(workspace=ws, config=load_config(home), provider=ScriptedProvider([]), person_present=False)


async def _direct(action):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=dict(os.environ))
    # Opening /dev/null never blocks.
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                await client.list_tools()
                # Inside the session: once its block ends the SDK closes the connection
                # (every request after that fails with "Connection closed").
                return await action(client)


async def _calls(rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        session = _session(Path(tmp))
        await session.prepare_tools()
        tool = session.tool("demo_echo")
        ctx = session.tool_context(NoPerson(), call_id="b")

        async def measure(client):
            ours, ref = [], []
            for _ in range(5):
                await tool.run(tool.parse(ARGS), ctx)
                await client.call_tool("echo", ARGS)
            for _ in range(rounds):
                start = time.perf_counter()
                await tool.run(tool.parse(ARGS), ctx)
                ours.append(time.perf_counter() - start)
                start = time.perf_counter()
                await client.call_tool("echo", ARGS)
                ref.append(time.perf_counter() - start)
            return min(ours), min(ref)

        try:
            return await _direct(measure)
        finally:
            await session.close()


async def _starts(rounds: int) -> tuple[float, float]:
    ours, ref = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            session = _session(Path(tmp))
            start = time.perf_counter()
            await session.prepare_tools()
            ours.append(time.perf_counter() - start)
            await session.close()
        start = time.perf_counter()

        async def nothing(client):
            return None

        await _direct(nothing)
        ref.append(time.perf_counter() - start)
    return min(ours), min(ref)


def main(call_rounds: int = 40, start_rounds: int = 3) -> list[dict]:
    call_ours, call_ref = asyncio.run(_calls(call_rounds))
    start_ours, start_ref = asyncio.run(_starts(start_rounds))
    return [
        {"name": "mcp call (echo, stdio)", "ours": round(call_ours * 1000, 3), "reference": round(call_ref * 1000, 3),
         "unit": "ms", "ratio": round(call_ours / call_ref, 3), "target": {"ratio_max": 1.5}, "met": None},
        {"name": "mcp first catalog (start + list)", "ours": round(start_ours * 1000, 1),
         "reference": round(start_ref * 1000, 1), "unit": "ms", "ratio": round(start_ours / start_ref, 3),
         "target": {"ratio_max": 1.3}, "met": None},
    ]


if __name__ == "__main__":
    for row in main():
        print(row)
