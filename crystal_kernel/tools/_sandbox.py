"""The sandbox of the processes one tool call starts (SANDBOX-1; jobs/sandbox.py)."""

from __future__ import annotations

from crystal_kernel.jobs.sandbox import Sandbox, sandbox_for
from crystal_kernel.tools.base import ToolContext


def tool_sandbox(ctx: ToolContext) -> Sandbox | None:
    """The workspace and the folders the person opened for writing with /access; None
    when the ``sandbox`` setting is off or the system has no Landlock."""
    extra = tuple(rule.path for rule in ctx.access.directories if rule.mode == "rw")
    return sandbox_for(ctx.config, ctx.workspace, writable=extra)
