"""The sandbox of the processes one tool call starts (SANDBOX-1, SANDBOX-2; jobs/sandbox.py)."""

from __future__ import annotations

import os

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.sandbox import Sandbox, sandbox_for
from crystal_kernel.tools.base import ToolContext


def tool_sandbox(ctx: ToolContext) -> Sandbox | None:
    """The workspace, the folders the person opened with /access (rw writable, ro
    readable) and the session's private temp; None when the ``sandbox`` setting is off
    or neither bubblewrap nor Landlock works here. ToolError (one line) when one of those
    folders now leads elsewhere (:func:`moved_folder`)."""
    writable = tuple(rule.path for rule in ctx.access.directories if rule.mode == "rw")
    readable = tuple(rule.path for rule in ctx.access.directories if rule.mode != "rw")
    sandbox = sandbox_for(ctx.config, ctx.workspace, writable=writable, readable=readable, session=ctx.session_id)
    if sandbox is not None:
        problem = moved_folder(ctx)
        if problem:
            raise ToolError(problem)
    return sandbox


def moved_folder(ctx: ToolContext) -> str | None:
    """SANDBOX-2: why a folder the sandbox would be handed is refused, or None.

    The workspace and each /access folder were resolved when the session opened them
    (core/access.py), so each must still resolve to itself. One replaced since by a
    symbolic link (a folder in temp, renamed by a command and linked to the Crystal Home)
    would make the sandbox follow the link and open that place instead."""
    folders = [(ctx.workspace, "The workspace", "open a session in the folder you mean")]
    folders += [(rule.path, "The folder added with /access", "remove it with /access remove, and add it again "
                 "if the new place is meant") for rule in ctx.access.directories]
    for folder, what, fix in folders:
        real = os.path.realpath(folder)
        if real != str(folder):
            return (f"{what} {folder} now leads to {real} through a symbolic link (it was replaced after it "
                    f"was opened), so commands are not run; {fix}.")
    return None
