"""The base of the tools that change one file named by their ``path`` argument (edit,
write, notebook_edit): write risk, and an approval that shows the change before it is
made (GUARD-4)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools

from crystal_kernel.tools._proposed import proposed_diff
from crystal_kernel.tools.base import Classification, InputT, Risk, Tool, ToolContext, ToolResult


class FileChangeTool(Tool[InputT]):
    """A tool that changes the file at ``args.path``. ``classify`` says how to make
    :meth:`preview`, the change a person approves (made only when one is asked); ``run`` does the file work of :meth:`change` in a worker
    thread (ROBUST-3: a file system that stops answering, a hung network mount, cannot
    hold the turn, and a cancel returns at once)."""

    risk = Risk.WRITE
    path_arguments = ("path",)

    def classify(self, args: InputT, ctx: ToolContext) -> Classification:
        base = super().classify(args, ctx)
        # replace keeps every other field (host_owned, TRUST-3). The preview reads the
        # file: approval makes it only when it asks a person (Classification.make_preview).
        return dataclasses.replace(base, make_preview=functools.partial(self.preview, args, ctx))

    def preview(self, args: InputT, ctx: ToolContext) -> str | None:
        """The diff against the file, with its real line numbers and context, for every
        front's approval; None when the call would fail anyway (its error follows)."""
        return proposed_diff(ctx.access, self.name, args.model_dump())

    async def run(self, args: InputT, ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(self.change, args, ctx)

    def change(self, args: InputT, ctx: ToolContext) -> ToolResult:  # pragma: no cover
        """Make the change (in a worker thread) and say what changed."""
        raise NotImplementedError
