"""The MCP servers of one session: which are configured, started, listed, closed.

A :class:`McpManager` is kept by its owner, an :class:`crystal_kernel.mcp.McpServers`
(a session's tool source holds one, host/tool_sources.py), across catalog rebuilds
(mode switch, ``/cd``), so servers start once and their tool lists are cached; closing
the session's tool source closes it. Servers whose entry changed are replaced, removed
ones stopped. A listing made without a session (``crystal tools list``) uses a manager
of its own that stops the servers again right after listing them.
"""

from __future__ import annotations

import atexit
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.mcp import runtime
from crystal_kernel.mcp.config import ServerConfig
from crystal_kernel.mcp.connection import STOP_SECONDS, ServerConnection, StartError
from crystal_kernel.mcp.sdk import field
from crystal_kernel.mcp.tool import McpTool

if TYPE_CHECKING:
    from crystal_kernel.core.config import Config

_LIVE: weakref.WeakSet[McpManager] = weakref.WeakSet()


class McpManager:
    """Connections by server name, for one session."""

    def __init__(self, session_id: str, host_config: Config | None = None):
        self.session_id = session_id
        self.host_config = host_config
        self.connections: dict[str, ServerConnection] = {}
        self.closed = False
        _LIVE.add(self)

    async def atools_for(self, configs: list[ServerConfig], workspace: Path, notes: list[str]) -> list[McpTool]:
        """Reconcile with ``configs``, start what never ran (all at once, bounded by the
        largest startup timeout), and return one tool per listed MCP tool. The servers
        start on the MCP loop while the caller's loop keeps serving (a kernel answers
        widgets, timers run)."""
        if self.closed:
            return []
        wanted, fresh, bound = self._plan(configs, workspace)
        if fresh:
            try:
                await runtime.run(_start_all(fresh, bound), bound + 2)
            except TimeoutError:
                pass  # each connection records its own failure below
        return self._collect(wanted, fresh, notes)

    def _plan(self, configs: list[ServerConfig],
              workspace: Path) -> tuple[dict[str, ServerConnection], list[ServerConnection], float]:
        """:meth:`_reconcile`, and how long starting the fresh ones may take together (the
        largest startup timeout, plus the time to stop one that overran)."""
        wanted, fresh = self._reconcile(configs, workspace)
        bound = max((c.config.startup_timeout for c in fresh), default=0.0) + STOP_SECONDS
        return wanted, fresh, bound

    def _reconcile(self, configs: list[ServerConfig],
                   workspace: Path) -> tuple[dict[str, ServerConnection], list[ServerConnection]]:
        """Keep, replace or drop connections to match ``configs``; return them and the
        ones to start: never ran, or never listed and due for another try."""
        wanted: dict[str, ServerConnection] = {}
        stale: list[ServerConnection] = []
        for config in configs:
            conn = self.connections.get(config.name)
            if conn is None or conn.config.key() != config.key() or conn.workspace != workspace:
                if conn is not None:
                    stale.append(conn)
                conn = ServerConnection(config, workspace, self.session_id, self.host_config)
            else:
                conn.config = config  # catalogs, timeouts and risk apply without a restart
            wanted[config.name] = conn
        stale += [c for name, c in self.connections.items() if name not in wanted]
        self.connections = wanted
        for conn in stale:
            runtime.submit(conn.stop(final=True))  # in the background: never blocks the catalog
        # Never listed: not started yet, or failed at its start and due for another try
        # (MCP-R; a catalog is built again at a mode switch, /cd or /model).
        return wanted, [c for c in wanted.values() if c.tools is None and (
            c.state == "not started" or c.state == "failed" and not c.backoff.waiting())]

    def _collect(self, wanted: dict[str, ServerConnection], fresh: list[ServerConnection],
                 notes: list[str]) -> list[McpTool]:
        for conn in fresh:
            if conn.state == "failed" or conn.tools is None:
                notes.append(start_failure_note(conn.config.where, conn.detail))
        tools: list[McpTool] = []
        for conn in wanted.values():
            for remote in conn.tools or []:
                if task_required(remote):
                    if conn in fresh:
                        notes.append(f"{conn.config.where}: its tool '{remote.name}' is left out: it only runs "
                                     "as a task (taskSupport \"required\"), which Crystal does not use.")
                    continue
                tools.append(McpTool(self, conn, remote))
        return tools

    def park(self) -> None:
        """Stop every server but keep the tool lists (a listing without a session); a
        later call starts its server again."""
        try:
            runtime.run_sync(_stop_all(list(self.connections.values()), final=False), STOP_SECONDS + 2)
        except TimeoutError:
            pass

    async def aclose(self) -> None:
        """Stop every server for good (bounded); safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        try:
            await runtime.run(_stop_all(list(self.connections.values()), final=True), STOP_SECONDS + 2)
        except Exception:
            pass  # the supervisor still ends a stdio server when this process ends

    def close_sync(self, timeout: float = STOP_SECONDS + 2) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            runtime.run_sync(_stop_all(list(self.connections.values()), final=True), timeout)
        except Exception:
            pass


def start_failure_note(where: str, detail: str) -> str:
    """One clean note for a server that did not start: its reason as a sentence, then
    the server's last stderr lines, if any."""
    reason, _, tail = (detail or "it did not start in time").partition(" Its last output on stderr:")
    note = (f"{where} could not start: {reason.strip().rstrip('.')}. Its tools are left out for now; it is tried "
            "again when the tools are next gathered (a mode switch, /cd).")
    return note + (f" Its last output on stderr:{tail}" if tail else "")


def task_required(remote: Any) -> bool:
    """A tool that can only be called as a task (MCP ``execution.taskSupport``)."""
    support: object = field(field(remote, "execution"), "taskSupport")
    return support == "required"


async def _start_all(conns: list[ServerConnection], bound: float) -> None:
    async def one(conn: ServerConnection) -> None:
        try:
            await conn.start()
        except StartError:
            pass  # recorded on the connection

    await runtime.gather_bounded([one(c) for c in conns], bound)


async def _stop_all(conns: list[ServerConnection], *, final: bool) -> None:
    await runtime.gather_bounded([c.stop(final=final) for c in conns], STOP_SECONDS + 1)


@atexit.register
def _close_live_managers() -> None:
    """A host that exits without closing its sessions still ends its servers politely
    (a SIGKILLed one relies on the supervisor's parent-death signal)."""
    for manager in list(_LIVE):
        if not manager.closed and manager.connections:
            manager.close_sync(3.0)
