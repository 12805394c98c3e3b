"""Discovery of every external tool a session may offer: exec tool sets (EX-*),
plugin tool sets (SPEC §10) and MCP servers (crystal_kernel/mcp, docs/mcp.md).

Order, which decides who keeps a name two sources want: Home sets
(``{home}/tools/<dir>/tools.json``, folders sorted by name), then workspace sets
(``<workspace>/.crystal/tools/<dir>/tools.json``, only once the person trusts them,
TRUST-2), then plugins in load order, then MCP
servers (``SERVER_TOOL`` names). A name
that is not ``^[a-z][a-z0-9_]{0,63}$``, that belongs to a built-in (even a disabled one,
MODE-7) or that an earlier set already took is refused with a note; the rest still load.
A text-input tool is skipped with a note (MODE-6).

Every tool returned has ``external = True`` and a ``catalogs`` set (``plan``/``work``);
its ``classify`` never goes below write risk with workspace authority (MODE-3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from crystal_kernel import plugins
from crystal_kernel.core import paths
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.paths import home_dir
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.core.trust import is_trusted
from crystal_kernel.host.view import SessionView
from crystal_kernel.mcp import McpServers
from crystal_kernel.mcp.config import ServerConfig
from crystal_kernel.prompts.skills import discover_skills
from crystal_kernel.tools.base import Authority, Classification, Risk, Tool, ToolContext, ToolResult
from crystal_kernel.tools.catalog import RESERVED_NAMES, CatalogOptions, build_catalog, check_disabled
from crystal_kernel.tools.exec_manifest import NAME_PATTERN, ManifestError, parse_tool, read_set
from crystal_kernel.tools.exec_sets import ExecTool, ExecToolSet, SetSource

CATALOGS = frozenset({"plan", "work"})
MANIFEST = "tools.json"


def set_folders(home: Path, workspace: Path) -> list[tuple[SetSource, Path]]:
    """(source, folder) of every candidate set, Home first, each sorted by name."""
    out: list[tuple[SetSource, Path]] = []
    roots: tuple[tuple[SetSource, Path], ...] = (("home", Path(home) / "tools"),
                                                ("project", paths.workspace_tools_dir(workspace)))
    for source, root in roots:
        try:
            entries = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            continue
        out.extend((source, p) for p in entries)
    return out


def load_exec_set(source: SetSource, folder: Path, notes: list[str], home: Path | None = None) -> list[ExecTool]:
    """The tools of one set folder; problems become notes naming the file. A workspace
    set (``source`` project) needs the person's trust first (TRUST-2, host/trust.py);
    ``home`` is where that trust is kept."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        notes.append(f"Exec tool set folder {folder} has no {MANIFEST}; skipped.")
        return []
    if source != "home":
        state = is_trusted(home if home is not None else home_dir(), "exec", manifest_path)
        if not state.trusted:
            notes.append(state.note())
            return []
    try:
        manifest = read_set(manifest_path)
    except ManifestError as exc:
        notes.append(f"Exec tool set {manifest_path} {exc}; skipped.")
        return []
    tool_set = ExecToolSet(folder, manifest_path, tuple(manifest.command), source)
    tools: list[ExecTool] = []
    for index, raw in enumerate(manifest.tools):
        try:
            tools.append(ExecTool(tool_set, parse_tool(raw, manifest.command, index)))
        except ManifestError as exc:
            notes.append(f"Exec tool set {manifest_path}: {exc}; that tool was skipped.")
    return tools


class PluginTool(Tool[Any]):
    """A plugin's in-process tool under the external rules: floor write + workspace,
    ``external`` set, and a plugin bug turned into a failed result the model reads."""

    external = True

    def __init__(self, inner: Tool[Any], plugin: str, catalogs: frozenset[str]):
        self.inner = inner
        self.plugin = plugin
        self.name = inner.name
        self.input_kind = getattr(inner, "input_kind", "json")
        self.catalogs = catalogs

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def origin(self) -> str:
        return f"plugin {self.plugin}"

    def input_schema(self) -> dict[str, Any]:
        return self.inner.input_schema()

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema(), self.input_kind)

    def parse(self, arguments: dict[str, Any]) -> Any:
        return self._guard(lambda: self.inner.parse(arguments))

    def classify(self, args: Any, ctx: ToolContext) -> Classification:
        try:
            inner = self.inner.classify(args, ctx)
        except Exception:  # a broken classifier gets the strictest floor we know
            return Classification(Risk.EXECUTE, Authority.OUTSIDE, external=True)
        return Classification(max(inner.risk, Risk.WRITE), max(inner.authority, Authority.WORKSPACE),
                              external=True, pattern=inner.pattern)

    async def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        try:
            return await self.inner.run(args, ctx)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"The plugin tool {self.name} ({self.plugin}) failed: {type(exc).__name__}: {exc}") from None

    def _guard(self, fn: Any) -> Any:
        try:
            return fn()
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(f"The plugin tool {self.name} ({self.plugin}) failed: {type(exc).__name__}: {exc}") from None


def plugin_tools(context: Any, notes: list[str]) -> list[PluginTool]:
    """Tools from every plugin's ``crystal_tools(context)``; bad entries become notes."""
    out: list[PluginTool] = []
    for plugin, answer in plugins.call_each("crystal_tools", notes, context=context):
        items = answer if isinstance(answer, (list, tuple)) else [answer]
        for item in items:
            if not isinstance(item, Tool) or not isinstance(getattr(item, "name", None), str):
                notes.append(f"Plugin '{plugin}' returned {type(item).__name__} from crystal_tools, "
                             "not a Tool with a name; skipped.")
                continue
            raw = getattr(item, "catalogs", None)
            catalogs = frozenset(raw) if raw is not None else frozenset({"work"})
            if not catalogs <= CATALOGS:
                notes.append(f"Plugin '{plugin}' tool {item.name}: catalogs must be plan and/or work, "
                             f"not {sorted(catalogs - CATALOGS)}; skipped.")
                continue
            out.append(PluginTool(item, plugin, catalogs))
    return out


def accept(tools: Iterable[Tool[Any]], origin_of: Any, notes: list[str], taken: dict[str, str]) -> list[Tool[Any]]:
    """Apply the naming rules in order; ``taken`` maps names to who has them."""
    kept: list[Tool[Any]] = []
    for tool in tools:
        where = origin_of(tool)
        if not NAME_PATTERN.match(tool.name):
            notes.append(f"Tool '{tool.name}' from {where} refused: names must match ^[a-z][a-z0-9_]{{0,63}}$.")
            continue
        if tool.name in RESERVED_NAMES:
            notes.append(f"Tool '{tool.name}' from {where} refused: the name belongs to a built-in tool.")
            continue
        if tool.name in taken:
            notes.append(f"Tool '{tool.name}' from {where} refused: the name is already taken by {taken[tool.name]}.")
            continue
        if getattr(tool, "input_kind", "json") != "json":
            notes.append(f"Tool '{tool.name}' from {where} skipped: it declares text input, "
                         "and tool input is JSON only.")
            continue
        taken[tool.name] = where
        kept.append(tool)
    return kept


async def discover_external_tools(home: Path, workspace: Path, *, context: Any = None,
                                  mcp: McpServers | None = None) -> tuple[list[Tool[Any]], list[str]]:
    """Every external tool for a session, with English notes about what was skipped.

    Exec sets are read (and hashed for trust) off the loop; MCP servers start on their
    own loop, so the caller's loop keeps serving. ``context`` is handed to plugins'
    ``crystal_tools`` hook (the session, usually). ``mcp``: the servers that keep
    running for the caller (a session's tool source); without it, the servers this
    listing starts stop again right after it. Filter the result by ``tool.catalogs`` for
    the mode and pass it to :func:`crystal_kernel.tools.catalog.build_catalog` as
    ``external``. Code without an event loop runs it with
    :func:`crystal_kernel.core.runner.run_to_completion`."""
    notes: list[str] = list(plugins.load_notes())

    def exec_sets() -> list[Tool[Any]]:
        return [t for source, folder in set_folders(home, workspace) for t in load_exec_set(source, folder, notes, home)]

    found: list[Tool[Any]] = await asyncio.to_thread(exec_sets)
    found.extend(plugin_tools(context, notes))  # on the loop: a plugin may expect it
    # MCP servers last: {home}/mcp.json, <workspace>/.crystal/mcp.json.
    servers = mcp if mcp is not None else McpServers(keep=False)
    found.extend(await servers.tools(home, workspace, notes, owner_id=str(getattr(context, "id", "listing")),
                                     host_config=getattr(context, "config", None)))
    return accept(found, _origin, notes, {}), notes


def _origin(tool: Tool[Any]) -> str:
    if isinstance(tool, ExecTool):
        return str(tool.tool_set.manifest_path)
    if getattr(tool, "mcp_server", None) is not None:  # an McpTool names its server
        return str(getattr(tool, "origin", "an MCP server"))
    return f"plugin '{getattr(tool, 'plugin', '?')}'"


class SessionTools:
    """A session's :class:`~crystal_kernel.core.tool_types.ToolSource`: the built-ins of
    the mode (tools/catalog.py), then the external tools (exec sets, plugin tool sets,
    MCP servers). Bootstrap makes it; the session enters it, asks it for each catalog,
    and exits it on close, which stops the MCP servers it started: the servers belong
    to this source (``mcp``), not to the session."""

    def __init__(self) -> None:
        self.mcp = McpServers()

    async def __aenter__(self) -> SessionTools:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.mcp.aclose()

    def use_client_servers(self, servers: list[ServerConfig]) -> None:
        """MCP server entries an ACP client passed for its session (a client's entry
        wins a name over mcp.json); they start with the next catalog."""
        self.mcp.client_servers = list(servers)

    async def external_tools(self, session: SessionView) -> tuple[list[Tool[Any]], list[str]]:
        """Every external tool for ``session`` whatever its mode, and the notes."""
        return await discover_external_tools(session.home, session.workspace, context=session, mcp=self.mcp)

    async def get_tools(self, session: SessionView) -> list[Tool[Any]]:
        found, notes = await self.external_tools(session)
        return await asyncio.to_thread(self._catalog, session, found, notes)

    def check_disabled(self, names: Iterable[str]) -> list[str]:
        return check_disabled(names)

    def _catalog(self, session: SessionView, found: list[Tool[Any]], notes: list[str]) -> list[Tool[Any]]:
        for n in notes:
            session.note(n, once=True)
        external = [t for t in found if session.mode in getattr(t, "catalogs", {"work"})]
        options = CatalogOptions(
            mode=session.mode,
            disabled=session.flags.disable_tool,
            person_present=session.person_present,
            questions_available=session.questions_available,
            skills_available=bool(session.config.skills and discover_skills(session.home, session.workspace)),
            notebook=session.notebook,
        )
        return build_catalog(options, external=external)
