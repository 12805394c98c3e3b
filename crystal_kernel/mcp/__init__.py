"""MCP servers as tool sets: configuration (:mod:`config`), the MCP event
loop (:mod:`runtime`), one connection per server (:mod:`connection`), the session's
servers (:mod:`manager`) and the tools they offer (:mod:`tool`). See docs/mcp.md.

The ``mcp`` SDK is imported only when a configuration names at least one server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from crystal_kernel.mcp.config import ServerConfig, config_files, load_servers

if TYPE_CHECKING:
    from crystal_kernel.core.config import Config
    from crystal_kernel.mcp.manager import McpManager
    from crystal_kernel.mcp.tool import McpTool


class McpServers:
    """The MCP servers of one owner: a session's tool source (they keep running across
    catalog rebuilds until :meth:`aclose`) or a listing (``keep=False``: the servers a
    listing started stop again right after it). The manager is made at the first
    catalog that finds a server entry; without ``mcp.json`` nothing is imported."""

    def __init__(self, *, keep: bool = True) -> None:
        self.keep = keep
        self.manager: McpManager | None = None  # made once a server is configured
        # Entries an ACP client passed for its session (mcp/config.client_server); a
        # client's entry wins a name over mcp.json.
        self.client_servers: list[ServerConfig] = []

    async def tools(self, home: Path, workspace: Path, notes: list[str], *, owner_id: str = "listing",
                    host_config: Config | None = None) -> list[McpTool]:
        """The MCP tools for ``workspace``: the configuration is read off the loop and
        the servers start on the MCP loop, so the caller's loop keeps serving. Without
        ``mcp.json`` files this costs two ``stat`` calls and imports nothing."""
        configs = await asyncio.to_thread(server_configs, home, workspace, notes, self.manager is not None,
                                          self.client_servers)
        if configs is None:
            return []
        if self.manager is None:
            # Imported here, not above: it loads the MCP machinery, which a session without
            # any mcp.json never needs (a start-up cost, not a cycle).
            from crystal_kernel.mcp.manager import McpManager

            self.manager = McpManager(owner_id if self.keep else "listing", host_config if self.keep else None)
        tools = await self.manager.atools_for(configs, Path(workspace), notes)
        if not self.keep:
            await asyncio.to_thread(self.manager.park)
        return tools

    async def aclose(self) -> None:
        """Stop every server for good (bounded); safe to call more than once."""
        if self.manager is not None:
            try:
                await self.manager.aclose()
            except Exception:
                pass  # the supervisor still ends a stdio server when this process ends


def server_configs(home: Path, workspace: Path, notes: list[str], running: bool = False,
                   passed: list[ServerConfig] | None = None) -> list[ServerConfig] | None:
    """The server entries that apply, or None when there is nothing to do. ``running``:
    servers already run (an emptied mcp.json must then stop them); ``passed``: a
    client's entries, which win a name."""
    passed = list(passed or [])
    if not running and not passed and not any(p.is_file() for p in config_files(home, workspace)):
        return None
    named = {c.name for c in passed}
    configs = [c for c in load_servers(home, workspace, notes) if c.name not in named] + passed
    if not configs and not running:
        return None
    return configs
