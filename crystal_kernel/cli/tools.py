"""``crystal tools list|show|call`` and ``crystal plugins list`` (SPEC §11).

Tool authors try a tool without a model: ``call`` runs it exactly as the agent would
(approval aside) in a session of its own, and prints
``{"ok", "text", "images": [{"mimeType", "bytes"}]}`` (``bytes``: the image's size).
Exit codes: 0 when the tool succeeded, 1 when it returned a failed result, 2 for bad
input (one English line on stderr, nothing changed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.cli.terminal import say, say_json
from crystal_kernel.core import paths
from crystal_kernel.core.errors import ToolError, UserError
from crystal_kernel.core.gc_pause import end_front_start
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.providers.base import NoModel

if TYPE_CHECKING:
    from crystal_kernel.tools.base import Tool

# `crystal tools list` shows at most this many characters of a description's first line.
LIST_WIDTH = 80


def add_subparsers(subparsers: Any) -> None:
    """Register ``tools`` and ``plugins`` on the ``crystal`` command's subparsers."""
    tools = subparsers.add_parser("tools", help="list, show or call external tools (exec sets, plugins, MCP servers)")
    actions = tools.add_subparsers(dest="tools_action", required=True)

    p = actions.add_parser("list", help="list the external tools of Home and a workspace")
    _common(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.set_defaults(handler=cmd_list)

    p = actions.add_parser("show", help="show one tool: description, schema, command")
    p.add_argument("name", help="the tool's name, as `crystal tools list` shows it")
    _common(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.set_defaults(handler=cmd_show)

    p = actions.add_parser("call", help="run one tool as the agent would and print the result as JSON")
    p.add_argument("name", help="the tool's name, as `crystal tools list` shows it")
    p.add_argument("--args", dest="arguments", default="{}", metavar="JSON",
                   help="the argument object as JSON (default {})")
    _common(p)
    p.add_argument("--images", action="store_true",
                   help="behave as on an image-capable turn (default: text-only, EX-12)")
    p.set_defaults(handler=cmd_call)

    plugins = subparsers.add_parser("plugins", help="list the installed plugins")
    pactions = plugins.add_subparsers(dest="plugins_action", required=True)
    p = pactions.add_parser("list", help="list plugins and the hooks they implement")
    # As in the prompt-set commands (PS-9): plugins are installed packages, so the list
    # is the same for every Home; the Home is checked and reported.
    p.add_argument("--home", metavar="DIR", help="Crystal home (default $CRYSTAL_HOME or ~/.crystal)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    p.set_defaults(handler=cmd_plugins_list)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", metavar="DIR", default=".", help="workspace root (default .)")
    parser.add_argument("--home", metavar="DIR", help="Crystal home (default $CRYSTAL_HOME or ~/.crystal)")


def _paths(ns: argparse.Namespace) -> tuple[Path, Path]:
    from crystal_kernel.core.paths import home_dir

    workspace = Path(ns.workspace).expanduser()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{ns.workspace}' is not a folder.")
    home = Path(ns.home).expanduser() if ns.home else home_dir()
    return home, workspace.resolve()


def _describe(tool: Tool[Any]) -> dict[str, Any]:
    from crystal_kernel.mcp.tool import McpTool
    from crystal_kernel.tools.exec_sets import ExecTool

    info: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "catalogs": sorted(getattr(tool, "catalogs", ())),
        "source": getattr(tool, "origin", "built-in"),
        "inputSchema": tool.input_schema(),
    }
    if isinstance(tool, McpTool):  # crystal_kernel/mcp
        info.update(server=tool.mcp_server, tool=tool.remote_name, state=tool.state)
    if isinstance(tool, ExecTool):
        m = tool.manifest
        info.update(
            set=tool.tool_set.name, manifest=str(tool.tool_set.manifest_path),
            command=list(tool.tool_set.command) + list(m.command or []), argv=dict(m.argv),
            stdin=m.stdin, output=m.output, timeoutSeconds=m.timeout_seconds,
        )
    return info


def _discover(ns: argparse.Namespace) -> tuple[list[Tool[Any]], list[str]]:
    from crystal_kernel.host.tool_sources import discover_external_tools

    home, workspace = _paths(ns)
    found = run_to_completion(discover_external_tools(home, workspace))
    end_front_start()  # main() paused the collector for the imports up to here (the MCP SDK's too)
    return found


def shorten(text: str, limit: int = LIST_WIDTH) -> str:
    """``text`` whole when it fits in ``limit`` characters; else cut at the last word
    boundary that leaves room for the mark, and marked with "…" (one long word is cut
    inside it)."""
    if len(text) <= limit:
        return text
    head = text[:limit - 1]
    if text[limit - 1] != " " and " " in head:
        head = head[:head.rindex(" ")]
    return head.rstrip() + "…"


def cmd_list(ns: argparse.Namespace) -> int:
    tools, notes = _discover(ns)
    if ns.format == "json":
        say_json({"tools": [_describe(t) for t in tools], "notes": notes}, indent=2)
        return 0
    for note in notes:
        say(f"note: {note}", err=True)
    if not tools:
        from crystal_kernel.plugins import ENTRY_POINT_GROUP

        home, workspace = _paths(ns)
        local = paths.host_dir(workspace)
        say("No external tools. Add one of:\n"
              f"  an exec set: {home}/tools/<dir>/tools.json or {local}/tools/<dir>/tools.json (docs/exec-tools.md)\n"
              f"  an MCP server: {home}/mcp.json or {local}/mcp.json (docs/mcp.md)\n"
              f"  a plugin: a package with a '{ENTRY_POINT_GROUP}' entry point (docs/plugins.md)")
        return 0
    width = max(len(t.name) for t in tools)
    for t in tools:
        first = shorten((t.description.strip().splitlines() or [""])[0])
        # Every external tool (exec set, plugin, MCP) has catalogs and an origin.
        say(f"{t.name:<{width}}  [{','.join(sorted(getattr(t, 'catalogs', ())))}]  {first}")
        say(f"{'':<{width}}  from {getattr(t, 'origin', 'built-in')}")
    return 0


def _find(ns: argparse.Namespace, found: tuple[list[Tool[Any]], list[str]] | None = None) -> Tool[Any]:
    """The external tool ``ns.name`` among ``found`` (a listing's when not given)."""
    from crystal_kernel.tools.catalog import RESERVED_NAMES

    tools, notes = found if found is not None else _discover(ns)
    for tool in tools:
        if tool.name == ns.name:
            return tool
    if ns.name in RESERVED_NAMES:
        raise UserError(f"'{ns.name}' is a built-in tool; crystal tools works with external tools only.")
    refused = [n for n in notes if f"'{ns.name}'" in n]
    hint = f" ({refused[0]})" if refused else " Run 'crystal tools list' to see the installed tools."
    raise UserError(f"No external tool named '{ns.name}'.{hint}")


def cmd_show(ns: argparse.Namespace) -> int:
    info = _describe(_find(ns))
    if ns.format == "json":
        say_json(info, indent=2)
        return 0
    for key, value in info.items():
        if key == "description":
            continue
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value
        say(f"{key}: {shown}")
    say()
    say(info["description"])
    return 0


def cmd_call(ns: argparse.Namespace) -> int:
    try:
        arguments = json.loads(ns.arguments)
    except json.JSONDecodeError as exc:
        raise UserError(f"--args is not valid JSON ({exc.msg} at column {exc.colno}).") from None
    if not isinstance(arguments, dict):
        raise UserError("--args must be a JSON object.")
    from crystal_kernel.core.interaction import NoPerson
    from crystal_kernel.host.bootstrap import SessionOptions, open_session
    from crystal_kernel.tools.base import ToolResult

    home, workspace = _paths(ns)
    session = open_session(SessionOptions(
        workspace, home=home, person_present=False, saves=False,
        provider=NoModel(images=ns.images, why="crystal tools call has no model.")))
    ctx = session.tool_context(NoPerson(), call_id="cli", images_ok=ns.images)

    async def go() -> ToolResult:
        try:
            # The session's own tool source: the MCP servers it starts stop with it.
            tool = _find(ns, await session.external_tools())
            try:
                return await tool.run(tool.parse(arguments), ctx)
            except ToolError as exc:
                return ToolResult.fail(str(exc))
        finally:
            await session.close()

    result = run_to_completion(go())
    for note in session.drain_notes():
        say(f"note: {note}", err=True)
    say_json({"ok": result.ok, "text": result.text,
              "images": [{"mimeType": i.mime_type, "bytes": len(i.raw())} for i in result.images]})
    return 0 if result.ok else 1


def cmd_plugins_list(ns: argparse.Namespace) -> int:
    from crystal_kernel import plugins
    from crystal_kernel.core.paths import home_dir

    home = Path(ns.home).expanduser() if ns.home else home_dir()
    if ns.home and not home.is_dir():
        raise UserError(f"--home '{ns.home}' is not a folder.")
    manager = plugins.plugin_manager()
    rows = []
    for name, plugin in plugins.third_party_plugins():
        hooks = sorted(h.name for h in manager.get_hookcallers(plugin) or [])
        rows.append({"name": name, "hooks": hooks})
    notes = plugins.load_notes()
    if ns.format == "json":
        say_json({"home": str(home), "plugins": rows, "notes": notes}, indent=2)
        return 0
    for note in notes:
        say(f"note: {note}", err=True)
    if not rows:
        say(f"No plugins installed (entry-point group {plugins.ENTRY_POINT_GROUP}).")
    for row in rows:
        say(f"{row['name']}: {', '.join(row['hooks']) or 'no hooks'}")
    return 0
