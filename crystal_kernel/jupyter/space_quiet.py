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


def _is_collaboration_stop_noise(context: dict[str, Any]) -> bool:
    """jupyter_server_ydoc's room cleaner, on the way down, stops a websocket server that
    is already stopped: its task fails with "WebsocketServer not running" and nobody
    reads the error (an upstream race, jupyter-collaboration PR 546), so asyncio prints a
    traceback after every stop. Nothing is lost: the server is down either way."""
    exc = context.get("exception")
    task = context.get("future")
    coro = getattr(task, "get_coro", lambda: None)()
    return (isinstance(exc, RuntimeError) and str(exc) == "WebsocketServer not running"
            and "jupyter_server_ydoc" in str(getattr(getattr(coro, "cr_code", None), "co_filename", "")))


def quiet_stop(loop: Any) -> None:
    """While the space stops: the collaboration server's known stop traceback goes; any
    other error still reaches asyncio's own handler (and the person)."""
    def handler(loop: Any, context: dict[str, Any]) -> None:
        if not _is_collaboration_stop_noise(context):
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
