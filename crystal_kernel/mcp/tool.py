"""An MCP server's tool as a Crystal tool (external: floor write + workspace, MODE-3)."""

from __future__ import annotations

import asyncio
import copy
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.mcp import runtime
from crystal_kernel.mcp.config import tool_name
from crystal_kernel.mcp.results import map_result
from crystal_kernel.mcp.sdk import field
from crystal_kernel.tools.base import Authority, Classification, Risk, Tool, ToolContext, ToolResult
from crystal_kernel.tools.exec_sets import ExternalArguments
from crystal_kernel.tools.schema_check import iter_errors

if TYPE_CHECKING:
    from mcp import types as mcp_types

    from crystal_kernel.mcp.connection import ServerConnection
    from crystal_kernel.mcp.manager import McpManager

# How much longer than the server's own call timeout we wait before giving up on the
# MCP loop itself (it has never been seen wedged; this keeps the turn bounded anyway).
GUARD_SECONDS = 10.0


class McpTool(Tool[ExternalArguments]):
    """``SERVER_TOOL``: runs ``tools/call`` on the server's connection."""

    # The arguments as the model sent them, checked against the tool's own JSON schema (parse).
    Input = ExternalArguments
    external = True
    risk = Risk.WRITE

    def __init__(self, manager: McpManager, connection: ServerConnection, remote: mcp_types.Tool):
        self.manager = manager
        self.connection = connection
        self.remote_name: str = remote.name
        self.name = tool_name(connection.config.name, remote.name)
        self.catalogs: frozenset[str] = connection.config.catalogs
        self.mcp_server: str = connection.config.name
        self._description = (remote.description or remote.title or "").strip()
        given = field(remote, "inputSchema")
        schema = given if isinstance(given, dict) else {}
        self._schema: dict[str, Any] = schema

    # ----- what the model and listings see -------------------------------------------------
    @property
    def description(self) -> str:
        return self._description or f"Tool '{self.remote_name}' of the MCP server '{self.mcp_server}'."

    @property
    def origin(self) -> str:
        return self.connection.config.where

    @property
    def source(self) -> str:
        """Which server the tool came from (``/tools``)."""
        return f"MCP server '{self.mcp_server}'"

    @property
    def state(self) -> str:
        """The server's state now: running, stopped (restarts on next use), failed: …"""
        return self.connection.describe_state()

    def input_schema(self) -> dict[str, Any]:
        schema = copy.deepcopy(self._schema)  # passed through as the server wrote it
        schema.setdefault("type", "object")
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
        return schema

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema(), "json")

    def parse(self, arguments: dict[str, Any]) -> ExternalArguments:
        """An object that satisfies the server's schema (common keywords; the server
        validates the rest itself)."""
        if not isinstance(arguments, dict):
            raise ToolError(f"Invalid arguments for {self.name}: expected a JSON object.")
        try:
            errors = list(iter_errors(arguments, self._schema))
        except Exception:  # a schema our small checker cannot read: the server decides
            errors = []
        if errors:
            problems = [f"{where or 'arguments'}: {message}" for where, message in errors[:5]]
            raise ToolError(f"Invalid arguments for {self.name}: " + "; ".join(problems))
        return ExternalArguments(arguments)

    def classify(self, args: ExternalArguments, ctx: ToolContext) -> Classification:
        # MODE-3 floor; the configuration may only raise it (config.ToolOverride).
        over = self.connection.config.override(self.remote_name)
        return Classification(max(Risk.WRITE, over.risk), max(Authority.WORKSPACE, over.authority), external=True)

    # ----- running ---------------------------------------------------------------------
    async def run(self, args: ExternalArguments | dict[str, Any], ctx: ToolContext) -> ToolResult:
        arguments = args.root if isinstance(args, ExternalArguments) else dict(args)
        timeout = self.connection.config.timeout
        guard = None if timeout is None else timeout + self.connection.config.startup_timeout + GUARD_SECONDS
        try:
            result = await runtime.run(self.connection.call(self.remote_name, arguments, timeout,
                                                            progress=ctx.progress), guard)
        except asyncio.TimeoutError:
            raise ToolError(f"The MCP server '{self.mcp_server}' did not answer {self.remote_name} within "
                            f"{guard:g} seconds; Crystal stopped waiting.") from None
        return map_result(self.name, result, limit=int(ctx.config.tool_output_limit), images_ok=ctx.images_ok)

    async def aclose(self) -> None:
        """Session.close() closes every tool; the servers belong to the manager."""
        await self.manager.aclose()
