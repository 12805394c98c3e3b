"""The bash tool: one shell command in the workspace, bounded in time and output.

The command runs as ``bash -c`` in a new session with stdin closed. Output (stdout and
stderr interleaved) is read incrementally into a bounded buffer. On timeout or
cancellation the whole process tree is stopped (TERM, then KILL) within about 2 s.
Processes a command leaves running in the background after it exits would hold its
output open forever; they are stopped too (bash_start is the tool for those).
"""

from __future__ import annotations

import asyncio
import os

from pydantic import Field

from crystal_kernel.errors import ToolError
from crystal_kernel.tools._index import note_change
from crystal_kernel.tools._process import BoundedOutput, kill_process_tree
from crystal_kernel.tools.base import Classification, Risk, Tool, ToolContext, ToolInput, ToolResult

# After the shell exits, how long to wait for the rest of its output.
DRAIN_SECONDS = 0.5
KILL_GRACE_SECONDS = 1.0
POLL_SECONDS = 0.05
READ_CHUNK = 65536


class BashInput(ToolInput):
    command: str = Field(description="The shell command to run with bash -c in the workspace folder.")
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Stop the command after this many seconds (default: the configured bashTimeoutSeconds).",
    )


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # Nothing can answer a pager or an editor: stdin is closed.
    env.setdefault("PAGER", "cat")
    env["GIT_PAGER"] = "cat"
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    return env


class BashTool(Tool):
    name = "bash"
    Input = BashInput
    risk = Risk.EXECUTE

    def classify(self, args: BashInput, ctx: ToolContext) -> Classification:
        # The command itself is what a person may allow for the session.
        return Classification(self.risk, pattern=args.command)

    async def run(self, args: BashInput, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            raise ToolError("The command is empty.")
        timeout = args.timeout_seconds or ctx.config.bash_timeout_seconds
        limit = ctx.config.tool_output_limit
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", args.command,
                cwd=str(ctx.workspace),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                env=_environment(),
            )
        except OSError as exc:
            raise ToolError(f"Cannot start bash: {exc.strerror or exc}.") from None

        output = BoundedOutput(limit)
        assert proc.stdout is not None
        stdout = proc.stdout

        async def pump() -> None:
            while True:
                chunk = await stdout.read(READ_CHUNK)
                if not chunk:
                    return
                output.feed(chunk)

        reader = asyncio.ensure_future(pump())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        timed_out = leftovers = False
        try:
            # Poll the exit status: Process.wait() also waits for the pipe to close,
            # which a background grandchild may keep open.
            while proc.returncode is None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    timed_out = True
                    break
                await asyncio.wait({reader}, timeout=min(POLL_SECONDS, remaining))
            if not timed_out:
                done, _ = await asyncio.wait({reader}, timeout=DRAIN_SECONDS)
                leftovers = not done
        except asyncio.CancelledError:
            note_change(ctx.workspace)
            await _stop(proc, reader)
            raise
        if timed_out or leftovers:
            await _stop(proc, reader)
        else:
            await proc.wait()

        # Anything may have changed: the next search refreshes its index.
        note_change(ctx.workspace)
        text = output.text().rstrip("\n")
        code = proc.returncode
        if timed_out:
            note = (
                f"The command timed out after {timeout:g} seconds and was stopped "
                "(its whole process tree was killed). For long-running processes use bash_start."
            )
            return ToolResult(ok=False, text=(text + "\n\n" if text else "") + note, display="terminal")
        footer = f"Exit code: {code}"
        if leftovers:
            footer += (
                "\nThe command left processes running in the background; they were stopped. "
                "Use bash_start for processes that should keep running."
            )
        body = (text + "\n\n" if text else "(no output)\n\n") + footer
        return ToolResult(ok=code == 0, text=body, display="terminal")


async def _stop(proc: asyncio.subprocess.Process, reader: asyncio.Future) -> None:
    """Kill the tree, reap the shell and finish reading; safe to await while cancelled."""

    async def stop() -> None:
        await asyncio.to_thread(kill_process_tree, proc.pid, grace=KILL_GRACE_SECONDS)
        try:
            await asyncio.wait_for(proc.wait(), 0.5)
        except asyncio.TimeoutError:
            pass
        if not reader.done():
            await asyncio.wait({reader}, timeout=0.2)
            reader.cancel()

    task = asyncio.ensure_future(stop())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # Cancelled again while stopping: the stop task still runs to the end.
        pass
