"""A streamable-HTTP MCP server on loopback for the tests:
`python http_server.py PORT LOGFILE` — LOGFILE gets one line per DELETE (session end)."""

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


if __name__ == "__main__":
    port, log = int(sys.argv[1]), sys.argv[2]
    record_pid()
    app = build("demo-http").streamable_http_app()
    uvicorn.run(DeleteLog(app, log), host="127.0.0.1", port=port, log_level="warning")
