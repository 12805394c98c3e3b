"""The person's own Python in a Crystal notebook (NB-1).

A Crystal cell is a prompt. A cell whose first line is ``%%python`` is the person's
Python instead: the kernel runs it as IPython would, in the kernel's namespace (the one
the ``python``, ``variables`` and ``cell_output`` tools use), and it never reaches the
model. (IPython's own ``%%python`` magic runs a subprocess; a Crystal cell is a prompt,
so the name is free here.) The next turn is told, bounded, which such cells ran since
the last turn and how they ended: :class:`PersonCells` keeps them and
:meth:`PersonCells.take_note` hands the model its note once.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from crystal_kernel.core.errors import UserError

MARKER = "%%python"
#: At most this many cells are told to the next turn (the latest ones).
MAX_CELLS = 10
#: Characters of each cell's source the next turn is told.
MAX_SOURCE_CHARS = 2_000
#: Characters of a cell's outcome line.
MAX_OUTCOME_CHARS = 300
_FIRST_LINE = re.compile(r"\A[ \t]*(?:\r?\n[ \t]*)*(%%python)([^\n]*)(\n|\Z)")


class NotPersonCell(UserError):
    """A cell that starts with ``%%python`` but has more on that line: one English line."""


def split(code: str) -> str | None:
    """The code to run for a ``%%python`` cell, else None (a prompt or a command).

    The marker's line stays, as a comment, so a traceback's line numbers are the cell's
    own lines (IPython drops leading blank lines, so an empty line would not do); and
    IPython then never sees its own subprocess ``%%python`` magic."""
    match = _FIRST_LINE.match(code)
    if match is None:
        return None
    rest = match.group(2)
    if rest.strip():
        if not rest[:1].isspace():
            return None  # %%python3, %%pythonic: not the marker (then a prompt, as before)
        raise NotPersonCell(f"'%%python' marks a cell as your Python and takes nothing after it on its line "
                            f"(found {rest.strip()[:60]!r}); put the code on the next lines.")
    start = match.start(1)
    return code[:start] + "#" + code[start:]


def outcome_line(reply: dict[str, object]) -> str:
    """One line for how a cell ended: ``ok``, or the error's last line."""
    if reply.get("status") == "ok":
        return "ok"
    ename, evalue = str(reply.get("ename", "Error")), str(reply.get("evalue", ""))
    lines = [ln for ln in f"{ename}: {evalue}".splitlines() if ln.strip()] if evalue else [ename]
    line = lines[-1] if lines else ename
    return line if len(line) <= MAX_OUTCOME_CHARS else line[: MAX_OUTCOME_CHARS - 1] + "…"


@dataclass(frozen=True)
class RanCell:
    """One ``%%python`` cell that ran: its ``In [n]``, its code and how it ended."""

    count: int
    source: str
    outcome: str


class PersonCells:
    """The ``%%python`` cells run since the last turn (the latest :data:`MAX_CELLS`)."""

    def __init__(self) -> None:
        self._cells: deque[RanCell] = deque(maxlen=MAX_CELLS)
        self._dropped = 0

    def add(self, count: int, source: str, outcome: str) -> None:
        if len(self._cells) == MAX_CELLS:
            self._dropped += 1
        self._cells.append(RanCell(count, source, outcome))

    def __len__(self) -> int:
        return len(self._cells) + self._dropped

    def take_note(self) -> str | None:
        """The note for the next turn's prompt (and forget the cells), or None."""
        if not self._cells:
            return None
        cells, dropped = list(self._cells), self._dropped
        self._cells.clear()
        self._dropped = 0
        parts = ["<person_cells>",
                 "Since the last turn the person ran these Python cells themselves, in this notebook's "
                 "kernel (the namespace your python, variables and cell_output tools use), oldest first:"]
        if dropped:
            parts.append(f"({dropped} earlier cells are not listed.)")
        for cell in cells:
            source = cell.source.strip("\n")
            if len(source) > MAX_SOURCE_CHARS:
                source = source[:MAX_SOURCE_CHARS] + f"\n# … ({len(source) - MAX_SOURCE_CHARS} more characters)"
            parts.append(f"In [{cell.count}] ended: {cell.outcome}\n```python\n{source}\n```")
        parts.append("</person_cells>")
        return "\n".join(parts)


def body(code: str) -> str:
    """The cell's code without its marker line (what the note shows)."""
    match = _FIRST_LINE.match(code)
    return code[match.end():] if match else code
