"""The live parts of one session: its provider and reviewer, its tool source (which
owns the MCP servers), the catalog built from it, and its background jobs.

A :class:`SessionRuntime` is the one owner of everything a session opens: each part
registers its closing on an :class:`contextlib.AsyncExitStack` when it is opened, and
:meth:`SessionRuntime.aclose` closes them all once, newest first (the provider and the
reviewer last). The state it works for is plain data (host/state.py); what it needs to
read of the session comes through :class:`crystal_kernel.host.view.SessionView`.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core import paths
from crystal_kernel.core.config import Config
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.host.approval import Reviewer
from crystal_kernel.host.tool_sources import SessionTools
from crystal_kernel.host.view import SessionView
from crystal_kernel.jobs import sandbox, spawner
from crystal_kernel.jobs.bwrap import remove_private_temp
from crystal_kernel.providers.base import Provider
from crystal_kernel.tools.base import Tool
from crystal_kernel.tools.exec_sets import ExecTool

if TYPE_CHECKING:
    from crystal_kernel.jobs.manager import JobManager


# Tools whose processes the spawn server starts (jobs/spawner.py).
_SPAWNING_TOOLS = frozenset({"bash", "grep", "notebook_run"})


def _warm_sandboxes(config: Config, workspace: Path, names: frozenset[str], session_id: str = "") -> None:
    """In the spawn server's starting thread: the sandbox's rules, then the servers of
    bash's sandbox (when the workspace's .crystal/ is there: a missing one is made by
    the first call, which then needs a server of its own) and ripgrep's, so the first
    calls find them confined (jobs/spawner.py)."""
    rules = sandbox.warm(config, workspace, session_id)  # the session's own private temp (SANDBOX-2)
    if "bash" in names and rules is not None and (rules.mechanism == sandbox.BUBBLEWRAP
                                                  or paths.host_dir(workspace).is_dir()):
        spawner.prepare(rules)
    if names & {"grep", "glob"}:
        spawner.prepare(sandbox.read_only_sandbox())


async def _close_quietly(thing: object) -> None:
    """Await ``thing.aclose()`` when it has one; a failure to close is not the caller's."""
    closer = getattr(thing, "aclose", None)
    if closer is not None:
        try:
            await closer()
        except Exception:
            pass


class SessionRuntime:
    """Provider, reviewer, tool source, catalog and jobs of one session."""

    def __init__(self, provider: Provider, tool_source: SessionTools) -> None:
        self.provider = provider
        # The reviewer of review and audit modes (host/approval_flow.py makes the model
        # reviewer on first use); fronts may put their own in place.
        self.reviewer: Reviewer | None = None
        # Where the tools come from (host/tool_sources.py): entered before the first
        # catalog, exited when the runtime closes (which stops its MCP servers).
        self.tool_source = tool_source
        self._source_entered = False
        self._tools: list[Tool[Any]] | None = None
        # Bumped by invalidate(): a catalog built meanwhile is not kept.
        self._generation = 0
        # The catalog and its specs (see specs).
        self._specs: tuple[list[Tool[Any]], list[ToolSpec]] | None = None
        self._jobs: JobManager | None = None
        self._stack = AsyncExitStack()
        self._stack.push_async_callback(self._close_clients)

    # ----- catalog ------------------------------------------------------------------
    async def prepare_tools(self, session: SessionView) -> list[Tool[Any]]:
        """Build the catalog if it is not built, entering the tool source first. Whatever
        must start (MCP servers) starts on its own loop: the caller's event loop keeps
        serving meanwhile (a kernel answers widgets and interrupts)."""
        while self._tools is None:
            await self._enter_source()
            generation = self._generation
            tools = await self.tool_source.get_tools(session)
            if generation == self._generation:  # no /mode, /cd, /model meanwhile
                self._tools = tools
                if any(tool.name in _SPAWNING_TOOLS or isinstance(tool, ExecTool) for tool in tools):
                    # Started beside the first request, so the first call does not wait for
                    # it; the sandbox's first-use work (Landlock ABI, rules, the servers of
                    # bash's and ripgrep's sandboxes) done there too.
                    names = frozenset(tool.name for tool in tools)
                    spawner.start_server_soon(functools.partial(_warm_sandboxes, session.config, session.workspace,
                                                                names, session.id))
        return self._tools

    async def external_tools(self, session: SessionView) -> tuple[list[Tool[Any]], list[str]]:
        """Every external tool of the source whatever the mode, and the notes."""
        await self._enter_source()
        return await self.tool_source.external_tools(session)

    async def _enter_source(self) -> None:
        if not self._source_entered:
            await self.tool_source.__aenter__()
            self._source_entered = True
            self._stack.push_async_callback(self._exit_source)
            self._stack.push_async_callback(self._close_catalog)  # its tools close first

    async def _exit_source(self) -> None:
        self._source_entered = False
        await self.tool_source.__aexit__(None, None, None)

    async def _close_catalog(self) -> None:
        for tool in self._tools or []:
            await _close_quietly(tool)

    @property
    def catalog(self) -> list[Tool[Any]]:
        """The catalog :meth:`prepare_tools` built (RuntimeError before that)."""
        if self._tools is None:
            raise RuntimeError("The tool catalog is not built yet: await session.prepare_tools() first.")
        return self._tools

    def specs(self) -> list[ToolSpec]:
        """The catalog's specs, made once per catalog (a new catalog is a new list): a
        spec's schema is a fresh deep copy, and this runs before every model step."""
        tools = self.catalog
        kept = self._specs
        if kept is None or kept[0] is not tools:
            kept = self._specs = (tools, [t.spec() for t in tools])
        return list(kept[1])

    def invalidate(self) -> None:
        """The next :meth:`prepare_tools` builds a new catalog (mode, model, flags,
        workspace or trust changed)."""
        self._tools = None
        self._generation += 1

    # ----- jobs ---------------------------------------------------------------------
    def jobs(self, workspace: Path, session_id: str, config: Config) -> JobManager:
        """The session's background jobs (BG-*), started on first use."""
        if self._jobs is None:
            # Imported on first use, not above: `crystal run` sends its first request
            # before loading what it may not need (tests/cli/test_startup.py); no cycle.
            from crystal_kernel.jobs.manager import JobManager

            self._jobs = JobManager(workspace, session_id, timeout_seconds=config.background_bash_timeout_seconds,
                                    log_dir=paths.job_dir(workspace, session_id), config=config)
            # Off the event loop: a stubborn job takes seconds to stop.
            self._stack.push_async_callback(self._jobs.aclose)
        return self._jobs

    @property
    def has_jobs(self) -> bool:
        return self._jobs is not None

    def move_to(self, workspace: Path) -> None:
        """/cd: running jobs keep running; new ones start in ``workspace``."""
        if self._jobs is not None:
            self._jobs.move_to(workspace)
        self.invalidate()

    # ----- clients --------------------------------------------------------------------
    @asynccontextmanager
    async def lend(self, provider: Provider) -> AsyncIterator[None]:
        """Run with ``provider`` and no reviewer in place, then put the own ones back and
        close the lent ones (and a reviewer made meanwhile): HTTP connections belong to
        the loop that opened them, so a worker loop brings its own."""
        saved_provider, saved_reviewer = self.provider, self.reviewer
        self.provider, self.reviewer = provider, None
        try:
            yield
        finally:
            if self.provider is provider:
                self.provider = saved_provider
            reviewer, self.reviewer = self.reviewer, saved_reviewer
            await _close_quietly(reviewer)
            await _close_quietly(provider)

    async def _close_clients(self) -> None:
        await _close_quietly(self.provider)
        # The reviewer may hold its own provider (reviewModel).
        await _close_quietly(self.reviewer)

    async def aclose(self, private_temp: tuple[Path, str] | None = None) -> None:
        """Close everything opened, once, newest first; the runtime may be used again
        afterwards (a new stack takes what opens next). ``private_temp``: (Crystal Home,
        session id) of a session that ends: its tool processes' private temp is removed
        once its jobs are stopped (SANDBOX-2)."""
        stack, self._stack = self._stack, AsyncExitStack()
        self._stack.push_async_callback(self._close_clients)
        await stack.aclose()
        if private_temp is not None:
            remove_private_temp(*private_temp)
