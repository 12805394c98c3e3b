"""A session's state as its document, and back (what save, resume, fork and the
server read). Pure: no file is touched here (host/session_file.py writes, with the
journal of host/journal.py); unknown document keys survive a round trip."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.message_log import MessageLog, RawMessage
from crystal_kernel.core.messages import Message, load_transcript
from crystal_kernel.core.todos import Todo
from crystal_kernel.host.grants import sign as sign_grants
from crystal_kernel.host.grants import verify as verify_grants
from crystal_kernel.host.prompt_topic import first_prompt_topic
from crystal_kernel.host.state import SessionState, Usage
from crystal_kernel.host.store import DOCUMENT_VERSION, now_iso

# Document keys the session writes; everything else in a loaded document is preserved.
OWN_KEYS = {
    "version", "id", "created", "updated", "workspace", "topic", "mode", "approval", "provider",
    "model", "turns", "transcript", "history", "todos", "usage", "audit", "directories", "forkedFrom",
    "directoriesSignature", "answered", "promptTopic",
}


def meta_document(state: SessionState, home: Path, provider: str, model: str) -> dict[str, Any]:
    """The document's keys other than the message lists and the audit log; ``usage``
    without its per-turn list (a journal appends those, host/journal.py)."""
    doc = dict(state.extra_doc)
    # Only the person's grants are saved (and signed); a client's folders end with the
    # session (host/folders.py, TRUST-6).
    directories = [{"path": str(d.path), "mode": d.mode} for d in state.access.directories if d.granted]
    usage = state.usage.as_dict()
    usage.pop("turns")
    doc.update(
        {
            "version": DOCUMENT_VERSION,
            "id": state.id,
            "created": state.created,
            "updated": now_iso(),
            "workspace": str(state.workspace),
            "topic": state.topic,
            # What names the session until topic naming does (or when it is off): its
            # first prompt, shortened and made safe to show (host/topic.py).
            "promptTopic": first_prompt_topic(state.history),
            "mode": state.mode,
            "approval": state.approval,
            "provider": provider,
            "model": model,
            "turns": state.turns,
            "todos": [t.model_dump() for t in state.todos],
            "usage": usage,
            "directories": directories,
            # TRUST-3: the person's grants, signed with Home's key (host/grants.py).
            "directoriesSignature": sign_grants(home, state.id, state.workspace, directories),
            "forkedFrom": state.forked_from,
            # False while the last message is the person's or a tool's (the request
            # failed or was cancelled): /sessions says the prompt was not answered.
            "answered": bool(state.history) and state.history[-1].role == "assistant",
        }
    )
    return doc


def whole_document(state: SessionState, meta: dict[str, Any]) -> dict[str, Any]:
    """The whole session as one document: ``meta`` plus the lists."""
    doc = dict(meta)
    doc["usage"] = dict(doc["usage"], turns=state.usage.turns)
    # A message in both lists is dumped once: the journal then writes it once.
    dumped: dict[int, dict[str, Any]] = {}

    def dump(messages: list[Message]) -> list[dict[str, Any]]:
        out = []
        for message in messages:
            item = dumped.get(id(message))
            if item is None:
                item = dumped[id(message)] = message.model_dump(mode="json")
            out.append(item)
        return out

    doc["history"] = dump(state.history)
    doc["transcript"] = dump(state.transcript)
    doc["audit"] = state.audit
    return doc


def journal_lists(state: SessionState) -> dict[str, list[Any]]:
    """The lists a journal appends to rather than rewrites."""
    return {"audit": state.audit, "usage.turns": state.usage.turns}


def _messages(doc: dict[str, Any]) -> tuple[list[Message], list[Message]]:
    """(history, transcript) of a document. A message the journal holds once is in both
    lists (the same dict): it is built once, so resume costs one parse per message and
    the lists share it."""
    built: dict[int, Message] = {}

    def build(items: list[Any]) -> list[Message]:
        out: list[Any] = []  # RawMessage entries: lines a MessageLog parses when read
        for item in items:
            # A journal read it already, or keeps it unread (a MessageLog parses it when
            # something reads it: core/message_log.py).
            if isinstance(item, (Message, RawMessage)):
                out.append(item)
                continue
            message = built.get(id(item))
            if message is None:
                message = built[id(item)] = load_transcript([item])[0]
            out.append(message)
        return out

    raw_transcript = list(doc.get("transcript") or [])
    # list.copy keeps a MessageLog's unread lines unread.
    items = doc.get("history") or raw_transcript
    raw_history = list.copy(items) if isinstance(items, list) else list(items)
    history = build(raw_history)
    if isinstance(items, MessageLog):
        history = MessageLog(history)
    # The older format wrote the lists apart: a transcript entry equal to the history
    # entry at the same distance from the end is that message.
    offset = len(raw_history) - len(raw_transcript)
    for i, item in enumerate(raw_transcript):
        if (not isinstance(item, Message) and id(item) not in built and 0 <= offset + i < len(raw_history)
                and raw_history[offset + i] == item):
            built[id(item)] = history[offset + i]
    return history, build(raw_transcript)


def apply_document(state: SessionState, doc: dict[str, Any], home: Path, note: Callable[[str], None]) -> None:
    """Fill ``state`` from a saved document (resume, fork). A corrupt document raises
    UserError and leaves the state as it was; problems with added directories become
    notes."""
    try:
        history, transcript = _messages(doc)
        todos = [Todo.model_validate(t) for t in doc.get("todos") or []]
        usage = Usage.from_dict(doc.get("usage") or {})
        turns = int(doc.get("turns", 0))
        audit = list(doc.get("audit") or [])
        session_id = str(doc["id"])
        directories = list(doc.get("directories") or [])
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UserError(f"Session document {doc.get('id')} is corrupt: {first}") from None
    state.transcript, state.history, state.todos = transcript, history, todos
    state.usage, state.turns, state.audit, state.id = usage, turns, audit, session_id
    state.created = doc.get("created", state.created)
    state.topic = doc.get("topic")
    if doc.get("mode") in ("plan", "work"):
        state.mode = doc["mode"]
    state.forked_from = doc.get("forkedFrom")
    if directories and not verify_grants(home, session_id, state.workspace, directories,
                                         doc.get("directoriesSignature")):
        # TRUST-3: a list the person did not grant here (edited, copied, or written
        # before grants were signed) widens nothing.
        shown = ", ".join(str(d.get("path") if isinstance(d, dict) else d) for d in directories[:5])
        note(f"The session document lists added directories ({shown}) that were not granted "
             "in this Crystal Home for this session; they were not added. Add them again "
             "with /access add DIR if you want them.")
        directories = []
    for d in directories:
        try:
            state.access.add(d["path"], d.get("mode", "rw"))
        except Exception:
            note(f"Added directory {d.get('path') if isinstance(d, dict) else d} is gone; "
                 "it was dropped from this session.")
    state.extra_doc = {k: v for k, v in doc.items() if k not in OWN_KEYS}


def fork_document(state: SessionState, meta: dict[str, Any], home: Path, child_id: str) -> dict[str, Any]:
    """The document a fork starts from: this conversation and todos under ``child_id``,
    no audit log, and the person's grants signed for the child."""
    doc = whole_document(state, meta)
    doc["id"] = child_id
    doc["created"] = now_iso()
    doc["audit"] = []
    doc["directoriesSignature"] = sign_grants(home, child_id, state.workspace, doc["directories"])
    return doc
