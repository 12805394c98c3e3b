"""A streamable-HTTP MCP server on loopback for the tests:
`python http_server.py PORT LOGFILE [LOST_SESSION]` — LOGFILE gets one line per DELETE
(session end). LOST_SESSION says how a request naming a session the server does not know
is refused: `404` (this SDK's own answer, the default), `400-json` (what servers built on
the TypeScript SDK, e.g. server-everything, answer) or `400-text` (what mcp 1.x's Python
server answered)."""

import json
import sys

import uvicorn
from demo_tools import build, record_pid


class DeleteLog:
    """ASGI middleware: note every session termination the client sends."""

    def __init__(self, app, path):
        self.app, self.path = app, path

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "DELETE":
            headers = dict(scope.get("headers") or [])
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write("DELETE " + headers.get(b"mcp-session-id", b"?").decode() + "\n")
        await self.app(scope, receive, send)


NO_VALID_SESSION = "Bad Request: No valid session ID provided"
LOST_SESSION_ANSWERS = {
    # server-everything (TypeScript SDK): a JSON-RPC error without an id.
    "400-json": (b"application/json",
                 json.dumps({"jsonrpc": "2.0", "error": {"code": -32000, "message": NO_VALID_SESSION}}).encode()),
    # mcp 1.x's Python server (StreamableHTTPSessionManager): plain text.
    "400-text": (b"text/plain; charset=utf-8", NO_VALID_SESSION.encode()),
}


class LostSessionAs400:
    """ASGI middleware: the SDK's 404 for a request naming an unknown session becomes
    the 400 another server implementation sends (LOST_SESSION_ANSWERS)."""

    def __init__(self, app, spelling):
        self.app = app
        self.content_type, self.body = LOST_SESSION_ANSWERS[spelling]

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if b"mcp-session-id" not in headers:
            await self.app(scope, receive, send)
            return
        replaced = False

        async def answer(message):
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 404:
                replaced = True
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", self.content_type),
                                        (b"content-length", str(len(self.body)).encode())]})
                await send({"type": "http.response.body", "body": self.body})
            elif not replaced:
                await send(message)

        await self.app(scope, receive, answer)


if __name__ == "__main__":
    port, log = int(sys.argv[1]), sys.argv[2]
    lost_session = sys.argv[3] if len(sys.argv) > 3 else "404"
    record_pid()
    app = DeleteLog(build("demo-http").streamable_http_app(), log)
    if lost_session != "404":
        app = LostSessionAs400(app, lost_session)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
