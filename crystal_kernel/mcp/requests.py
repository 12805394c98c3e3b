"""``tools/call`` with the parts the ``mcp`` SDK leaves to its caller.

- A call that times out, or whose caller is cancelled (a stopped turn), reaches the
  server as ``notifications/cancelled`` with the request's id: the 1.x client only stops
  waiting, so a long tool would otherwise run on (2.x sends the notice itself when the
  request's task is cancelled, sdk.py).
- A connection that breaks while the call waits fails the call at once: when the
  streamable-HTTP transport collapses, the SDK cancels its receive loop without
  answering the requests in flight, which would otherwise wait for their timeout.

Both end as the SDK's own error (``McpError`` or 2.x's ``MCPError``; 408 for a timeout,
as the SDK uses; -32000 for a closed connection), so the connection reads every failure
one way.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from crystal_kernel.mcp import sdk

if TYPE_CHECKING:
    from mcp import types as mcp_types
    from mcp.client.session import ClientSession
    from mcp.shared.session import ProgressFnT

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = 408
# How long a cancellation notice may take to go out (the server may be gone).
NOTICE_SECONDS = 2.0


async def call_tool(session: ClientSession, tool: str, arguments: dict[str, Any], timeout: float | None,
                    on_progress: ProgressFnT, gone: asyncio.Event) -> mcp_types.CallToolResult:
    """The server's answer to ``tools/call``; McpError when it refuses, the call times
    out (``timeout`` seconds, None: no bound) or the connection ends (``gone`` is set)."""
    sent: list[int] = []

    async def send() -> mcp_types.CallToolResult:
        # The id the 1.x SDK gives this request: send_request takes the session's next
        # id before its first await, so nothing else can take it in between. (2.x keeps
        # ids in its dispatcher and sends the cancellation itself.)
        if not sdk.sends_cancel_itself():
            sent.append(session._request_id)
        return await session.call_tool(tool, arguments, progress_callback=on_progress)

    request = asyncio.ensure_future(send())
    ended = asyncio.ensure_future(gone.wait())
    try:
        done, _ = await asyncio.wait({request, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _abandon(session, request, sent, "The caller stopped waiting.")
        raise
    finally:
        ended.cancel()
    if request in done:
        return request.result()
    if ended in done:
        request.cancel()
        raise sdk.make_error(CONNECTION_CLOSED, "Connection closed")
    await _abandon(session, request, sent, f"No answer within {timeout:g} seconds.")
    raise sdk.make_error(REQUEST_TIMEOUT, f"No answer within {timeout:g} seconds.")


async def _abandon(session: ClientSession, request: asyncio.Future[Any], sent: list[int], reason: str) -> None:
    """Stop waiting for ``request`` and tell the server to stop working on it."""
    from mcp import types

    request.cancel()
    if not sent:
        return  # never sent, or the SDK tells the server itself (2.x)
    notice = types.ClientNotification(types.CancelledNotification(
        params=types.CancelledNotificationParams(requestId=sent[0], reason=reason)))
    try:
        await asyncio.wait_for(session.send_notification(notice), NOTICE_SECONDS)
    except Exception:
        pass  # the server is gone or slow: the caller has stopped waiting either way
