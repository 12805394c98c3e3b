"""SANDBOX-2: what a sandboxed native tool call costs, on each mechanism, against its floor.

Our side is the whole host path of one model tool call: the ``bash`` tool running
``true`` with a session's ToolContext (argument check, the sandbox's rules and bwrap
command line built from the file system, the request to the warm spawn server, the
supervisor it forks, the shell in the sandbox, the bounded output, the exit and
"left" reports, the result text). The mechanism is forced for each row with
``CRYSTAL_SANDBOX_MECHANISM``, read at every call.

- bubblewrap: against ``subprocess.run([bwrap, *args, "--", "/bin/true"])``, where
  ``args`` are the ``--wrap`` items of the very Sandbox object the tool builds
  (``tool_sandbox(ctx).launcher_args()``), taken once outside the timing: the same
  namespaces and binds, nothing of Crystal's. That is the mechanism's floor. Target:
  median within 1.3x (SANDBOX-2).
- Landlock: the same call against ``subprocess.run(["/bin/true"])`` (no target: it puts
  the two mechanisms' costs side by side).
- bubblewrap against Landlock: the two tool calls themselves (reported).
- The first bash call of a new session, bubblewrap against Landlock (reported): what a
  session that runs a single command pays, the start of its sandbox's server included
  (a headless turn's shell call, bench_agents.py).

Whatever path the code takes is measured (one bwrap per call, or a lasting server in
the sandbox): before timing, a call checks what it ran in (a PID namespace not the
host's for bubblewrap, the host's for Landlock, and ``.crystal/`` not writable on
both). Each round times all four sides in turn (the bubblewrap call, bare bwrap, the
Landlock call, bare ``/bin/true``), after warm-ups that start the spawn servers, so the
load of a shared machine falls on all alike; figures are the median and the 90th
percentile of each side. A mechanism that does not work here is a skipped row with the
reason.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench._support import row, skipped_row
from crystal_kernel.core.config import Config, load_config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.jobs import bwrap
from crystal_kernel.jobs.sandbox import BUBBLEWRAP, LANDLOCK, MECHANISM_ENV, landlock_abi
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools._sandbox import tool_sandbox
from crystal_kernel.tools.base import Tool, ToolContext
from crystal_kernel.tools.catalog import load_builtin

ROUNDS = int(os.environ.get("BENCH_SANDBOX_ROUNDS", "200"))
WARMUPS = 5
FIRST_ROUNDS = int(os.environ.get("BENCH_SANDBOX_FIRST_ROUNDS", "15"))
TRUE = "/bin/true"


def p90(values: list[float]) -> float:
    """The 90th percentile (inclusive method: a value between two samples)."""
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


async def call(tool: Tool[Any], ctx: ToolContext, command: str) -> str:
    """One bash tool call; its text, or RuntimeError when it failed."""
    result = await tool.run(tool.parse({"command": command}), ctx)
    if not result.ok:
        raise RuntimeError(f"bash {command!r} failed: {result.text[:300]}")
    return result.text


async def check_confined(tool: Tool[Any], ctx: ToolContext, mechanism: str) -> None:
    """The call really ran in ``mechanism``'s sandbox: .crystal/ refused, and a PID
    namespace of its own under bubblewrap (the host's under Landlock)."""
    marker = ctx.workspace / ".crystal" / "bench-probe"
    text = await call(tool, ctx, f"readlink /proc/self/ns/pid; touch {marker} 2>/dev/null && echo wrote || true")
    if marker.exists() or "wrote" in text:
        raise RuntimeError(f"{mechanism}: a command wrote .crystal/ (the sandbox is not on)")
    own = text.split()[0] != os.readlink("/proc/self/ns/pid")
    if own != (mechanism == BUBBLEWRAP):
        raise RuntimeError(f"{mechanism}: the command ran in {'its own' if own else 'the host'}'s PID namespace")


class Side:
    """One timed side of a row: a tool call under a mechanism, or a bare reference."""

    def __init__(self, name: str, run: Callable[[], Awaitable[object]], mechanism: str | None = None) -> None:
        self.name, self.run, self.mechanism = name, run, mechanism
        self.times: list[float] = []

    async def once(self) -> float:
        # The mechanism is read from the environment at every call (jobs/sandbox.py).
        if self.mechanism is not None:
            os.environ[MECHANISM_ENV] = self.mechanism
        start = time.perf_counter()
        await self.run()
        return time.perf_counter() - start


async def interleaved(sides: list[Side], rounds: int) -> None:
    """Time each side once per round, in turn, after warm-ups of all (the first starts
    the spawn server and, on Landlock, its confined server)."""
    for _ in range(WARMUPS):
        for side in sides:
            await side.once()
    for _ in range(rounds):
        for side in sides:
            side.times.append(await side.once())


def bare(argv: list[str]) -> Callable[[], Awaitable[object]]:
    """The reference: ``subprocess.run(argv)``, checked, run as a caller without an event
    loop runs it (blocking)."""

    async def run() -> object:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True)  # noqa: ASYNC221

    return run


def rows_for(label: str, ours: list[float], ref: list[float], target: dict[str, Any] | None,
             note: str | None = None) -> list[dict[str, Any]]:
    out = [row(f"{label} (median)", statistics.median(ours) * 1000, statistics.median(ref) * 1000, "ms", target,
               note),
           row(f"{label} (p90)", p90(ours) * 1000, p90(ref) * 1000, "ms")]
    for r in out:
        print(f"  {r['name']:70} ours {r['ours']:7.2f} ms  reference {r['reference']:7.2f} ms  "
              f"ratio {r['ratio']:.3f}x", flush=True)
    return out


# Short enough for the table's 56 characters with " (median)" or " (p90)".
BWRAP_LABEL = "sandbox: bash true, bwrap vs bare bwrap"
LANDLOCK_LABEL = "sandbox: bash true, Landlock vs /bin/true"
BOTH_LABEL = "sandbox: bash true, bwrap vs Landlock"
FIRST_LABEL = "sandbox: first bash call, bwrap vs Landlock"


def wrap_items(launcher: list[str]) -> list[str]:
    """The bwrap command line in the supervisor's options (each item after ``--wrap``);
    its first item is the bwrap program."""
    found: list[str] = []
    index = 0
    while index < len(launcher):
        if launcher[index] == "--wrap" and index + 1 < len(launcher):
            found.append(launcher[index + 1])
            index += 2
        else:
            index += 1
    if not found or os.path.basename(found[0]) != "bwrap" and found[0] != bwrap.program():
        raise RuntimeError(f"no bwrap command line in the sandbox's options: {launcher[:6]}")
    return found


async def first_calls(workspace: Path, config: Config) -> list[dict[str, Any]]:
    """The first bash call of a session, on each mechanism: what a session that runs one
    command (a headless turn) pays. A new session has a private temp of its own, so
    its sandbox, and the server that serves it, are new too."""
    tool = load_builtin("bash")
    times: dict[str, list[float]] = {BUBBLEWRAP: [], LANDLOCK: []}
    for _ in range(FIRST_ROUNDS):
        for mechanism, found in times.items():
            os.environ[MECHANISM_ENV] = mechanism
            session = Session(workspace=workspace, config=config, provider=ScriptedProvider([]),
                              person_present=False)
            try:
                ctx = session.tool_context(NoPerson())
                start = time.perf_counter()
                await call(tool, ctx, "true")
                found.append(time.perf_counter() - start)
            finally:
                await session.close()
    out = [row(FIRST_LABEL, statistics.median(times[BUBBLEWRAP]) * 1000, statistics.median(times[LANDLOCK]) * 1000,
               "ms", None, f"a new session's first bash call (its sandbox's server started then, unless one "
               f"serves it already), median of {FIRST_ROUNDS} sessions each, interleaved")]
    print(f"  {out[0]['name']:70} ours {out[0]['ours']:7.2f} ms  reference {out[0]['reference']:7.2f} ms  "
          f"ratio {out[0]['ratio']:.3f}x", flush=True)
    return out


def tool_call(tool: Tool[Any], ctx: ToolContext) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        return await call(tool, ctx, "true")

    return run


async def _run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    tool = load_builtin("bash")
    with tempfile.TemporaryDirectory(prefix="crystal-bench-sandbox-") as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        workspace.mkdir()
        config = load_config(home, overrides={"approval": "full"})
        session = Session(workspace=workspace, config=config, provider=ScriptedProvider([]), person_present=False)
        ctx = session.tool_context(NoPerson())
        before = os.environ.get(MECHANISM_ENV)
        sides: dict[str, tuple[Side, Side]] = {}
        notes: dict[str, str] = {}
        try:
            os.environ[MECHANISM_ENV] = BUBBLEWRAP
            sandbox = tool_sandbox(ctx) if bwrap.program() else None
            if sandbox is None or sandbox.mechanism != BUBBLEWRAP:
                why = "bwrap is not installed or cannot make its namespaces here"
                rows.append(skipped_row(f"{BWRAP_LABEL} (median)", "ms", why, None, {"ratio_max": 1.3}))
            else:
                # The bwrap command line of the very Sandbox the tool builds (launcher_args
                # asks the file system again at each call; taken once here, outside the timing).
                wrapped = wrap_items(sandbox.launcher_args())
                await check_confined(tool, ctx, BUBBLEWRAP)
                sides[BUBBLEWRAP] = (Side("bubblewrap call", tool_call(tool, ctx), BUBBLEWRAP),
                                     Side("bare bwrap", bare([*wrapped, "--", TRUE])))
                notes[BUBBLEWRAP] = (f"the bash tool under bubblewrap vs subprocess.run of bwrap with the same "
                                      f"{len(wrapped) - 1} arguments; {ROUNDS} rounds, interleaved")
            os.environ[MECHANISM_ENV] = LANDLOCK
            sandbox = tool_sandbox(ctx) if landlock_abi() >= 1 else None
            if sandbox is None or sandbox.mechanism != LANDLOCK:
                rows.append(skipped_row(f"{LANDLOCK_LABEL} (median)", "ms", "Landlock does not work here"))
            else:
                await check_confined(tool, ctx, LANDLOCK)
                sides[LANDLOCK] = (Side("Landlock call", tool_call(tool, ctx), LANDLOCK),
                                   Side("bare /bin/true", bare([TRUE])))
                notes[LANDLOCK] = (f"the bash tool under Landlock (ABI {landlock_abi()}) vs subprocess.run(['/bin/true']); "
                                   f"{ROUNDS} rounds, interleaved")
            # All sides in one loop: each round times every one of them, so the load of a
            # shared machine falls on all alike.
            await interleaved([side for pair in sides.values() for side in pair], ROUNDS)
            first = await first_calls(workspace, config) if len(sides) == 2 else []
        finally:
            if before is None:
                os.environ.pop(MECHANISM_ENV, None)
            else:
                os.environ[MECHANISM_ENV] = before
            await session.close()
    for mechanism, label, target in ((BUBBLEWRAP, BWRAP_LABEL, {"ratio_max": 1.3}), (LANDLOCK, LANDLOCK_LABEL, None)):
        if mechanism in sides:
            ours, ref = sides[mechanism]
            rows += rows_for(label, ours.times, ref.times, target, notes[mechanism])
    if len(sides) == 2:
        rows += rows_for(BOTH_LABEL, sides[BUBBLEWRAP][0].times, sides[LANDLOCK][0].times, None)
    return rows + first


def main() -> list[dict[str, Any]]:
    return asyncio.run(_run())


if __name__ == "__main__":
    main()
