"""Other servers' start-up noise in ``crystal space``, quieted where the space starts them.

A space's server loads every server extension installed beside Crystal. Jupyter AI's
MCP server (``jupyter_server_mcp``, on FastMCP) prints a 20-line banner, asks PyPI for a
newer FastMCP and prints "Update available", and its uvicorn logs INFO lines; Jupyter
prints the server's URLs again in a CRITICAL block. Before this, ~150 lines came before
the notebook's URL. Errors and warnings stay visible: only the banner, the update check,
INFO lines and Jupyter's own copy of the URL (the space prints the notebook's) go.
Nothing here changes another process: only this server's own modules, once loaded.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

# Jupyter's "To access the server, …" block: the space prints its notebook's URL instead.
_JUPYTER_URL_BLOCK = "To access the server"


class _DropJupyterUrlBlock(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _JUPYTER_URL_BLOCK not in str(record.msg)


def quiet_extensions(server: Any) -> None:
    """After ``server.initialize`` (the extensions are imported then, and start later)."""
    server.log.addFilter(_DropJupyterUrlBlock())
    fastmcp = sys.modules.get("fastmcp")
    settings = getattr(fastmcp, "settings", None)
    if settings is not None:
        try:
            settings.check_for_updates = "off"  # no PyPI request, no "Update available"
            settings.log_level = "WARNING"  # uvicorn's log level, read as the MCP server starts
        except (AttributeError, ValueError):  # another FastMCP: its noise stays, nothing breaks
            pass
    embedded = sys.modules.get("jupyter_server_mcp.mcp_server")
    if embedded is not None and hasattr(embedded, "log_server_banner"):
        # It calls FastMCP's banner unconditionally (not through show_server_banner), by
        # this module-level name.
        setattr(embedded, "log_server_banner", _no_banner)  # noqa: B010 (a module typed without it)


def _no_banner(*args: Any, **kwargs: Any) -> None:
    """FastMCP's banner, left out."""
