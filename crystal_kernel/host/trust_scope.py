"""What trusting a workspace file lets Crystal do (TRUST-2), said before the person
trusts it: the commands an ``mcp.json`` or an exec tool set would start and the
addresses it would connect to, what a review prompt or a cassette would steer.

The file is untrusted, so it is read as data only: nothing is expanded (``${VAR}`` is
shown as written, which is what the expansion will fill in), nothing runs, and what is
said is bounded (``MAX_LINES`` lines of at most ``MAX_LINE`` characters; a file larger
than ``MAX_BYTES`` is not read). Each front escapes the lines as it shows them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from crystal_kernel.core.trust import WorkspaceFile

MAX_BYTES = 1 << 20
MAX_LINES = 12
MAX_LINE = 200


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def _command(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if isinstance(parts, list):
        return shlex.join(str(p) for p in parts)
    return "?"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _read(path: Path) -> Any:
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // 1024} KiB")
    return json.loads(path.read_text(encoding="utf-8-sig"))


def _mcp(data: Any) -> list[str]:
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return []
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            continue
        if "url" in entry:
            out.append(f"connect to {entry['url']} (MCP server '{name}')")
        elif "command" in entry:
            out.append(f"start {_command([entry['command'], *_list(entry.get('args'))])} (MCP server '{name}')")
    return out


def _exec(data: Any, folder: Path) -> list[str]:
    if not isinstance(data, dict):
        return []
    shared = _list(data.get("command"))
    by_command: dict[str, list[str]] = {}
    for tool in _list(data.get("tools")):
        if not isinstance(tool, dict):
            continue
        own = _list(tool.get("command"))
        # A tool's own command words follow the set's command (tools/exec_manifest.py).
        by_command.setdefault(_command([*shared, *own]) or "?", []).append(str(tool.get("name", "?")))
    return [f"run {command} in {folder.name}/ (tool{'s' if len(names) > 1 else ''} {', '.join(names)})"
            for command, names in by_command.items()]


def what_trusting_enables(state: WorkspaceFile) -> list[str]:
    """One line per thing trusting ``state``'s file lets Crystal do, as a person reads
    it ("start npx -y server (MCP server 'files')"); bounded, never raises."""
    if state.kind == "prompt":
        return ["give the reviewer this text as its instructions: it decides which calls run without asking you"]
    if state.kind == "cassette":
        return ["answer approvals and questions with the recording's answers when a session replays it"]
    try:
        data = _read(state.path)
    except (OSError, ValueError, RecursionError) as exc:
        return [_cut(f"(its content cannot be shown: {exc})")]
    lines = _mcp(data) if state.kind == "mcp" else _exec(data, state.path.parent)
    if not lines:
        return ["(it names nothing to start)"]
    shown = [_cut(line) for line in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        shown.append(f"… and {len(lines) - MAX_LINES} more")
    return shown
