"""The cell operations of notebook_edit, on a parsed :class:`Notebook`, with a per-cell
diff that is both the approval preview and the tool's result."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._notebook import Notebook, joined, new_cell, set_source, valid_id

ACTIONS = ("insert", "replace", "delete", "move", "set_type", "clear_outputs")
CELL_TYPES = ("code", "markdown", "raw")


@dataclass
class Change:
    summary: str
    diff: str


def _label(notebook: Notebook, index: int) -> str:
    cell = notebook.cells[index]
    ident = f" (id {cell['id']})" if "id" in cell else ""
    return f"cell {index + 1}{ident}"


def source_diff(old: str, new: str, shown: str, label: str) -> str:
    """A unified diff of one cell's source (cells rarely end in a newline, so lines are
    compared without their ends and no "no newline" markers appear)."""
    lines = difflib.unified_diff(old.split("\n"), new.split("\n"), fromfile=f"a/{shown} {label}",
                                 tofile=f"b/{shown} {label}", n=3, lineterm="")
    text = "\n".join(lines)
    return text + "\n" if text else ""


def _prefixed(prefix: str, text: str) -> str:
    return "".join(f"{prefix}{line}\n" for line in text.split("\n")) if text else f"{prefix}\n"


def _drop_outputs(cell: dict[str, Any]) -> int:
    count = len(cell.get("outputs") or [])
    if cell.get("cell_type") == "code":
        cell["outputs"] = []
        cell["execution_count"] = None
    return count


def _set_type(cell: dict[str, Any], cell_type: str) -> str:
    """Change a cell's type keeping what nbformat allows for the new type."""
    old = cell["cell_type"]
    if old == cell_type:
        return ""
    if cell_type == "code" and cell.get("attachments"):
        raise ToolError("This cell has attachments (pasted images), which code cells cannot hold; "
                        "changing its type would lose them.")
    dropped = len(cell.get("outputs") or [])
    rest = {k: v for k, v in cell.items() if k not in ("cell_type", "outputs", "execution_count")}
    # nbformat's key order: cell_type, execution_count, id, metadata, outputs, source.
    new: dict[str, Any] = {"cell_type": cell_type}
    if cell_type == "code":
        new["execution_count"] = None
    for key, value in rest.items():
        if key == "source" and cell_type == "code":
            new["outputs"] = []
        new[key] = value
    if cell_type == "code":
        new.setdefault("outputs", [])
    cell.clear()
    cell.update(new)
    note = f"{old} → {cell_type}"
    return note + (f" ({dropped} outputs dropped)" if dropped else "")


def apply_edit(notebook: Notebook, shown: str, action: str, *, cell_id: str | None, index: int | None,
               source: str | None, cell_type: str | None) -> Change:
    """Apply one action in place; raise ToolError (nothing changed) for a bad call."""
    cells = notebook.cells
    if cell_type is not None and cell_type not in CELL_TYPES:
        raise ToolError(f"cell_type must be code, markdown or raw, not '{cell_type}'.")
    if action == "insert":
        if source is None:
            raise ToolError("insert needs source (the new cell's text).")
        if index is not None:
            if not 1 <= index <= len(cells) + 1:
                raise ToolError(f"index {index} is out of range for insert: use 1 to {len(cells) + 1}.")
            at = index - 1
        elif cell_id:
            at = notebook.find(cell_id, None) + 1
        else:
            at = len(cells)
        kind = cell_type or "code"
        ident = notebook.new_id() if notebook.has_ids else None
        cells.insert(at, new_cell(kind, source, ident))
        label = _label(notebook, at)
        return Change(f"Inserted {label}, {kind}.",
                      f"+++ {shown} new {label}, {kind}\n" + _prefixed("+", source))
    if action == "clear_outputs" and not cell_id and index is None:
        count = sum(_drop_outputs(c) for c in cells if c.get("cell_type") == "code")
        return Change(f"Cleared the outputs of every code cell ({count} outputs).", "")
    at = notebook.find(cell_id, index if action != "move" or not cell_id else None)
    cell = cells[at]
    label = _label(notebook, at)
    old_source = joined(cell.get("source"))
    if action == "replace":
        if source is None:
            raise ToolError("replace needs source (the cell's new text).")
        note = _set_type(cell, cell_type) if cell_type else ""
        set_source(cell, source)
        diff = source_diff(old_source, source, shown, label)
        kept = " Its outputs are from the old source until the cell runs again." if cell.get("outputs") else ""
        summary = f"Replaced the source of {label}" + (f"; {note}" if note else "") + "." + kept
        return Change(summary, diff or f"(the source of {label} is unchanged)\n")
    if action == "delete":
        del cells[at]
        return Change(f"Deleted {label}, {cell['cell_type']}.",
                      f"--- {shown} deleted {label}\n" + _prefixed("-", old_source))
    if action == "move":
        if not cell_id:
            raise ToolError("move needs cell_id (the cell to move) and index (its new number, from 1).")
        if index is None or not 1 <= index <= len(cells):
            raise ToolError(f"move needs index, the cell's new number from 1 to {len(cells)}.")
        cells.insert(index - 1, cells.pop(at))
        return Change(f"Moved {label} to position {index}.", "")
    if action == "set_type":
        if not cell_type:
            raise ToolError("set_type needs cell_type (code, markdown or raw).")
        note = _set_type(cell, cell_type)
        return Change(f"{label}: " + (note or f"already {cell_type}; nothing changed") + ".", "")
    if action == "clear_outputs":
        count = _drop_outputs(cell)
        return Change(f"Cleared the outputs of {label} ({count} outputs).", "")
    raise ToolError(f"Unknown action '{action}'; use one of {', '.join(ACTIONS)}.")


def check_new_id(cell_id: str | None) -> None:
    if cell_id is not None and not valid_id(cell_id):
        raise ToolError("cell_id must be 1-64 letters, digits, '-' or '_'.")
