"""The tools of the test MCP servers (stdio and streamable HTTP), written with the
``mcp`` SDK's server side (FastMCP).

Environment: MCP_TEST_PIDFILE (append this process's pid at start), MCP_TEST_MARKS
(a folder where `slow` writes `cancelled` when the client cancels it)."""

from __future__ import annotations

import base64
import gc
import os
import sys
from pathlib import Path

# The SDK's import allocates objects that live as long as this short-lived server: the
# collector stays off while it runs (~15% of the start's CPU), then leaves them frozen.
gc.disable()

import anyio  # noqa: E402

# The SDK's server side imports jsonschema, which at import builds rfc3987-syntax's Earley
# grammar for its optional "iri" format check: ~1.5 s of CPU in every test server start
# (there are dozens in the suite, on a two-core machine). The SDK validates tool arguments
# without a format checker, so that grammar is never used; with the optional module marked
# absent, jsonschema leaves the check out and the server behaves the same.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
# httpx's command-line client (rich, pygments; ~80 ms) is imported with httpx unless absent.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from mcp.server.fastmcp import Context, FastMCP  # noqa: E402
from mcp.types import Annotations, CallToolResult, ImageContent, TextContent  # noqa: E402

gc.freeze()
gc.enable()

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
GIF = b"GIF89a" + b"\x00" * 16


def record_pid() -> None:
    path = os.environ.get("MCP_TEST_PIDFILE")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")


def build(name: str = "demo") -> FastMCP:
    server = FastMCP(name, log_level="WARNING")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Return a caption and images: kind png, bad (GIF bytes declared as PNG) or many (9).")
    def picture(kind: str = "png") -> CallToolResult:
        data = GIF if kind == "bad" else PNG
        count = 9 if kind == "many" else 1
        images = [ImageContent(type="image", data=base64.b64encode(data).decode(), mimeType="image/png")
                  for _ in range(count)]
        return CallToolResult(content=[TextContent(type="text", text=f"a {kind} picture"), *images])

    @server.tool(description="Fail with an error result.")
    def broken() -> str:
        raise ValueError("broken on purpose")

    @server.tool(description="The server's process id.")
    def pid() -> str:
        return str(os.getpid())

    @server.tool(description="Exit the server process at once.")
    def crash() -> str:
        sys.stderr.write("crash requested\n")
        sys.stderr.flush()
        os._exit(3)

    @server.tool(description="Sleep; records a cancellation in MCP_TEST_MARKS.")
    async def slow(seconds: float) -> str:
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            marks = os.environ.get("MCP_TEST_MARKS")
            if marks:
                Path(marks, "cancelled").write_text("yes", encoding="utf-8")
            raise
        return "slept"

    @server.tool(description="Report progress COUNT times (step N of COUNT), then finish.")
    async def steps(count: int, ctx: Context) -> str:
        for n in range(1, count + 1):
            await ctx.report_progress(n, count, f"step {n}")
            await anyio.sleep(0.05)
        return f"{count} steps done"

    @server.tool(description="Content for each audience: both, the person only (text and an image), the model only.")
    def audience() -> CallToolResult:
        person, model = Annotations(audience=["user"]), Annotations(audience=["assistant"])
        return CallToolResult(content=[
            TextContent(type="text", text="for everyone: 3 rows"),
            TextContent(type="text", text="for the person only: the raw table", annotations=person),
            ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png",
                         annotations=person),
            TextContent(type="text", text="for the model only: rows are sorted by date", annotations=model),
        ])

    @server.tool(description="An environment variable of the server process.")
    def getenv(name: str) -> str:
        return os.environ.get(name, "<unset>")

    return server
