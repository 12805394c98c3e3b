"""The sandbox of the processes one tool call starts (SANDBOX-1, SANDBOX-2; jobs/sandbox.py)."""

from __future__ import annotations

from crystal_kernel.jobs.sandbox import Sandbox, sandbox_for
from crystal_kernel.tools.base import ToolContext


def tool_sandbox(ctx: ToolContext) -> Sandbox | None:
    """The workspace, the folders the person opened with /access (rw writable, ro
    readable) and the session's private temp; None when the ``sandbox`` setting is off
    or neither bubblewrap nor Landlock works here."""
    writable = tuple(rule.path for rule in ctx.access.directories if rule.mode == "rw")
    readable = tuple(rule.path for rule in ctx.access.directories if rule.mode != "rw")
    return sandbox_for(ctx.config, ctx.workspace, writable=writable, readable=readable, session=ctx.session_id)
