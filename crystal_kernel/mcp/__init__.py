"""MCP servers as tool sets: configuration (:mod:`config`), the MCP event
loop (:mod:`runtime`), one connection per server (:mod:`connection`), the session's
servers (:mod:`manager`) and the tools they offer (:mod:`tool`). See docs/mcp.md.

The ``mcp`` SDK is imported only when a configuration names at least one server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crystal_kernel.mcp.config import config_files, load_servers


def discover_mcp_tools(home: Path, workspace: Path, context: Any, notes: list[str]) -> list[Any]:
    """The MCP tools for a session (``context``) or a listing (any other context),
    blocking while servers start (callers without an event loop).

    Without ``mcp.json`` files this costs two ``stat`` calls and imports nothing."""
    configs = server_configs(home, workspace, context, notes)
    if configs is None:
        return []
    from crystal_kernel.mcp.manager import manager_for

    manager, owned = manager_for(context)
    tools = manager.tools_for(configs, Path(workspace), notes)
    if not owned:
        manager.park()
    return tools


async def discover_mcp_tools_async(home: Path, workspace: Path, context: Any, notes: list[str]) -> list[Any]:
    """:func:`discover_mcp_tools` for a session on an event loop: the configuration is
    read off the loop and the servers start on the MCP loop, so the caller's loop keeps
    serving."""
    import asyncio

    configs = await asyncio.to_thread(server_configs, home, workspace, context, notes)
    if configs is None:
        return []
    from crystal_kernel.mcp.manager import manager_for

    manager, owned = manager_for(context)
    tools = await manager.atools_for(configs, Path(workspace), notes)
    if not owned:
        await asyncio.to_thread(manager.park)
    return tools


def server_configs(home: Path, workspace: Path, context: Any, notes: list[str]) -> list[Any] | None:
    """The server entries that apply, or None when there is nothing to do."""
    existing = getattr(context, "mcp_servers", None)
    # Servers an ACP client passed for this session (a client's entry wins a name).
    passed = list(getattr(context, "client_mcp_servers", None) or [])
    if existing is None and not passed and not any(p.is_file() for p in config_files(home, workspace)):
        return None
    named = {c.name for c in passed}
    configs = [c for c in load_servers(home, workspace, notes) if c.name not in named] + passed
    if not configs and existing is None:
        return None
    return configs
