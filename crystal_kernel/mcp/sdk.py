"""What differs between the ``mcp`` SDK's 1.x and 2.x lines, in one place (MCP-R).

Crystal is a client of either line: installing a server package into Crystal's own
environment (``pip install mcp-server-time``) may upgrade ``mcp`` to 2.x with only a pip
warning, and every server must keep working. The differences a client meets:

- the models' field names: 1.x names them as on the wire (``nextCursor``,
  ``inputSchema``, ``mimeType``, ``isError``); 2.x in snake case (``next_cursor``, …)
  with the wire names as aliases. :func:`field` reads either, given the wire name.
- the error class: ``McpError(ErrorData)`` in 1.x, ``MCPError(code, message)`` in 2.x
  (:func:`error_class`, :func:`make_error`); both carry ``.error.code`` and
  ``.error.message``.
- streamable HTTP: 1.x takes an ``httpx`` client and yields three values, 2.x takes an
  ``httpx2`` client and yields two (:func:`http_module`, :func:`open_http`).
- cancellation: 2.x sends ``notifications/cancelled`` itself when the caller of a
  request is cancelled; 1.x only stops waiting, and requests.py sends it
  (:func:`sends_cancel_itself`).

The project's type checking runs against 1.x; what only 2.x has is reached by name.
"""

from __future__ import annotations

import contextlib
import functools
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.shared.exceptions import McpError

_MISSING = object()
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


@functools.lru_cache(maxsize=1)
def major() -> int:
    """The installed SDK's major version (1 or 2), by what it offers rather than its
    metadata (a folder put first on the path may shadow the installed one)."""
    from mcp.shared import exceptions

    return 1 if hasattr(exceptions, "McpError") else 2


def field(obj: Any, wire_name: str, default: Any = None) -> Any:
    """``obj``'s field named ``wire_name`` on the wire (camelCase), under 1.x's or
    2.x's attribute name; ``default`` when it has neither."""
    value = getattr(obj, wire_name, _MISSING)
    if value is _MISSING:
        value = getattr(obj, _CAMEL.sub("_", wire_name).lower(), default)
    return value


def error_class() -> type[McpError]:
    """The SDK's exception for an error answer, a timeout or a closed connection."""
    from mcp.shared import exceptions

    cls: type[McpError] = getattr(exceptions, "McpError", None) or exceptions.MCPError  # type: ignore[attr-defined]
    return cls


def make_error(code: int, message: str) -> McpError:
    """An instance of :func:`error_class` (raised where the SDK would raise its own)."""
    cls = error_class()
    if major() == 1:
        from mcp.types import ErrorData

        return cls(ErrorData(code=code, message=message))
    maker: Any = cls  # 2.x: MCPError(code, message)
    made: McpError = maker(code, message)
    return made


def sends_cancel_itself() -> bool:
    """Whether the SDK tells the server when a request's caller stops waiting."""
    return major() >= 2


def http_module() -> Any:
    """The HTTP client library the SDK's streamable-HTTP transport takes a client of."""
    if major() == 1:
        import httpx

        return httpx
    import httpx2

    return httpx2


async def open_http(stack: contextlib.AsyncExitStack, url: str, client: Any) -> tuple[Any, Any]:
    """The streamable-HTTP transport's (read, write) streams, entered on ``stack``."""
    from mcp.client.streamable_http import streamable_http_client

    streams = await stack.enter_async_context(streamable_http_client(url, http_client=client))
    return streams[0], streams[1]  # 1.x adds a session id getter as a third value
