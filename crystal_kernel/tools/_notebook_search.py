"""grep and search over notebooks: match cell sources, not the JSON that holds them (a
quote in a cell is ``\\"`` in the file; keys and base64 outputs would match noise), and
name the cell a hit is in."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from crystal_kernel.jobs.spawner import ToolProcess
from crystal_kernel.tools._notebook import MAX_NOTEBOOK_BYTES, cell_sources
from crystal_kernel.tools._walk import RG_BASE_FLAGS, hidden_path, rg_binary, walk

MAX_NOTEBOOKS = 5000


def notebook_files(root: Path) -> list[Path]:
    """The .ipynb files grep would search under ``root`` (same ignore rules)."""
    if root.is_file():
        return [root] if root.suffix.lower() == ".ipynb" else []
    rg = rg_binary()
    if rg:
        try:
            # A file type, not --iglob: a glob overrides the ignore files (a git-ignored
            # notebook would be searched); a type keeps them but lets hidden files through,
            # which are taken out as the walk leaves them out. Run in root: relative paths.
            # One thread (-j1): grep runs this beside its search, whose threads then keep
            # the cores; alone it takes the same time (~0.15 s of CPU on 50,000 files).
            out = subprocess.run([rg, *RG_BASE_FLAGS, "-j1", "--files", "--null", "--type-add",
                                  "nb:*.[iI][pP][yY][nN][bB]", "--type", "nb"],
                                 cwd=str(root), capture_output=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = b""
        names = (rel for rel in os.fsdecode(out).split("\0") if rel and not hidden_path(rel))
        return sorted(root / rel for rel in names)[:MAX_NOTEBOOKS]
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


# Cell text handed to one rg run: bounded memory, few processes.
BATCH_BYTES = 8 << 20
# A match line of rg's output for stdin with --max-columns 1: "NUMBER:" then at most a note.
_LINE_NUMBER = re.compile(rb"^(\d+):", re.MULTILINE)


def _matched_lines(proc: ToolProcess) -> set[int]:
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    proc.stderr.read()
    proc.wait()
    return {int(n) for n in _LINE_NUMBER.findall(out)}


async def _rg_lines(rg: str, pattern: str, lines: list[str], *, ignore_case: bool, timeout: float) -> set[int]:
    """The numbers (from 1) of ``lines`` that ripgrep's engine matches."""
    from crystal_kernel.tools._rg import run_rg

    argv = [rg, "--no-config", "--text", "--line-number", "--no-filename", "--color", "never",
            "--max-columns", "1"]  # only the numbers are needed: long lines become a short note
    if ignore_case:
        argv.append("--ignore-case")
    argv += ["--regexp", pattern, "-"]
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
    return await run_rg(argv, _matched_lines, data=data, timeout=timeout)


async def match_cells(rg: str, pattern: str, paths: list[Path], *, ignore_case: bool, context: int,
                      budget: int, timeout: float) -> list[tuple[Path, int, list[tuple[int, int, bool, str]]]]:
    """Matches in the cell sources of ``paths``: (path, match count, [(cell, line,
    is_match, text)]) per notebook with a match, at most ``budget`` lines kept in all;
    cells and lines count from 1. Lines are matched by ripgrep (linear time, rg's regex
    dialect, as for every other file), never by Python's backtracking ``re``."""
    out: list[tuple[Path, int, list[tuple[int, int, bool, str]]]] = []
    batch: list[tuple[Path, list[list[str]]]] = []
    size = 0

    async def flush() -> None:
        nonlocal budget
        lines = [line for _, cells in batch for cell in cells for line in cell]
        found = await _rg_lines(rg, pattern, lines, ignore_case=ignore_case, timeout=timeout) if lines else set()
        number = 0
        for path, cells in batch:
            total = 0
            kept: list[tuple[int, int, bool, str]] = []
            for cell_no, cell in enumerate(cells, start=1):
                hits = {i for i in range(len(cell)) if number + i + 1 in found}
                number += len(cell)
                if not hits:
                    continue
                total += len(hits)
                wanted: set[int] = set()
                for i in hits:
                    wanted.update(range(max(0, i - context), min(len(cell), i + context + 1)))
                for i in sorted(wanted):
                    if len(kept) < budget:
                        kept.append((cell_no, i + 1, i in hits, cell[i]))
            if total:
                budget -= len(kept)
                out.append((path, total, kept))
        batch.clear()

    for path in paths:
        sources = await asyncio.to_thread(read_sources, path)
        if sources is None:
            continue
        cells = [source.split("\n") for source in sources]
        batch.append((path, cells))
        size += sum(len(s) for s in sources)
        if size >= BATCH_BYTES:
            await flush()
            size = 0
    await flush()
    return out


def matching_cells(sources: list[str], words: Iterable[str]) -> list[int]:
    """Cells (from 1) whose source holds any of the query's words (search's hits)."""
    from crystal_kernel.tools._index import split_words

    wanted = set(words)
    return [n for n, source in enumerate(sources, start=1) if wanted & set(split_words(source))]


def notebook_body(data: bytes) -> str | None:
    """What the search index stores for a notebook: its cell sources, or None."""
    sources = cell_sources(data.decode("utf-8", errors="replace"))
    return None if sources is None else "\n\n".join(sources)
