"""Long tool output in the interactive terminal: folded to its first lines, with a way
to see the rest (``/expand N``, a command of this front only).

A result longer than ``HEAD + 2`` lines shows its first ``HEAD`` lines and one line
``… 120 more lines — /expand 3``; ``/expand 3`` prints that result whole, ``/expand``
the last one folded. Bounded: the last ``KEPT`` folded results are kept, each as the
model received it (tool output is already capped by ``toolOutputLimit``). Everything
shown goes through the printer's ``terminal_safe`` (TRUST-6).
"""

from __future__ import annotations

from collections import OrderedDict

from crystal_kernel.cli.printer import PREVIEW_WIDTH

HEAD = 8
KEPT = 50
COMMAND = "/expand"


class OutputFolds:
    """The folded results of this terminal session, numbered from 1."""

    def __init__(self) -> None:
        self._kept: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._next = 1

    def preview(self, name: str, text: str) -> str:
        """What the result line shows: the whole result when short, else its first
        lines and the ``/expand N`` line."""
        lines = [line[:PREVIEW_WIDTH].rstrip() for line in text.strip("\n").splitlines()]
        if len(lines) > HEAD + 2:
            number = self._keep(name, text)
            lines = lines[:HEAD] + [f"… {len(lines) - HEAD} more lines — {COMMAND} {number}"]
        return "\n".join([lines[0]] + [f"  {line}" if line else "" for line in lines[1:]]) if lines else ""

    def _keep(self, name: str, text: str) -> int:
        number = self._next
        self._next += 1
        self._kept[number] = (name, text)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return number

    def expand(self, argument: str) -> str:
        """The text ``/expand [N]`` prints: result N whole (default: the last folded)."""
        argument = argument.strip()
        if not self._kept:
            return "No folded tool output in this session yet."
        if not argument:
            number = next(reversed(self._kept))
        elif argument.isdigit():
            number = int(argument)
        else:
            return f"Usage: {COMMAND} [N], N the number on a folded result's last line."
        if number not in self._kept:
            oldest, newest = next(iter(self._kept)), next(reversed(self._kept))
            return f"No folded output {number}; the ones kept are {oldest}–{newest}."
        name, text = self._kept[number]
        return f"── {name} output {number}, whole ──\n{text.rstrip()}\n── end of output {number} ──"
