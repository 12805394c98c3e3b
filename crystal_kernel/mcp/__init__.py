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
    """The MCP tools for a session (``context``) or a listing (any other context).

    Without ``mcp.json`` files this costs two ``stat`` calls and imports nothing."""
    existing = getattr(context, "mcp_servers", None)
    # Servers an ACP client passed for this session (a client's entry wins a name).
    passed = list(getattr(context, "client_mcp_servers", None) or [])
    if existing is None and not passed and not any(p.is_file() for p in config_files(home, workspace)):
        return []
    named = {c.name for c in passed}
    configs = [c for c in load_servers(home, workspace, notes) if c.name not in named] + passed
    if not configs and existing is None:
        return []
    from crystal_kernel.mcp.manager import manager_for

    manager, owned = manager_for(context)
    tools = manager.tools_for(configs, Path(workspace), notes)
    if not owned:
        manager.park()
    return tools
