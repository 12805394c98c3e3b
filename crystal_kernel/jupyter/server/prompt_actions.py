"""Prompt sets and attachments listed and changed with the same functions, rules and
messages as ``crystal promptsets`` and ``crystal prompt-attachments`` (PS-9, PA-9): for
``GET/POST promptsets`` and ``GET/POST attachments`` (server/prompts.py) and for the
kernel's sidebar comm (jupyter/sidebar_comm.py). No Jupyter imports here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError

SET_ACTIONS = ("enable", "disable")
ATTACHMENT_ACTIONS = ("enable", "disable", "up", "down")
SOURCES = {"home": "home", "project": "workspace"}


def promptsets_listing(home: Path) -> dict[str, Any]:
    from crystal_kernel.prompts import report
    from crystal_kernel.prompts.selection import resolve_selection

    return report.sets_data(home, resolve_selection(home, None, None))


def promptsets_action(home: Path, body: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.prompts import promptsets

    action, name = parse_action(body, SET_ACTIONS)
    if action == "enable":
        if name is None:
            raise UserError("'name' is required to enable a prompt set.")
        message = promptsets.enable_set(home, name)
    else:
        message = promptsets.disable_sets(home, name)
    return {"message": message, **promptsets_listing(home)}


def attachments_listing(home: Path, workspace: Path) -> dict[str, Any]:
    from crystal_kernel.prompts import report
    from crystal_kernel.prompts.selection import resolve_selection

    return report.attachments_data(resolve_selection(home, workspace, None))


def attachments_action(home: Path, workspace: Path, body: dict[str, Any]) -> dict[str, Any]:
    from crystal_kernel.prompts.attachments import discover_attachments, require_attachment
    from crystal_kernel.prompts.commands import apply_attachment_action

    action, name = parse_action(body, ATTACHMENT_ACTIONS)
    if name is None:
        raise UserError(f"'name' is required to {action} a prompt attachment.")
    source_arg = body.get("source")
    if source_arg is not None and source_arg not in SOURCES:
        raise UserError("'source' must be home or project.")
    source = SOURCES.get(source_arg) if source_arg else None
    view = discover_attachments(home, workspace, [], source=source)
    require_attachment(view, name, f" in the {source_arg} folder" if source_arg else "")
    message = apply_attachment_action(view, action, name)
    return {"message": message, **attachments_listing(home, workspace)}


def parse_action(body: dict[str, Any], allowed: tuple[str, ...]) -> tuple[str, str | None]:
    """The checked ``action`` and ``name`` of a POST body (UserError for anything else)."""
    unknown = sorted(set(body) - {"action", "name", "source"})
    if unknown:
        raise UserError(f"Unknown field '{unknown[0]}'; send action and name.")
    action = body.get("action")
    if action not in allowed:
        raise UserError(f"'action' must be one of: {', '.join(allowed)}.")
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise UserError("'name' must be text.")
    return action, name or None
