"""The sidebar's data from the kernel's side, for kernels that run elsewhere.

Through Jupyter Kernel Gateway or Enterprise Gateway the kernel's Home and workspace
are on another machine (or pod) than the Jupyter server, so the server extension's
REST API (server_ext.py), which reads ``.crystal/`` on the server's disk, sees none of
them. The lab extension then opens a ``crystal.sidebar`` comm on the notebook's kernel
and asks it instead; the kernel answers from its own disk with the very functions the
REST API uses, so both sources give the same shapes and messages.

Each request is ``{"id": N, "op": OP, "args": {...}}``; each reply is
``{"id": N, "ok": true, "data": {...}}`` or ``{"id": N, "ok": false, "status": 400|404,
"error": "one English line"}``. Ops: ``sessions``, ``transcript {id}``, ``jobs``,
``log {session, job, offset?, limit?}``, ``stop {session, job}``, ``promptsets``,
``promptsets_action {action, name?}``, ``attachments``, ``attachments_action {action,
name, source?}``, ``info``; and ``fix {source, traceback}`` ("Fix with Crystal", NB-3,
fix_cell.py: a turn of the notebook's session, answered when it ends). Replies are
bounded (``MAX_REPLY_CHARS``): a transcript that would be larger drops its oldest
messages and says how many.

Comm messages reach the kernel while a cell runs (ipykernel >= 7.4), so the sidebar
follows a running turn's jobs; every op only reads small files or signals a job's
supervisor, so none holds up the turn for long.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter.kernel import CrystalKernel

COMM_TARGET = "crystal.sidebar"
MAX_REPLY_CHARS = 4 * 1024 * 1024
DEFAULT_LOG_CHUNK = 64 * 1024


class _Where:
    """The kernel's Home and workspace, read at each request (``/cd`` moves it)."""

    def __init__(self, kernel: CrystalKernel):
        self.kernel = kernel

    @property
    def workspace(self) -> Path:
        return Path(self.kernel.workspace).resolve()

    @property
    def session(self) -> Session | None:
        """The kernel's open session, or None before its first cell."""
        session: Session | None = getattr(self.kernel, "crystal", None)
        return session

    @property
    def home(self) -> Path:
        session = self.session
        if session is not None and getattr(session, "home", None):
            return Path(session.home)
        from crystal_kernel.core.paths import home_dir

        return home_dir()


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise UserError(f"'{name}' is required and must be text.")
    return value


def _whole(args: dict[str, Any], name: str, default: int | None, maximum: int) -> int | None:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UserError(f"'{name}' must be a whole number of at least 0.")
    return min(value, maximum)


def _info(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    import socket

    return {"workspace": str(where.workspace), "home": str(where.home), "host": socket.gethostname()}


def _sessions(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.transcripts import list_sessions

    return list_sessions(where.workspace, homes=[where.home])  # this kernel's Home signs (TRUST-7)


def _transcript(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.transcripts import session_transcript

    return _bounded_transcript(session_transcript(where.workspace, _text(args, "id")))


def _jobs(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.jobfiles import list_jobs_in

    workspace = where.workspace
    return list_jobs_in(workspace, [workspace])


def _log(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.jobfiles import MAX_LOG_CHUNK, read_log

    offset = _whole(args, "offset", None, 2**62)
    limit = _whole(args, "limit", DEFAULT_LOG_CHUNK, MAX_LOG_CHUNK) or DEFAULT_LOG_CHUNK
    return read_log(where.workspace, _text(args, "session"), _text(args, "job"), offset, limit)


def _stop(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.jobfiles import stop_job

    return stop_job(where.workspace, _text(args, "session"), _text(args, "job"))


def _promptsets(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.prompt_actions import promptsets_listing

    return promptsets_listing(where.home)


def _promptsets_action(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    """With a session open, the same rules as ``/promptset`` (PS-7, FL-1): refused while a
    turn runs or when ``--prompt-set`` fixes the set, and the session's system message is
    replaced, so its next turn already uses the set."""
    from crystal_kernel.jupyter.server.prompt_actions import (
        SET_ACTIONS,
        parse_action,
        promptsets_action,
        promptsets_listing,
    )

    session = where.session
    if session is None:
        return promptsets_action(where.home, args)
    action, name = parse_action(args, SET_ACTIONS)
    if action == "enable" and name is None:
        raise UserError("'name' is required to enable a prompt set.")
    from crystal_kernel.prompts.commands import promptset_command

    message = promptset_command(session, [name if action == "enable" and name else "default"])
    return {"message": message, **promptsets_listing(where.home)}


def _attachments(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.jupyter.server.prompt_actions import attachments_listing

    return attachments_listing(where.home, where.workspace)


def _attachments_action(where: _Where, args: dict[str, Any]) -> dict[str, Any]:
    """With a session open (and no ``source``), the same rules as ``/promptattach``
    (FL-2, FL-4) and the session's system message is replaced."""
    from crystal_kernel.jupyter.server.prompt_actions import (
        ATTACHMENT_ACTIONS,
        attachments_action,
        attachments_listing,
        parse_action,
    )

    session = where.session
    if session is None or args.get("source") is not None:
        return attachments_action(where.home, where.workspace, args)
    action, name = parse_action(args, ATTACHMENT_ACTIONS)
    if name is None:
        raise UserError(f"'name' is required to {action} a prompt attachment.")
    from crystal_kernel.prompts.commands import promptattach_command

    message = promptattach_command(session, [action, name])
    return {"message": message, **attachments_listing(where.home, where.workspace)}


OPS: dict[str, Callable[[_Where, dict[str, Any]], dict[str, Any]]] = {
    "info": _info,
    "sessions": _sessions,
    "transcript": _transcript,
    "jobs": _jobs,
    "log": _log,
    "stop": _stop,
    "promptsets": _promptsets,
    "promptsets_action": _promptsets_action,
    "attachments": _attachments,
    "attachments_action": _attachments_action,
}


def _bounded_transcript(data: dict[str, Any]) -> dict[str, Any]:
    """Drop the oldest messages until the reply fits in ``MAX_REPLY_CHARS``."""
    messages = data.get("messages") or []
    sizes = [len(json.dumps(m, ensure_ascii=False)) for m in messages]
    total = sum(sizes) + 4096
    dropped = 0
    while messages[dropped:] and total > MAX_REPLY_CHARS:
        total -= sizes[dropped]
        dropped += 1
    if dropped:
        data = dict(data, messages=messages[dropped:], droppedMessages=int(data.get("droppedMessages", 0)) + dropped)
    return data


def answer(kernel: CrystalKernel, request: object) -> dict[str, Any]:
    """The reply to one request (never raises: a failure is a reply too)."""
    from crystal_kernel.jupyter.server.ids import NotFound

    rid = request.get("id") if isinstance(request, dict) else None
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        return {"id": rid, "ok": False, "status": 400, "error": "A sidebar request needs an 'op'."}
    op = OPS.get(request["op"])
    if op is None:
        return {"id": rid, "ok": False, "status": 400,
                "error": f"Unknown sidebar request '{request['op'][:40]}'; one of: {', '.join(OPS)}."}
    args = request.get("args") or {}
    if not isinstance(args, dict):
        return {"id": rid, "ok": False, "status": 400, "error": "'args' must be a JSON object."}
    try:
        return {"id": rid, "ok": True, "data": op(_Where(kernel), args)}
    except UserError as exc:
        return {"id": rid, "ok": False, "status": 400, "error": str(exc)}
    except NotFound as exc:
        return {"id": rid, "ok": False, "status": 404, "error": str(exc)}
    except Exception as exc:  # the sidebar shows it; the kernel goes on
        return {"id": rid, "ok": False, "status": 500, "error": f"The kernel could not answer: {type(exc).__name__}: {exc}"[:400]}


def register_comm_target(kernel: CrystalKernel) -> bool:
    """Answer the lab extension's ``crystal.sidebar`` comm on this kernel (once)."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False

    def on_open(comm: Any, msg: Any) -> None:
        def on_msg(message: Any) -> None:
            data = (message.get("content") or {}).get("data")
            from crystal_kernel.jupyter import fix_cell

            if fix_cell.wants(data):  # NB-3: a turn; its reply comes when it has ended
                fix_cell.start(kernel, data, comm)
                return
            comm.send(answer(kernel, data))

        comm.on_msg(on_msg)
        comm.send({"id": None, "ok": True, "data": {"ready": True}})

    if COMM_TARGET not in getattr(manager, "targets", {}):
        manager.register_target(COMM_TARGET, on_open)
    return True
