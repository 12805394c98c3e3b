"""Building the catalog never blocks the event loop: MCP servers that a session (or a
/mode, /cd, /model switch) brings start on the MCP loop while the caller's loop keeps
serving — in a kernel, widgets are answered and interrupts arrive. A timer on the
caller's loop keeps ticking while a slow server starts, both when the turn loop builds
the catalog and when /tools lists it; the session's tool source is entered before the
first catalog and exited (servers stopped) when the session closes."""

from __future__ import annotations

import asyncio
import time

from mcp_support import alive, pids, session_for, stdio_entry, wait_until, write_config

from crystal_kernel.core.config import load_config
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.tool_sources import SessionTools
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply

TICK = 0.05
# The slow server never answers: the catalog waits its whole startup bound. A blocked loop
# would show one gap that long; a serving loop only scheduling hiccups (this machine is
# shared, so a hiccup may reach a second), never half the bound.
SLOW_START = 4


async def _ticking(until: asyncio.Event) -> list[float]:
    """Timestamps of a timer on the caller's loop, until ``until`` is set."""
    ticks: list[float] = []

    async def tick() -> None:
        while not until.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(TICK)

    asyncio.ensure_future(tick())
    await asyncio.sleep(0)
    return ticks


def _largest_gap(ticks: list[float]) -> float:
    return max((b - a for a, b in zip(ticks, ticks[1:], strict=False)), default=float("inf"))


async def test_the_loop_keeps_serving_while_a_slow_server_starts(home, workspace, tmp_path):
    pidfile = tmp_path / "pids"
    write_config(home / "mcp.json", {
        "slow": stdio_entry("--hang-start", pidfile=pidfile, startupTimeoutSeconds=SLOW_START),
        "demo": stdio_entry(),
    })
    session = session_for(workspace, [text_reply("done")])
    done = asyncio.Event()
    ticks = await _ticking(done)
    try:
        started = time.monotonic()
        events = [e async for e in run_turn(session, "hi")]
        waited = time.monotonic() - started
        done.set()
        assert waited >= SLOW_START  # the turn did wait for the slow server's startup bound...
        assert len(ticks) >= 20 and _largest_gap(ticks) < SLOW_START / 2  # ...while the timer kept ticking
        assert events[-1].stop_reason == "end_turn"
        names = [t.name for t in (await session.prepare_tools())]
        assert "demo_echo" in names and not any(n.startswith("slow_") for n in names)
        assert any("MCP server 'slow'" in getattr(e, "text", "") for e in events)
        # What the model was offered: the demo server's tools.
        assert "demo_echo" in [t.name for t in session.provider.requests[0].tools]
    finally:
        done.set()
        await session.close()
    assert pids(pidfile) and wait_until(lambda: not any(alive(p) for p in pids(pidfile)), 10)


async def test_tools_command_after_a_mode_switch_does_not_block(home, workspace):
    write_config(home / "mcp.json", {"demo": stdio_entry()})
    session = session_for(workspace, mode="plan")
    try:
        await session.prepare_tools()
        write_config(home / "mcp.json", {"demo": stdio_entry(), "slow": stdio_entry("--hang-start",
                                                                                  startupTimeoutSeconds=SLOW_START)})
        await run_command(session, "/mode work")  # the next catalog starts 'slow'
        done = asyncio.Event()
        ticks = await _ticking(done)
        result = await run_command(session, "/tools")
        done.set()
        assert "demo_echo" in result.text
        assert len(ticks) >= 20 and _largest_gap(ticks) < SLOW_START / 2
    finally:
        await session.close()


async def test_the_session_enters_and_exits_its_tool_source(home, workspace, tmp_path):
    pidfile = tmp_path / "pids"
    write_config(home / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    log: list[str] = []

    class Tracked(SessionTools):
        async def __aenter__(self):
            log.append("enter")
            return await super().__aenter__()

        async def __aexit__(self, *exc_info):
            log.append("exit")
            await super().__aexit__(*exc_info)

    session = Session(workspace=workspace, config=load_config(overrides={"approval": "full"}),
                      provider=ScriptedProvider([]), person_present=False, tool_source=Tracked())
    assert log == []  # nothing starts before a catalog is asked for
    await session.prepare_tools()
    session.refresh_system()
    await session.prepare_tools()  # a rebuild: still entered once
    assert log == ["enter"]
    assert "demo_echo" in [t.name for t in (await session.prepare_tools())]
    assert wait_until(lambda: pids(pidfile) and alive(pids(pidfile)[0]), 10)
    await session.close()
    assert log == ["enter", "exit"]
    assert wait_until(lambda: not alive(pids(pidfile)[0]), 10)
