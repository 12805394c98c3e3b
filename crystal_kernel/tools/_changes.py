"""The per-workspace change counter the search index compares against (see
:mod:`crystal_kernel.tools._index`).

Apart from the index so that the tools that change files (write, edit, bash,
notebook_edit) can count a change without loading the index's sqlite3 and inotify
modules: `crystal run` imports every tool before its first model request.
"""

from __future__ import annotations

import os
from pathlib import Path

_generation: dict[Path, int] = {}


def note_change(workspace: Path) -> None:
    """Called by tools that change files (write, edit, bash) so the next search refreshes."""
    key = Path(os.path.realpath(workspace))
    _generation[key] = _generation.get(key, 0) + 1


def generation(workspace: Path) -> int:
    """How many changes the tools have noted in ``workspace`` in this process."""
    return _generation.get(Path(os.path.realpath(workspace)), 0)
