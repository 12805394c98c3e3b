"""What an inline completion request says (NB-2): the request body checked, the prompt
the model receives, and the answer cleaned into the text to insert at the cursor.

The browser sends the editor's text around the cursor, the cells above (bounded) and,
when the kernel is Crystal's or has the magics loaded, a short listing of its variables
(:func:`variables_text`, evaluated in the kernel as a silent user expression). Every
field is bounded here again: the page is not trusted to have clipped them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from crystal_kernel.core.errors import UserError

# Bounds on what reaches the model: a completion wants the nearby code, not the notebook.
MAX_PREFIX = 6_000
MAX_SUFFIX = 2_000
MAX_CELLS = 10
MAX_CELLS_CHARS = 6_000
MAX_VARIABLES_CHARS = 2_000
MAX_LANGUAGE = 40
# The longest completion: a few lines of ghost text, never a whole program.
MAX_OUTPUT_TOKENS = 256
MAX_COMPLETION_CHARS = 2_000

SYSTEM = (
    "You complete code in the person's editor in JupyterLab. Reply with only the text to "
    "insert at the cursor (marked <cursor/>): no explanation, no Markdown fences, nothing "
    "the code before or after the cursor already has. Prefer a short completion: the rest "
    "of the line, or a few lines. If nothing fits, reply with nothing."
)


@dataclass
class CompletionInput:
    """One checked request: the editor's text before and after the cursor, and context."""

    prefix: str
    suffix: str = ""
    language: str = "python"
    cells_above: list[str] = field(default_factory=list)
    variables: str = ""
    path: str = ""


def parse_body(data: dict[str, Any]) -> CompletionInput:
    """The request body as a :class:`CompletionInput`; UserError (one line) when a field
    has the wrong type. Long fields are clipped, not refused (the person is typing)."""
    known = {"prefix", "suffix", "language", "cellsAbove", "variables", "path"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(f"Unknown field '{unknown[0]}' in the completion request; "
                        f"it takes {', '.join(sorted(known))}.")
    for name in ("prefix", "suffix", "language", "variables", "path"):
        if name in data and not isinstance(data[name], str):
            raise UserError(f"'{name}' in the completion request must be a string.")
    if "prefix" not in data:
        raise UserError("The completion request has no 'prefix' (the text before the cursor).")
    cells = data.get("cellsAbove", [])
    if not isinstance(cells, list) or not all(isinstance(c, str) for c in cells):
        raise UserError("'cellsAbove' in the completion request must be a list of strings.")
    language = (data.get("language") or "python").strip()[:MAX_LANGUAGE] or "python"
    if data["prefix"].lstrip().startswith("%%python"):
        # A Crystal notebook's cell is a prompt (Markdown), except the person's own
        # %%python cells (NB-1): those are Python.
        language = "python"
    return CompletionInput(
        prefix=data["prefix"][-MAX_PREFIX:],
        suffix=data.get("suffix", "")[:MAX_SUFFIX],
        language=language,
        cells_above=_bounded_cells(cells),
        variables=data.get("variables", "")[:MAX_VARIABLES_CHARS],
        path=data.get("path", "")[:200],
    )


def _bounded_cells(cells: list[str]) -> list[str]:
    """The nearest cells above (the last ones), at most MAX_CELLS and MAX_CELLS_CHARS in all;
    the oldest go first, and one cell longer than what is left keeps its end."""
    kept: list[str] = []
    budget = MAX_CELLS_CHARS
    for cell in reversed(cells[-MAX_CELLS:]):
        if budget <= 0:
            break
        text = cell if len(cell) <= budget else cell[-budget:]
        kept.append(text)
        budget -= len(text)
    kept.reverse()
    return kept


def user_message(request: CompletionInput) -> str:
    """The one user message the model receives."""
    parts: list[str] = []
    if request.path:
        parts.append(f"File: {request.path}")
    if request.cells_above:
        cells = "\n\n".join(f"<cell>\n{c}\n</cell>" for c in request.cells_above)
        parts.append(f"The notebook's cells above this one:\n{cells}")
    if request.variables.strip():
        parts.append(f"Variables in the kernel (name: type = value):\n{request.variables.strip()}")
    parts.append(f"Complete this {request.language} code at <cursor/>:\n"
                 f"{request.prefix}<cursor/>{request.suffix}")
    return "\n\n".join(parts)


_FENCE_OPEN = re.compile(r"^\s*```[\w+-]*[ \t]*\n")
# The end of the text so far that may yet become a closing fence (or the newline before
# it): held back until the next piece says.
_MAYBE_FENCE = re.compile(r"\n?`{1,2}$|\n$")


class AnswerCleaner:
    """Turns the streamed answer into the text to insert: a Markdown fence around it
    (which models add though told not to) is dropped, and the text ends at the closing
    fence or at MAX_COMPLETION_CHARS. Fed piece by piece, it gives back only additions
    (ghost text cannot take back what it showed); :meth:`finish` gives the held-back end."""

    def __init__(self) -> None:
        self._raw = ""
        self.text = ""
        self.done = False

    def _body(self) -> str | None:
        """The answer without its opening fence; None while an opening fence is unsure."""
        raw = self._raw
        stripped = raw.lstrip()
        if stripped.startswith("`") and "\n" not in stripped and len(stripped) < 40:
            return None
        match = _FENCE_OPEN.match(raw)
        return raw[match.end():] if match else raw

    def _advance(self, visible: str) -> str:
        visible = visible[:MAX_COMPLETION_CHARS]
        if len(visible) >= MAX_COMPLETION_CHARS:
            self.done = True
        if not visible.startswith(self.text) or len(visible) <= len(self.text):
            return ""
        added = visible[len(self.text):]
        self.text = visible
        return added

    def feed(self, piece: str) -> str:
        """Add ``piece``; return what it adds to :attr:`text` (often "" for a while)."""
        if self.done:
            return ""
        self._raw += piece
        body = self._body()
        if body is None:
            return ""
        end = body.find("```")
        if end >= 0:
            self.done = True
            return self._advance(body[:end].rstrip("\n"))
        held = _MAYBE_FENCE.search(body)
        return self._advance(body[:held.start()] if held else body)

    def finish(self) -> str:
        """The answer ended: what was held back, less trailing newlines."""
        if self.done:
            return ""
        self.done = True
        body = self._body()
        return self._advance((self._raw if body is None else body).rstrip("\n"))


def variables_text(limit: int = 60) -> str:
    """The kernel's user variables as ``name: type = short repr`` lines, for the page to
    send with a completion request. Runs inside the kernel (a silent user expression of
    the lab extension, only in a Crystal kernel or one with Crystal's magics loaded); the
    same listing as the ``variables`` tool, shorter."""
    from IPython import get_ipython

    from crystal_kernel.jupyter.notebook_tools import short_repr

    shell = get_ipython()
    if shell is None:
        return ""
    hidden = getattr(shell, "user_ns_hidden", {})
    names = sorted(n for n in shell.user_ns if not n.startswith("_") and n not in hidden)
    lines: list[str] = []
    for name in names[:limit]:
        value = shell.user_ns[name]
        lines.append(f"{name}: {type(value).__name__} = {short_repr(value)}")
    text = "\n".join(lines)
    return text[:MAX_VARIABLES_CHARS]


class Listing:
    """Text whose repr is itself: a user expression's ``text/plain`` is the repr of its
    value, and the page wants the listing, not a quoted Python string."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def variables_listing() -> Listing:
    """:func:`variables_text` as the user expression the lab extension evaluates."""
    return Listing(variables_text())
