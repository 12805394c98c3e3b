"""The grep tool: regex search through ripgrep, in files and in notebooks' cell sources.

There is no pure-Python fallback: the model's pattern is never given to Python's
backtracking ``re`` (ROBUST-3, tools/_rg.py). Without ``rg`` the tool fails with one line."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from crystal_kernel.core.access import CredentialCheck, is_credential_parts
from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.spawner import ToolProcess
from crystal_kernel.tools._files import display_path, looks_binary, read_head
from crystal_kernel.tools._notebook_search import MAX_NOTEBOOKS, match_cells, notebook_files
from crystal_kernel.tools._rg import require_rg, run_rg
from crystal_kernel.tools._walk import RG_BASE_FLAGS, hidden_path
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output
from crystal_kernel.tools.globmatch import GlobMatcher, compile_glob_matcher

MAX_MATCHES = 100
MAX_LINE_CHARS = 500
# Lines kept in memory for sorting; past this only counts are kept.
STORE_LINES = 5000
RG_TIMEOUT_SECONDS = 60.0
READ_CHUNK = 1 << 20
# A line longer than this is cut while reading (only its start is ever shown).
MAX_PENDING = 1 << 20
# rg's threads write each file's lines in one write of their own: read as they came, a
# search with matches in 18,000 files took ~5,000 reads (~150 ms of the tool's CPU; 65 ms
# with this wait, wall time no worse, at load 17-22). After a read this small the reader
# waits this long, so the writes pile up in the pipe (made ``PIPE_BYTES`` large) and one
# read takes many; the end is seen at most one wait late. A 2 ms wait made the search
# itself slower (wall 1.5 -> 3 s), measured, not taken.
SMALL_READ = 1 << 15
BATCH_WAIT = 0.0005
PIPE_BYTES = 1 << 20
# The notebooks are found by the search's own walk (a second rg walk to list them cost the
# few-matches search ~30% more CPU on 50,000 files, docs/benchmarks.md): the search also
# matches this key, which every notebook holds (tools/_notebook.cell_sources reads a
# notebook's "cells"; json and nbformat write it as ``"cells": [`` or ``"cells":[``), so
# every .ipynb file is in the listing. A line of another file can match it too: such a
# file is searched again, alone, by the pattern only (its lines and totals are replaced).
NOTEBOOK_KEY = '"cells":'
# Lines that may hold a match of NOTEBOOK_KEY, as rg matches it with --ignore-case (a
# superset: rg folds "s" with "ſ" too). Our own fixed pattern, not the model's.
_KEY_LINE = re.compile(rb'"cell(?:s|\xc5\xbf)":', re.IGNORECASE)
# Paths per rg run when suspect files are searched again (argv stays far below ARG_MAX).
RESEARCH_BATCH = 500


class GrepInput(ToolInput):
    pattern: str = Field(description="A regular expression.")
    path: str | None = Field(default=None, description="A folder or file (default: the workspace).")
    glob: str | None = Field(
        default=None,
        description="Only files matching this glob: '*.py' at any depth, 'src/**/*.ts' relative to path.",
    )
    ignore_case: bool = Field(default=False, description="Case-insensitive.")
    context: int = Field(default=0, ge=0, le=20, description="Lines shown before and after each match.")


@dataclass
class FileHits:
    path: str
    matches: int = 0
    lines: list[tuple[int, bool, str]] = field(default_factory=list)
    # Notebooks: the cell (from 1) of each entry of ``lines``, whose numbers count in the cell.
    cells: list[int] | None = None


def compile_glob(glob: str | None) -> GlobMatcher | None:
    """A file filter: a glob without '/' matches file names at any depth, one with '/'
    matches the path relative to the search folder. Matching is linear in the name's
    length (tools/globmatch.py), whatever pattern the model chose."""
    if not glob:
        return None
    anchored = "/" in glob.rstrip("/")
    try:
        return compile_glob_matcher(glob.lstrip("/"), anchored=anchored, braces=True)
    except ValueError as exc:
        raise ToolError(f"The glob '{glob[:200]}' is too complex: {exc}.") from None


def path_allowed(path: str | Path, root: Path, glob_re: GlobMatcher | None,
                 prefix: tuple[str, ...] = ()) -> bool:
    """Not a credential file, and matching the glob (relative to ``root``) when given.

    ``prefix``: ``root``'s components below the allowed folder that holds it
    (:meth:`AccessRules.credential_prefix`); the credential rules apply to the file's
    path in that folder, not below the search root (``grep`` in ``.git`` finds no
    ``.git/config``)."""
    text, base = str(path), str(root)
    if text.startswith(base + os.sep):
        rel = text[len(base) + 1 :]
    else:
        rel = os.path.basename(text)
    if is_credential_parts(prefix + tuple(rel.split(os.sep))):
        return False
    return glob_re is None or bool(glob_re.match(rel.replace(os.sep, "/")))


@dataclass
class Listing:
    """One rg run's findings: the files with matches (notebooks left out) and the
    notebooks it walked past (a notebook is searched by its cells, :func:`grep_notebooks`)."""

    hits: list[FileHits]
    notebooks: list[Path]


async def grep_rg(rg: str, pattern: str, root: Path, *, ignore_case: bool, context: int,
                  glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> list[FileHits]:
    """Run ripgrep and collect hits per file (every file, notebooks by their JSON text)."""
    listing = await _search(rg, pattern, root, ignore_case=ignore_case, context=context, glob_re=glob_re,
                            prefix=prefix, notebooks=False)
    return listing.hits


async def grep_tree(rg: str, pattern: str, root: Path, *, ignore_case: bool, context: int,
                    glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> Listing:
    """Hits in every file but notebooks, and the notebooks below ``root``, from one walk
    (:data:`NOTEBOOK_KEY`)."""
    return await _search(rg, pattern, root, ignore_case=ignore_case, context=context, glob_re=glob_re,
                         prefix=prefix, notebooks=True)


async def _search(rg: str, pattern: str, root: Path, *, ignore_case: bool, context: int,
                  glob_re: GlobMatcher | None, prefix: tuple[str, ...], notebooks: bool) -> Listing:
    """One pass: the first STORE_LINES lines of the listing (what can be shown) are parsed
    and kept, and past them each line only counts for its file (a partition and a
    Counter update, at C speed), so the totals come from the same run. A second
    ``rg --count`` run for the totals searched the tree twice (2.2x rg's time on a
    50,000-file tree); reading every line with the full parse took 4x."""
    base = [rg, *RG_BASE_FLAGS, "--null", "--with-filename"]
    if ignore_case:
        base.append("--ignore-case")
    lines = [*base, "--line-number", "--no-heading", *(["--context", str(context)] if context else [])]
    key = ["--regexp", NOTEBOOK_KEY] if notebooks else []
    argv = [*lines, "--regexp", pattern, *key, "--", str(root)]
    kept, counts, suspects, err, code = await run_rg(
        argv, lambda proc: _collect_lines(proc, context > 0, notebooks), timeout=RG_TIMEOUT_SECONDS)
    if code == 2 and not counts:
        if notebooks and "regex" in err.lower():
            # The message names the pattern as rg joined it with the key: say it of the pattern alone.
            await _search(rg, pattern, root, ignore_case=ignore_case, context=context, glob_re=glob_re,
                          prefix=prefix, notebooks=False)
        if "regex" in err.lower():
            raise ToolError("Invalid regular expression: " + " ".join(err.split())[:400])
        if err:
            raise ToolError("Search failed: " + err.splitlines()[0][:300])
    found = [name for name in counts if _is_notebook(name)]
    # Files whose lines may match the key and not the pattern: searched again by the pattern alone.
    again = sorted(name for name in suspects if not _is_notebook(name))
    for start in range(0, len(again), RESEARCH_BATCH):
        batch = again[start : start + RESEARCH_BATCH]
        for name in batch:
            kept.pop(name, None)
            counts.pop(name, None)
        more_kept, more_counts, _, _, _ = await run_rg(
            [*lines, "--regexp", pattern, "--", *(os.fsdecode(name) for name in batch)],
            lambda proc: _collect_lines(proc, context > 0, False), timeout=RG_TIMEOUT_SECONDS)
        kept.update(more_kept)
        counts.update(more_counts)
    names = [name for name in counts if not (notebooks and _is_notebook(name))]
    # One decode for every name (a NUL never falls inside a UTF-8 sequence).
    paths = os.fsdecode(b"\0".join(names)).split("\0") if names else []
    allowed = _allowed_paths(root, glob_re, prefix, paths)
    hits = [FileHits(path, counts[name], kept.get(name, [])) for name, path in zip(names, paths, strict=True)
            if path in allowed]
    return Listing(hits, _notebook_paths(root, found))


def _is_notebook(name: bytes) -> bool:
    return name[-6:].lower() == b".ipynb"


def _notebook_paths(root: Path, names: list[bytes]) -> list[Path]:
    """The notebooks :func:`notebook_files` lists: not below a hidden folder of ``root``
    (rg's search skips those anyway), sorted, at most MAX_NOTEBOOKS."""
    base = str(root) + os.sep
    paths = [os.fsdecode(name) for name in names]
    kept = (p for p in paths if not hidden_path(p[len(base):] if p.startswith(base) else os.path.basename(p)))
    return sorted(Path(p) for p in kept)[:MAX_NOTEBOOKS]


def _allowed_paths(root: Path, glob_re: GlobMatcher | None, prefix: tuple[str, ...], paths: list[str]) -> set[str]:
    """:func:`path_allowed` for the many paths of one rg listing below ``root``, at once:
    each folder's credential verdict is worked out once and most names pass three string
    tests (core/access.CredentialCheck.keep); 18,000 files with matches cost ~60 ms
    one by one."""
    base = str(root) + os.sep
    rels = {(path[len(base):] if path.startswith(base) else os.path.basename(path)).replace(os.sep, "/"): path
            for path in paths}
    kept = CredentialCheck(prefix).keep(rels)
    if glob_re is not None:
        kept = [rel for rel in kept if glob_re.match(rel)]
    return {rels[rel] for rel in kept}


def _drain_stderr(proc: ToolProcess) -> tuple[threading.Thread, list[bytes]]:
    # Read stderr alongside so rg never blocks on it.
    box: list[bytes] = []
    stderr = proc.stderr
    assert stderr is not None
    thread = threading.Thread(target=lambda: box.append(stderr.read(8192)), daemon=True)
    thread.start()
    return thread, box


def _finish(proc: ToolProcess, thread: threading.Thread, box: list[bytes]) -> tuple[str, int]:
    code = proc.wait()
    thread.join(1.0)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    return (box[0] if box else b"").decode("utf-8", errors="replace").strip(), code


def _collect_lines(proc: ToolProcess, with_context: bool, with_key: bool = False) -> tuple[
        dict[bytes, list[tuple[int, bool, str]]], Counter[bytes], set[bytes], str, int]:
    """The first STORE_LINES lines of rg's listing per file, every file's number of
    match lines (context lines and ``--`` separators do not count) and, ``with_key``,
    the files with a line that may match :data:`NOTEBOOK_KEY` (notebooks' lines are
    counted, not kept: they are searched by their cells)."""
    kept: dict[bytes, list[tuple[int, bool, str]]] = {}
    counts: Counter[bytes] = Counter()
    suspects: set[bytes] = set()
    stored = 0

    def keep(raw: bytes) -> None:
        nonlocal stored
        name, sep, rest = raw.partition(b"\0")
        if not sep:
            return  # the "--" group separator
        i = 0
        while i < len(rest) and 48 <= rest[i] <= 57:
            i += 1
        if i == 0:
            return
        text = rest[i + 1 :].rstrip(b"\r")
        if len(text) > 4 * MAX_LINE_CHARS:
            text = text[: 4 * MAX_LINE_CHARS]
        is_match = rest[i : i + 1] == b":"
        if with_key and _is_notebook(name):
            counts[name] += is_match
            return
        kept.setdefault(name, []).append((int(rest[:i]), is_match, text.decode("utf-8", errors="replace")))
        counts[name] += is_match
        stored += 1

    def count(lines: list[bytes]) -> None:
        # Past what is kept: only the file name of each match line matters.
        if with_context:
            for raw in lines:
                name, sep, rest = raw.partition(b"\0")
                if sep and rest[:1].isdigit() and rest.lstrip(_DIGITS)[:1] == b":":
                    counts[name] += 1
        else:  # every line with a file name is a match line
            counts.update([name for name, sep, _ in (raw.partition(b"\0") for raw in lines) if sep])

    def block(data: bytes) -> None:
        nonlocal stored
        lines = data.split(b"\n")
        if data.endswith(b"\n"):
            lines.pop()
        if with_key and _KEY_LINE.search(data):  # one C-speed scan of the block; rare
            suspects.update(raw.partition(b"\0")[0] for raw in lines if _KEY_LINE.search(raw))
        k = 0
        while stored < STORE_LINES and k < len(lines):
            keep(lines[k])
            k += 1
        if k < len(lines):
            count(lines[k:] if k else lines)

    thread, box = _drain_stderr(proc)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    try:
        fcntl.fcntl(out, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass  # a smaller pipe only means rg waits for the reader sooner
    pending = b""
    while True:
        chunk = os.read(out, READ_CHUNK)
        if not chunk:
            if pending:
                block(pending + b"\n")
            break
        if len(chunk) < SMALL_READ:
            time.sleep(BATCH_WAIT)
        data = pending + chunk
        cut = data.rfind(b"\n")
        rest = data[cut + 1 :]
        if with_key and len(rest) > MAX_PENDING and _KEY_LINE.search(rest, MAX_PENDING - 16):
            # The end of a long line is dropped: its file's lines are checked again.
            suspects.add(rest.partition(b"\0")[0])
        pending = rest[:MAX_PENDING]
        if cut >= 0:
            block(data[: cut + 1])
    err, code = _finish(proc, thread, box)
    return kept, +counts, suspects, err, code


_DIGITS = b"0123456789"


def format_hits(hits: list[FileHits], workspace: Path, limit: int) -> tuple[str, int]:
    """Files sorted by path, at most ``limit`` match lines shown; returns text and matches."""
    hits = sorted(hits, key=lambda h: h.path)
    total = sum(h.matches for h in hits)
    blocks: list[str] = []
    shown = 0
    left_files = 0
    for entry in hits:
        if shown >= limit or not entry.lines:
            left_files += 1
            continue
        lines: list[str] = [display_path(Path(entry.path), workspace) + ":"]
        previous = None
        here = 0
        for k, (number, is_match, text) in enumerate(entry.lines):
            if is_match and shown >= limit:
                break
            where = (entry.cells[k], number) if entry.cells else (0, number)
            if previous is not None and where != (previous[0], previous[1] + 1):
                lines.append("--")
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + " [... line cut]"
            mark = ":" if is_match else "-"
            if entry.cells:
                lines.append(f"cell {where[0]} line {number}{mark} {text}")
            else:
                lines.append(f"{number}{mark}{text}")
            previous = where
            shown += is_match
            here += is_match
        left_files += here < entry.matches
        blocks.append("\n".join(lines))
    text = "\n\n".join(blocks)
    if shown < total:
        text += (
            f"\n\n[{total} matches in {len(hits)} files; {total - shown} more matches"
            f" (in {left_files} files) are not shown. Narrow the pattern, path or glob.]"
        )
    return text, total


async def grep_notebooks(rg: str, pattern: str, root: Path, notebooks: list[Path], *, ignore_case: bool,
                         context: int, glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> list[FileHits]:
    """Hits in the cell sources of ``notebooks`` (:func:`notebook_files` of ``root``),
    matched by ripgrep like every other file."""
    paths = [p for p in notebooks if p == root or path_allowed(p, root, glob_re, prefix)]
    found = await match_cells(rg, pattern, paths, ignore_case=ignore_case, context=context,
                              budget=STORE_LINES, timeout=RG_TIMEOUT_SECONDS)
    return [FileHits(str(path), total, [(line, m, text) for _, line, m, text in kept],
                     cells=[cell for cell, _, _, _ in kept]) for path, total, kept in found]


class GrepTool(Tool[GrepInput]):
    name = "grep"
    Input = GrepInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: GrepInput, ctx: ToolContext) -> ToolResult:
        if "\x00" in args.pattern or "\x00" in (args.glob or ""):  # rg's argv cannot carry it
            raise ToolError("The pattern or glob contains a NUL character; remove it.")
        root = ctx.access.resolve(args.path or ".")
        if not root.exists():
            raise ToolError(f"'{args.path}' does not exist.")
        # Off the loop (ROBUST-3): the file system may not answer.
        if root.is_file() and looks_binary(await asyncio.to_thread(read_head, root)):
            raise ToolError(f"'{args.path}' is a binary file; grep searches text.")
        glob_re = compile_glob(args.glob)
        # TRUST-4: credential rules apply to paths in the allowed folder, not below root.
        prefix = ctx.access.credential_prefix(root) if root.is_dir() else ()
        rg = require_rg()
        pattern, case, context = args.pattern, args.ignore_case, args.context
        if root.is_dir():
            # One walk finds the matches and the notebooks (NOTEBOOK_KEY).
            listing = await grep_tree(rg, pattern, root, ignore_case=case, context=context, glob_re=glob_re,
                                      prefix=prefix)
        else:  # one file; a notebook is searched by its cells, not by its JSON text
            notebooks = notebook_files(root)
            listing = Listing([] if notebooks else await grep_rg(rg, pattern, root, ignore_case=case, context=context,
                                                                 glob_re=glob_re, prefix=prefix), notebooks)
        hits = listing.hits + await grep_notebooks(rg, pattern, root, listing.notebooks, ignore_case=case,
                                                   context=context, glob_re=glob_re, prefix=prefix)
        if not hits:
            where = display_path(root, ctx.workspace)
            return ToolResult(ok=True, text=f"No matches for /{args.pattern}/ in {where}.")
        text, _ = format_hits(hits, ctx.workspace, MAX_MATCHES)
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
