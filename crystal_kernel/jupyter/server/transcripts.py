"""Sessions in reading form, for ``GET sessions``, ``GET sessions/<id>`` and ``GET
status?session=<id>`` (server/sessions.py) and for the kernel's sidebar comm
(jupyter/sidebar_comm.py). No Jupyter imports here.

Everything is read from the session documents in ``<workspace>/.crystal/sessions/``
(host/store.py); the server never runs an agent. Transcripts are sent in a reading
form: text, tool calls and results, images as their type only, each long text cut.
A text part also carries ``html``: its Markdown rendered and sanitized by the same
function the kernel uses for answers (TRUST-1, crystal_kernel/jupyter/safe_html.py);
the lab extension sanitizes it once more before showing it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.host.store import SessionStore
from crystal_kernel.jupyter.safe_html import markdown_html
from crystal_kernel.jupyter.server.ids import NotFound, check_id, inside
from crystal_kernel.jupyter.server.workspaces import notebook_names, relative

MAX_PART_CHARS = 20_000      # one text or tool result in the reading view
MAX_MESSAGES = 2_000         # the newest messages of a very long session
MAX_ARGUMENT_CHARS = 4_000


def list_sessions(workspace: Path, workspaces: list[Path] | None = None, root: Path | None = None,
                  homes: Sequence[Path] = ()) -> dict[str, Any]:
    """The sessions of ``workspaces`` (default: just ``workspace``), newest first, each
    with its workspace (relative to ``root``), the notebook that used it last, and
    ``signed``: whether one of ``homes`` (the Homes of the kernels that write them,
    server/signed.py) signed it, still its last save (TRUST-7; the sidebar marks the
    others unverified, as /sessions does)."""
    from crystal_kernel.jupyter.server.signed import signers

    root = root or workspace
    rows: list[dict[str, Any]] = []
    for folder in workspaces or [workspace]:
        notebooks = notebook_names(root, folder)
        store = SessionStore(folder)
        by = signers(homes, folder)
        rows += [
            {"id": s.id, "topic": s.topic, "created": s.created, "updated": s.updated,
             "turns": s.turns, "tokens": s.tokens, "answered": s.answered, "prompt": s.prompt_topic,
             "signed": _signed(store, s.id, by),
             "workspace": relative(root, folder),
             "notebook": notebooks.get(s.id)}
            for s in store.list()
        ]
    rows.sort(key=lambda r: str(r["updated"] or ""), reverse=True)
    return {"workspace": str(workspace), "sessions": rows}


def _signed(store: SessionStore, session_id: str, by: list[Any]) -> bool:
    """Whether one of ``by`` signed the session's journal (False for an id no journal
    can have: an old-format document names its own)."""
    from crystal_kernel.jupyter.server.signed import is_signed

    try:
        return is_signed(store.journal_path(session_id), by)
    except UserError:
        return False


def _cut(value: object, limit: int) -> str:
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"


def _reading_part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    kind = part.get("kind")
    if kind == "text":
        text = _cut(part.get("text", ""), MAX_PART_CHARS)
        return {"kind": "text", "text": text, "html": markdown_html(text)}
    if kind == "image":
        return {"kind": "image", "mimeType": part.get("mime_type", "")}
    if kind == "tool_call":
        args = part.get("arguments", {})
        return {"kind": "tool_call", "id": part.get("id", ""), "name": part.get("name", ""),
                "arguments": _cut(json.dumps(args, ensure_ascii=False), MAX_ARGUMENT_CHARS)}
    if kind == "tool_result":
        return {"kind": "tool_result", "callId": part.get("call_id", ""), "name": part.get("name", ""),
                "ok": bool(part.get("ok")), "text": _cut(part.get("text", ""), MAX_PART_CHARS),
                "images": [{"mimeType": i.get("mime_type", "")} for i in part.get("images") or []
                           if isinstance(i, dict)]}
    return None


def _document(workspace: Path, session_id: str) -> tuple[SessionStore, dict[str, Any]]:
    check_id(session_id, "session")
    store = SessionStore(workspace)
    path = store.path_for(session_id)
    if not path.exists():
        raise NotFound(f"No session '{session_id}' in this workspace.")
    inside(workspace, path)  # a symlinked document pointing elsewhere is refused
    return store, store.load(session_id)


def session_transcript(workspace: Path, session_id: str) -> dict[str, Any]:
    """The session's full history (or transcript) in reading form, newest last."""
    _, doc = _document(workspace, session_id)
    messages = doc.get("history") or doc.get("transcript") or []
    if not isinstance(messages, list):
        raise UserError(f"Session document {session_id} is corrupt: its history is not a list.")
    dropped = max(0, len(messages) - MAX_MESSAGES)
    out = []
    for message in messages[dropped:]:
        if not isinstance(message, dict):
            continue
        parts = [p for p in (_reading_part(x) for x in message.get("parts") or []) if p]
        out.append({"role": message.get("role", ""), "interrupted": bool(message.get("interrupted")),
                    "summary": (message.get("meta") or {}).get("kind") == "summary", "parts": parts})
    usage = doc.get("usage") or {}
    return {
        "id": doc.get("id", session_id), "topic": doc.get("topic"), "created": doc.get("created", ""),
        "updated": doc.get("updated", ""), "mode": doc.get("mode"), "approval": doc.get("approval"),
        "provider": doc.get("provider"), "model": doc.get("model"), "turns": doc.get("turns", 0),
        "tokens": int(usage.get("inputTokens", 0) or 0) + int(usage.get("outputTokens", 0) or 0),
        "todos": doc.get("todos") or [], "droppedMessages": dropped, "messages": out,
    }


def session_status(workspace: Path, home: Path, session_id: str) -> dict[str, Any]:
    """What the status bar shows, from the session document and the enabled prompt set.

    The kernel's own view (forced prompt set flags included) wins when it publishes one
    in kernel_info; this is the fallback the lab extension uses otherwise.
    """
    _, doc = _document(workspace, session_id)
    from crystal_kernel.prompts.selection import resolve_selection

    prompt_set = doc.get("promptSet")
    if not isinstance(prompt_set, str):
        prompt_set = resolve_selection(home, workspace).set_label
    usage = doc.get("usage") or {}
    return {
        "session": doc.get("id", session_id), "mode": doc.get("mode"), "approval": doc.get("approval"),
        "provider": doc.get("provider"), "model": doc.get("model"), "promptSet": prompt_set,
        "tokens": int(usage.get("inputTokens", 0) or 0) + int(usage.get("outputTokens", 0) or 0),
        "updated": doc.get("updated", ""),
    }
