"""grep and search over notebooks: match cell sources, not the JSON that holds them (a
quote in a cell is ``\\"`` in the file; keys and base64 outputs would match noise), and
name the cell a hit is in."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from crystal_kernel.tools._notebook import MAX_NOTEBOOK_BYTES, cell_sources
from crystal_kernel.tools._walk import RG_BASE_FLAGS, rg_binary, walk

MAX_NOTEBOOKS = 5000


def notebook_files(root: Path) -> list[Path]:
    """The .ipynb files grep would search under ``root`` (same ignore rules)."""
    if root.is_file():
        return [root] if root.suffix.lower() == ".ipynb" else []
    rg = rg_binary()
    if rg:
        try:
            out = subprocess.run([rg, *RG_BASE_FLAGS, "--files", "--null", "--iglob", "*.ipynb", "--", str(root)],
                                 capture_output=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = b""
        return sorted(Path(os.fsdecode(p)) for p in out.split(b"\0") if p)[:MAX_NOTEBOOKS]
    found = (p for p, _, _ in walk(root) if p.suffix.lower() == ".ipynb")
    return [p for _, p in zip(range(MAX_NOTEBOOKS), found)]


def read_sources(path: Path) -> list[str] | None:
    """Cell sources of a notebook file, or None (not a notebook, too large, unreadable)."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        return cell_sources(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def grep_cells(sources: list[str], regex: re.Pattern[str], context: int, budget: int
               ) -> tuple[int, list[tuple[int, int, bool, str]]]:
    """Matches in cell sources: (match count, [(cell, line, is_match, text)]) with at
    most ``budget`` lines kept; cells and lines count from 1."""
    total = 0
    kept: list[tuple[int, int, bool, str]] = []
    for cell_no, source in enumerate(sources, start=1):
        lines = source.split("\n")
        found = [i for i, line in enumerate(lines) if regex.search(line)]
        if not found:
            continue
        total += len(found)
        wanted: set[int] = set()
        for i in found:
            wanted.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        for i in sorted(wanted):
            if len(kept) < budget:
                kept.append((cell_no, i + 1, i in found, lines[i]))
    return total, kept


def matching_cells(sources: list[str], words: Iterable[str]) -> list[int]:
    """Cells (from 1) whose source holds any of the query's words (search's hits)."""
    from crystal_kernel.tools._index import split_words

    wanted = set(words)
    return [n for n, source in enumerate(sources, start=1) if wanted & set(split_words(source))]


def notebook_body(data: bytes) -> str | None:
    """What the search index stores for a notebook: its cell sources, or None."""
    sources = cell_sources(data.decode("utf-8", errors="replace"))
    return None if sources is None else "\n\n".join(sources)
