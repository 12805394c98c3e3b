"""What the terminal front prints (TRUST-6).

Everything the ``crystal`` command writes for a person goes through :func:`say` (text)
or :func:`say_json` (JSON): text that did not come from Crystal (model text, tool
output, file names, MCP names and descriptions, job logs) may hold escape sequences a
terminal would obey, and both make them visible instead (core/textsafe.py). JSON stays
the exact same value.
"""

from __future__ import annotations

import sys
from typing import Any

from crystal_kernel.core.textsafe import terminal_json, terminal_safe


def say(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    """Print ``text`` with its control characters made visible (stderr with ``err``)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(terminal_safe(text) + end)
    stream.flush()


def say_json(value: Any, *, indent: int | None = None) -> None:
    """Print ``value`` as one JSON document that a terminal shows as it is."""
    sys.stdout.write(terminal_json(value, indent=indent) + "\n")
    sys.stdout.flush()
