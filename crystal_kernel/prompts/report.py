"""Listings shared by the slash commands and the CLI (PS-7, PS-9, PA-8, PA-9, FL-4):
plain data first (for ``--format json``), then English text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crystal_kernel.prompts.attachments import enabled_in_order
from crystal_kernel.prompts.manifest import Folder, find_prompt_file
from crystal_kernel.prompts.names import ATTACHABLE, DEFAULT_SET, NAMED_PROMPTS
from crystal_kernel.prompts.promptsets import resolve_prompt, sets_root
from crystal_kernel.prompts.selection import PromptSelection


def set_row(folder: Folder) -> dict[str, Any]:
    return {
        "name": folder.name,
        "title": folder.title,
        "description": folder.description,
        "enabled": folder.enabled,
        "path": str(folder.path),
        "prompts": [n for n in NAMED_PROMPTS if folder.file_for(n) is not None],
    }


def sets_data(home: Path, selection: PromptSelection, workspace: Path | None = None,
              effective: tuple[str, ...] = ()) -> dict[str, Any]:
    """Sets, the selection, and the effective source of the ``effective`` prompts."""
    notes = list(selection.notes)
    data: dict[str, Any] = {
        "folder": str(sets_root(home)),
        "selected": selection.set_label,
        "selectedBy": selection.set_reason,
        "sets": [set_row(f) for f in selection.sets.values()],
    }
    if effective:
        data["effective"] = {
            name: resolve_prompt(name, home, workspace, selection.set_folder, notes).describe()
            for name in effective
        }
    data["notes"] = list(dict.fromkeys(notes))
    return data


def sets_text(data: dict[str, Any]) -> str:
    lines = [f"Prompt sets in {data['folder']}:"]
    marker = "*" if data["selected"] == DEFAULT_SET else " "
    lines.append(f"{marker} {DEFAULT_SET:<20} built-in prompts")
    for row in data["sets"]:
        marker = "*" if row["name"] == data["selected"] else " "
        state = "enabled" if row["enabled"] else "disabled"
        lines.append(f"{marker} {row['name']:<20} {_about(row)}[{state}]")
    why = {"forced": " (forced by --prompt-set)", "enabled": " (enabled in prompt.json)"}.get(data["selectedBy"], "")
    lines.append(f"Selected: {data['selected']}{why}")
    for name, source in data.get("effective", {}).items():
        lines.append(f"{name.capitalize()}: {source}")
    lines += [f"Note: {n}" for n in data["notes"]]
    return "\n".join(lines)


def _about(row: dict[str, Any]) -> str:
    """Title (when it is not just the folder name) and description, with a trailing space."""
    parts = [row["title"]] if row["title"] != row["name"] else []
    if row["description"]:
        parts.append(row["description"])
    return " — ".join(parts) + " " if parts else ""


def set_show_data(folder: Folder) -> dict[str, Any]:
    row = set_row(folder)
    row["manifest"] = folder.data
    row["files"] = {n: str(p) for n in NAMED_PROMPTS if (p := folder.file_for(n)) is not None}
    return row


def set_show_text(data: dict[str, Any]) -> str:
    lines = [f"Prompt set {data['name']} ({'enabled' if data['enabled'] else 'disabled'})",
             f"Title: {data['title']}"]
    if data["description"]:
        lines.append(f"Description: {data['description']}")
    lines.append(f"Folder: {data['path']}")
    if data["files"]:
        lines.append("Prompts: " + ", ".join(data["files"]))
    else:
        lines.append("Prompts: none (every prompt falls back to the built-in text)")
    return "\n".join(lines)


def attachment_row(folder: Folder, position: int | None, forced: bool) -> dict[str, Any]:
    return {
        "name": folder.name,
        "title": folder.title,
        "description": folder.description,
        "source": folder.source,
        "enabled": folder.enabled,
        "order": folder.order,
        "position": position,
        "forced": forced,
        "path": str(folder.path),
        "modes": [m for m in ATTACHABLE if find_prompt_file(folder.path, m) is not None],
    }


def attachments_data(selection: PromptSelection, folders: dict[str, Folder] | None = None) -> dict[str, Any]:
    """Every discovered attachment with its effective position (1-based, None when not
    attached). ``folders`` lists another view (``--source``) instead of the merged one."""
    view = folders if folders is not None else selection.available
    attached = [f.path for f in selection.attachments]
    forced = set(selection.forced)
    rows = []
    ordered = enabled_in_order(view)
    rest = sorted((f for f in view.values() if f not in ordered), key=lambda f: f.name)
    for folder in ordered + rest:
        position = attached.index(folder.path) + 1 if folder.path in attached else None
        rows.append(attachment_row(folder, position, folder.name in forced))
    return {
        "attachments": rows,
        "off": not selection.flags.attachments_on,
        "forced": selection.forced,
        "promptSet": selection.set_label,
        "notes": list(dict.fromkeys(selection.notes)),
    }


def attachments_text(data: dict[str, Any]) -> str:
    if data["off"]:
        lines = ["Prompt attachments (off for this process: --prompt-attachments off; nothing is attached):"]
    else:
        lines = ["Prompt attachments:"]
    if not data["attachments"]:
        lines.append("  none found (folders with prompt.json in ~/.crystal/prompt-attachments/ or "
                     "<workspace>/.crystal/prompt-attachments/)")
    for row in data["attachments"]:
        place = f"{row['position']}." if row["position"] else "-"
        if row["forced"] and not row["enabled"]:
            state = "forced (disabled on disk)"
        elif row["forced"]:
            state = "forced, enabled"
        else:
            state = "enabled" if row["enabled"] else "disabled"
        modes = "/".join(row["modes"]) or "no files"
        lines.append(f"  {place:<3} {row['name']:<20} {_about(row)}[{row['source']}, {state}, {modes}]")
    lines += [f"Note: {n}" for n in data["notes"]]
    return "\n".join(lines)


def attachment_show_data(folder: Folder, selection: PromptSelection) -> dict[str, Any]:
    attached = [f.path for f in selection.attachments]
    position = attached.index(folder.path) + 1 if folder.path in attached else None
    row = attachment_row(folder, position, folder.name in selection.forced)
    row["manifest"] = folder.data
    row["files"] = {m: str(p) for m in ATTACHABLE if (p := find_prompt_file(folder.path, m)) is not None}
    return row


def attachment_show_text(data: dict[str, Any]) -> str:
    lines = [f"Prompt attachment {data['name']} ({data['source']}, "
             f"{'enabled' if data['enabled'] else 'disabled'}"
             + (f", order {data['order']}" if data["order"] is not None else "") + ")",
             f"Title: {data['title']}"]
    if data["description"]:
        lines.append(f"Description: {data['description']}")
    lines.append(f"Folder: {data['path']}")
    lines.append("Appends to: " + (", ".join(data["files"]) if data["files"] else "nothing (no work, plan or review file)"))
    if data["forced"]:
        lines.append("Forced for this process by --prompt-attachment.")
    return "\n".join(lines)
