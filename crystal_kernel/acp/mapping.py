"""Host <-> ACP shapes: tool kinds, titles, locations and content; prompt blocks to
transcript parts; the todo list to a plan; a saved transcript to the updates that
replay it on ``session/load``. Pure functions, no I/O except reading a file to show a
proposed edit before it is approved.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from acp import (
    image_block,
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
    update_user_message,
)
from acp.schema import AgentPlanUpdate, ToolCallLocation, ToolKind

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.events import ToolResultEvent
from crystal_kernel.core.messages import ImagePart, Message, Part, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.todos import Todo
from crystal_kernel.core.tool_types import FileChange
from crystal_kernel.tools._proposed import proposed_change as proposed_file_change
from crystal_kernel.tools.images import MAX_IMAGES, decode_base64_image

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

# Diffs are sent as whole texts; beyond this (old + new) the result text is shown instead.
MAX_DIFF_CHARS = 1_000_000
# Embedded context (a file the client attached by value) given to the model, per block.
MAX_EMBEDDED_CHARS = 200_000
#: Images one prompt may carry to the model (as many as one tool result may).
MAX_PROMPT_IMAGES = MAX_IMAGES
# Tool output replayed on session/load, per call (the live turn sends it whole).
MAX_REPLAY_OUTPUT = 4_000
# session/load replays at most this many of the latest messages.
MAX_REPLAY_MESSAGES = 2_000
# MCP servers a client may pass with one session (each starts a process or a connection).
MAX_CLIENT_SERVERS = 32

TOOL_KINDS: dict[str, ToolKind] = {
    "read": "read", "view_image": "read", "describe_image": "read", "skill": "read",
    "cell_output": "read", "variables": "read", "todoread": "read",
    "list": "search", "tree": "search", "glob": "search", "grep": "search", "search": "search",
    "edit": "edit", "write": "edit",
    "bash": "execute", "bash_start": "execute", "bash_stop": "execute", "python": "execute",
    "bash_status": "read", "bash_logs": "read",
    "todowrite": "think",
    "question": "other",
}


def tool_kind(name: str) -> ToolKind:
    """ACP ToolKind for a tool; external tools (exec, plugin, MCP) are ``other``."""
    return TOOL_KINDS.get(name, "other")


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_title(name: str, args: dict[str, Any]) -> str:
    """A one-line title a person recognises: the tool and its main argument."""
    for key in ("command", "path", "pattern", "query", "job_id", "name"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return f"{name}: {_short(value)}"
    if name == "todowrite":
        return "todowrite: update the plan"
    if name == "question":
        return "question: ask the person"
    return name


def tool_locations(session: Session, name: str, args: dict[str, Any]) -> list[ToolCallLocation]:
    """Absolute paths a file tool touches, with the first line for read's offset."""
    tool = session.tool(name)
    names = getattr(tool, "path_arguments", ()) if tool is not None else ()
    out: list[ToolCallLocation] = []
    for key in names:
        value = args.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            path = str(session.access.absolute(value))
        except Exception:
            continue
        line = args.get("offset") if name == "read" else None
        out.append(ToolCallLocation(path=path, line=line if isinstance(line, int) and line >= 0 else None))
    return out


def diff_content(change: FileChange | None) -> list[Any] | None:
    """An ACP diff from whole texts, or None when there is none or it is too large."""
    if change is None or len(change.new_text) + len(change.old_text or "") > MAX_DIFF_CHARS:
        return None
    return [tool_diff_content(change.path, change.new_text, change.old_text)]


def proposed_change(session: Session, name: str, args: dict[str, Any]) -> FileChange | None:
    """What edit/write would do, computed before approval so the person sees the diff
    (the one host-side computation every front shares, tools/_proposed.py)."""
    return proposed_file_change(session.access, name, args)


def result_content(event: ToolResultEvent) -> list[Any]:
    """The finished call as ACP tool-call content: a diff for edit/write, otherwise the
    text (fenced for terminal output) and any images."""
    if event.ok:
        diff = diff_content(event.file_change)
        if diff is not None:
            return diff
    text = event.text
    if event.display == "terminal" and text:
        text = f"```\n{text.rstrip()}\n```"
    out: list[Any] = [tool_content(text_block(text))] if text else []
    out += [tool_content(image_block(i.data, i.mime_type)) for i in event.images]
    return out


def plan_update(todos: list[Todo]) -> AgentPlanUpdate:
    """The todo list as an ACP plan (MODE-5: it belongs to the session)."""
    return update_plan([plan_entry(t.content, priority="medium", status=t.status) for t in todos])


def _file_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return uri


def prompt_parts(blocks: list[Any], images_ok: bool, notes: list[str] | None = None) -> list[Part]:
    """ACP content blocks to transcript parts. Attached files by link are named for the
    model (it reads them with its tools); embedded text is given inline, bounded; images
    are checked and bounded (at most :data:`MAX_PROMPT_IMAGES`), and what was left out is
    said in ``notes`` for the person."""
    notes = [] if notes is None else notes
    parts: list[Part] = []
    images = sent = 0
    capped = False
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(TextPart(text=block.text))
        elif kind == "image":
            if not images_ok:
                parts.append(TextPart(text="[The person attached an image, but this model cannot accept images.]"))
                continue
            images += 1
            if sent == MAX_PROMPT_IMAGES:
                if not capped:
                    notes.append(f"Only {MAX_PROMPT_IMAGES} images of a prompt are sent to the model; "
                                 f"image {images} and those after it were not.")
                capped = True
                continue
            # The client's bytes are checked like a tool's image (size, then the bytes
            # against the declared type): a bad one would fail every later request of the
            # session, which carries it.
            try:
                decode_base64_image(block.data, block.mime_type, where=f"Attached image {images}")
            except ToolError as exc:
                notes.append(f"{exc} It was not sent to the model.")
                parts.append(TextPart(text=f"[The person attached image {images}, but it could not be used: {exc}]"))
                continue
            parts.append(ImagePart(mime_type=block.mime_type, data="".join(block.data.split())))
            sent += 1
        elif kind == "resource_link":
            where = _file_path(block.uri)
            parts.append(TextPart(text=f"[The person attached {where}; read it with your tools if it matters.]"))
        elif kind == "resource":
            resource = block.resource
            where = _file_path(resource.uri)
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                if len(text) > MAX_EMBEDDED_CHARS:
                    text = text[:MAX_EMBEDDED_CHARS] + f"\n[... cut: {len(text) - MAX_EMBEDDED_CHARS} characters more]"
                parts.append(TextPart(text=f'<attachment path="{where}">\n{text}\n</attachment>'))
            else:
                parts.append(TextPart(text=f"[The person attached binary content {where}; it is not shown.]"))
        elif kind == "audio":
            parts.append(TextPart(text="[The person attached audio, which Crystal cannot take.]"))
    # Adjacent text blocks read as one message.
    merged: list[Part] = []
    for part in parts:
        if merged and isinstance(part, TextPart) and isinstance(merged[-1], TextPart):
            merged[-1] = TextPart(text=merged[-1].text + "\n\n" + part.text)
        else:
            merged.append(part)
    return merged


def _replay_text(text: str) -> str:
    if len(text) <= MAX_REPLAY_OUTPUT:
        return text
    return text[:MAX_REPLAY_OUTPUT] + f"\n[... {len(text) - MAX_REPLAY_OUTPUT} characters more]"


def replay_updates(session: Session, history: list[Message]) -> Iterator[Any]:
    """The session updates that show a saved conversation again (``session/load``):
    user chunks, agent chunks, and each tool call with its result."""
    for message in history[-MAX_REPLAY_MESSAGES:]:
        if message.meta.get("kind") == "summary":
            continue
        for part in message.parts:
            if isinstance(part, TextPart) and part.text:
                if message.role == "user":
                    yield update_user_message(text_block(part.text))
                else:
                    yield update_agent_message_text(part.text)
            elif isinstance(part, ImagePart) and message.role == "user":
                yield update_user_message(image_block(part.data, part.mime_type))
            elif isinstance(part, ToolCallPart):
                yield start_tool_call(
                    part.id, tool_title(part.name, part.arguments), kind=tool_kind(part.name), status="pending",
                    locations=tool_locations(session, part.name, part.arguments), raw_input=part.arguments,
                )
            elif isinstance(part, ToolResultPart):
                content = [tool_content(text_block(_replay_text(part.text)))] if part.text else None
                yield update_tool_call(part.call_id, status="completed" if part.ok else "failed", content=content)


def client_servers(servers: Any, note: Any) -> list[Any]:
    """The MCP servers a client passed in ``session/new`` as server entries (stdio and
    HTTP; others, and those whose name cannot be shown or used, are named in a note and
    left out; at most :data:`MAX_CLIENT_SERVERS`, each one a process or a connection)."""
    from crystal_kernel.acp.checks import server_name_problem, shown
    from crystal_kernel.mcp.config import client_server

    out: list[Any] = []
    for server in servers or []:
        name = str(getattr(server, "name", "") or "")
        url = getattr(server, "url", None)
        command = getattr(server, "command", None)
        kind = getattr(server, "type", None)
        problem = server_name_problem(name)
        if problem is not None:
            note(f"An MCP server passed by the client is left out: {problem} ({shown(name, 40)}).")
            continue
        if kind == "sse" or not (url or command):
            note(f"MCP server '{name}' passed by the client is left out: Crystal connects to stdio and "
                 "streamable HTTP servers.")
            continue
        if len(out) == MAX_CLIENT_SERVERS:
            note(f"The client passed more than {MAX_CLIENT_SERVERS} MCP servers; '{name}' and those after it "
                 "are left out.")
            break
        pairs = {str(v.name): str(v.value) for v in (getattr(server, "headers" if url else "env", None) or [])}
        if url:
            out.append(client_server(name, url=str(url), headers=pairs))
        else:
            out.append(client_server(name, command=str(command), args=[str(a) for a in server.args or []],
                                     env=pairs))
    return out
