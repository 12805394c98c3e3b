"""Notebooks (``.ipynb``, nbformat 4) as plain JSON: load, render as cells, write back.

The agent host never imports a Jupyter library (DESIGN principle 1), and nbformat 4 is
plain JSON, so the file tools parse it here. Writing keeps the file's own layout: the
key order as loaded, its indent (nbformat writes ``indent=1``), whether non-ASCII text
was escaped, and its final newline, so an edit changes only the cells it touches
whenever the file was written by Jupyter. Tests validate the results with nbformat.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.fsutil import atomic_write_text
from crystal_kernel.core.html_text import ANSWER_IN_HTML, html_text
from crystal_kernel.core.messages import ImagePart
from crystal_kernel.tools.images import MAX_IMAGE_BYTES, MAX_IMAGES, sniff_image_type

MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
# Cells shown by one read when no limit is given.
DEFAULT_CELLS = 200
# Characters of one output (stream, text/plain, Markdown) shown; the rest is cut with a note.
OUTPUT_CHARS = 3000
# Lines of a traceback shown (the last ones: where the error happened).
TRACEBACK_LINES = 30
MAX_SOURCE_LINE_CHARS = 2000
ATTACHABLE = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class NotANotebook(ToolError):
    """The file is named .ipynb but is not an nbformat 4 notebook."""


def is_notebook(path: Path | str) -> bool:
    return str(path).lower().endswith(".ipynb")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def joined(value: Any) -> str:
    """nbformat multiline strings are a string or a list of strings."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def clip(text: str, limit: int = OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = limit - head
    return (text[:head] + f"\n[... {len(text) - limit} characters of this output cut ...]\n" + text[-tail:])


@dataclass
class Layout:
    """How the file was written, so a rewrite keeps it."""

    indent: int | str | None = 1
    ensure_ascii: bool = False
    final_newline: bool = True


@dataclass
class Notebook:
    data: dict[str, Any]
    layout: Layout = field(default_factory=Layout)
    # The file's text as read (for diffs and "did anything change").
    text: str = ""

    @property
    def cells(self) -> list[dict[str, Any]]:
        cells: list[dict[str, Any]] = self.data["cells"]
        return cells

    @property
    def has_ids(self) -> bool:
        """nbformat 4.5 and later give every cell an id."""
        return self.data.get("nbformat_minor", 0) >= 5 or any("id" in c for c in self.cells)

    def dumps(self) -> str:
        text = json.dumps(self.data, indent=self.layout.indent, ensure_ascii=self.layout.ensure_ascii)
        return text + ("\n" if self.layout.final_newline else "")

    def kernel_name(self) -> str:
        spec = self.data.get("metadata", {}).get("kernelspec")
        return spec.get("name", "") if isinstance(spec, dict) else ""

    def find(self, cell_id: str | None, number: int | None) -> int:
        """The 0-based position of the cell a call names by id or by number (from 1)."""
        if cell_id:
            for i, cell in enumerate(self.cells):
                if cell.get("id") == cell_id:
                    return i
            known = ", ".join(str(c.get("id")) for c in self.cells[:20] if "id" in c)
            raise ToolError(f"No cell has id '{cell_id}'." + (f" Ids: {known}." if known else
                                                              " This notebook has no cell ids; use index."))
        if number is not None:
            if not 1 <= number <= len(self.cells):
                raise ToolError(f"index {number} is out of range: the notebook has {len(self.cells)} cells "
                                "(numbered from 1).")
            return number - 1
        raise ToolError("Name the cell with cell_id (or index, its number from 1).")

    def new_id(self) -> str:
        taken = {c.get("id") for c in self.cells}
        while True:
            candidate = uuid.uuid4().hex[:8]
            if candidate not in taken:
                return candidate


def detect_layout(text: str) -> Layout:
    match = re.search(r'^[{\[]\s*?\n([ \t]+)["{\[]', text)
    indent: int | str | None = None
    if match:
        ws = match.group(1)
        indent = len(ws) if set(ws) == {" "} else ws
    elif "\n" in text.strip():
        indent = 1
    non_ascii = any(ord(ch) > 127 for ch in text)
    return Layout(indent=indent, ensure_ascii=not non_ascii and "\\u" in text, final_newline=text.endswith("\n"))


def parse_notebook(text: str, shown: str) -> Notebook:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotANotebook(f"'{shown}' is not a valid notebook: its JSON is broken at line {exc.lineno}, "
                        f"column {exc.colno} ({exc.msg}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise NotANotebook(f"'{shown}' is not a notebook: it has no list of cells.")
    if data.get("nbformat") != 4:
        raise NotANotebook(f"'{shown}' is nbformat {data.get('nbformat')}; only nbformat 4 notebooks are supported.")
    for i, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise NotANotebook(f"'{shown}' is not a valid notebook: cell {i} has no known cell_type.")
    return Notebook(data, detect_layout(text), text)


def load_notebook(path: Path, shown: str) -> Notebook:
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise ToolError(f"'{shown}' is {size} bytes; notebooks over {MAX_NOTEBOOK_BYTES} bytes are refused.")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{shown}' is not UTF-8 text, so it is not a valid notebook.") from None
    except OSError as exc:
        raise ToolError(f"Cannot read '{shown}': {exc.strerror or exc}.") from None
    return parse_notebook(text, shown)


def save_notebook(path: Path, notebook: Notebook) -> None:
    atomic_write_text(path, notebook.dumps())


def set_source(cell: dict[str, Any], text: str) -> None:
    """Store source the way the cell did (nbformat writes a list of lines)."""
    if isinstance(cell.get("source"), str):
        cell["source"] = text
    else:
        cell["source"] = text.splitlines(keepends=True)


def new_cell(cell_type: str, source: str, cell_id: str | None) -> dict[str, Any]:
    """A cell as nbformat writes it (keys sorted)."""
    cell: dict[str, Any] = {"cell_type": cell_type}
    if cell_type == "code":
        cell["execution_count"] = None
    if cell_id:
        cell["id"] = cell_id
    cell["metadata"] = {}
    if cell_type == "code":
        cell["outputs"] = []
    cell["source"] = source.splitlines(keepends=True)
    return cell


def valid_id(cell_id: str) -> bool:
    return bool(_ID.match(cell_id))


# ----- rendering -------------------------------------------------------------------------


@dataclass
class Rendered:
    text: str
    images: list[ImagePart] = field(default_factory=list)


def cell_header(number: int, cell: dict[str, Any]) -> str:
    parts = [f"## cell {number}", str(cell.get("cell_type"))]
    if "id" in cell:
        parts.append(f"id {cell['id']}")
    count = cell.get("execution_count")
    if cell.get("cell_type") == "code":
        parts.append(f"In [{count if count is not None else ' '}]")
    return " · ".join(parts)


def _source_text(cell: dict[str, Any]) -> str:
    lines = []
    for line in joined(cell.get("source")).split("\n"):
        if len(line) > MAX_SOURCE_LINE_CHARS:
            line = line[:MAX_SOURCE_LINE_CHARS] + f" [... line cut at {MAX_SOURCE_LINE_CHARS} characters]"
        lines.append(line)
    return "\n".join(lines)


def error_text(output: dict[str, Any]) -> str:
    head = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
    trace = [strip_ansi(line) for line in output.get("traceback") or [] if isinstance(line, str)]
    lines = "\n".join(trace).split("\n")
    if len(lines) > TRACEBACK_LINES:
        lines = [f"[... {len(lines) - TRACEBACK_LINES} traceback lines cut ...]"] + lines[-TRACEBACK_LINES:]
    return head + ("\n" + clip("\n".join(lines)) if trace else "")


def _image(mime: str, value: Any, images: list[ImagePart], attach: bool | None) -> str:
    data = joined(value)
    size = len(data) * 3 // 4
    note = f"→ {mime} image, about {size} bytes"
    if not attach:
        return note + " (not attached: this model takes no images)" if attach is None else note
    if mime not in ATTACHABLE:
        return note + " (not attachable)"
    if len(images) >= MAX_IMAGES:
        return note + f" (not attached: at most {MAX_IMAGES} images per read; read fewer cells)"
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return note + " (not attached: its base64 is broken)"
    if len(raw) > MAX_IMAGE_BYTES or sniff_image_type(raw[:16]) != mime:
        return note + " (not attached: too large or not the declared type)"
    images.append(ImagePart.from_bytes(mime, raw))
    return note + f" (attached as image {len(images)})"


def output_lines(output: dict[str, Any], images: list[ImagePart], attach: bool | None) -> list[str]:
    """One output as text lines; images listed, attached when ``attach``."""
    kind = output.get("output_type")
    if kind == "stream":
        return [f"→ {output.get('name', 'stdout')}:", clip(strip_ansi(joined(output.get('text'))).rstrip("\n"))]
    if kind == "error":
        return ["→ error: " + error_text(output)]
    if kind not in ("execute_result", "display_data"):
        return [f"→ {kind} output"]
    raw = output.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if not data:
        return []  # shows nothing: a streamed answer's display, emptied when the whole answer was shown
    out: list[str] = []
    label = "result" if kind == "execute_result" else "display"
    for mime in ("text/markdown", "text/plain"):
        if mime in data:
            text = joined(data[mime])
            if mime == "text/plain" and text.rstrip().endswith(ANSWER_IN_HTML) and "text/html" in data:
                # A Crystal answer kept once, as its HTML (render.py): read its text there.
                mime, text = "text/html", html_text(joined(data["text/html"]))
            out += [f"→ {label} ({mime}):", clip(strip_ansi(text).rstrip("\n"))]
            break
    for mime, value in data.items():
        if mime.startswith("image/"):
            out.append(_image(mime, value, images, attach))
    if not out:
        out.append(f"→ {label}: " + ", ".join(f"{m} ({len(joined(v))} characters)" for m, v in data.items()))
    return out


def render_cell(number: int, cell: dict[str, Any], images: list[ImagePart], attach: bool | None) -> str:
    parts = [cell_header(number, cell), _source_text(cell)]
    for output in cell.get("outputs") or []:
        if isinstance(output, dict):
            parts += output_lines(output, images, attach)
    for name in (cell.get("attachments") or {}):
        parts.append(f"→ attachment {name}")
    return "\n".join(parts)


def render(notebook: Notebook, shown: str, *, offset: int | None, limit: int | None,
           attach: bool | None) -> Rendered:
    """The notebook as numbered cells, ``offset``/``limit`` counting cells from 1.
    ``attach``: True attaches image outputs, None lists them as not attachable for this
    model, False lists them plainly (previews)."""
    cells = notebook.cells
    start = offset or 1
    count = limit or DEFAULT_CELLS
    if cells and start > len(cells):
        raise ToolError(f"offset {start} is past the end of '{shown}', which has {len(cells)} cells.")
    spec = notebook.data.get("metadata", {}).get("kernelspec")
    kernel = f", kernel {spec.get('name')}" if isinstance(spec, dict) and spec.get("name") else ""
    head = f"{shown}: notebook, {len(cells)} cells{kernel}."
    if not cells:
        return Rendered(head + " It has no cells.")
    images: list[ImagePart] = []
    window = cells[start - 1:start - 1 + count]
    blocks = [render_cell(start + i, cell, images, attach) for i, cell in enumerate(window)]
    end = start + len(window) - 1
    text = head + "\n\n" + "\n\n".join(blocks)
    if start > 1 or end < len(cells):
        text += f"\n\n[cells {start}-{end} of {len(cells)}" + (
            f"; read on with offset={end + 1}]" if end < len(cells) else "]")
    return Rendered(text, images)


def cell_sources(text: str) -> list[str] | None:
    """Each cell's source, for grep and search; None when the text is not a notebook."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None
    return [joined(c.get("source")) if isinstance(c, dict) else "" for c in data["cells"]]
