"""The grep tool: regex search through ripgrep, with a pure-Python fallback that gives the
same results (same files, same lines, same order)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from crystal_kernel.errors import ToolError
from crystal_kernel.host.access import is_credential_parts
from crystal_kernel.jobs.guarded import guarded_argv
from crystal_kernel.tools._files import display_path, looks_binary, read_head
from crystal_kernel.tools._notebook_search import grep_cells, notebook_files, read_sources
from crystal_kernel.tools._process import kill_process_tree
from crystal_kernel.tools._walk import RG_BASE_FLAGS, rg_binary, walk
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
# A match line of rg --null output: the path, NUL, the line number, ':'.
_MATCH_LINE = re.compile(rb"^([^\0\n]*)\0\d+:", re.MULTILINE)


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


async def grep_rg(rg: str, pattern: str, root: Path, *, ignore_case: bool, context: int,
                  glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> list[FileHits]:
    """Run ripgrep and collect hits per file. The output is read by a worker thread in
    large blocking reads (one wake-up per block, not per line rg writes)."""
    argv = [rg, *RG_BASE_FLAGS, "--null", "--line-number", "--with-filename", "--no-heading"]
    if ignore_case:
        argv.append("--ignore-case")
    if context:
        argv += ["--context", str(context)]
    argv += ["--regexp", pattern, "--", str(root)]
    try:
        # Under the job supervisor: rg dies with the host, however the host dies.
        proc = subprocess.Popen(guarded_argv(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise ToolError(f"Cannot run ripgrep: {exc.strerror or exc}.") from None
    timed_out = threading.Event()

    def time_up() -> None:
        timed_out.set()
        kill_process_tree(proc.pid)

    timer = threading.Timer(RG_TIMEOUT_SECONDS, time_up)
    timer.daemon = True
    timer.start()
    try:
        counts, kept, err, code = await asyncio.to_thread(_collect_rg, proc)
    except asyncio.CancelledError:
        # The reader thread ends once the killed rg closes its output.
        await asyncio.shield(asyncio.to_thread(kill_process_tree, proc.pid))
        raise
    finally:
        timer.cancel()
    if timed_out.is_set():
        # Killed by the time limit: whatever was found is partial, and nothing found does
        # not mean "no matches" (ROBUST-3).
        raise ToolError(f"The search took longer than {RG_TIMEOUT_SECONDS:g} s and was stopped before it "
                        "finished; no result is shown because it would be incomplete. Narrow the path, "
                        "the glob or the pattern.")
    if code == 2 and not counts:
        if "regex" in err.lower():
            raise ToolError("Invalid regular expression: " + " ".join(err.split())[:400])
        if err:
            raise ToolError("Search failed: " + err.splitlines()[0][:300])
    hits: list[FileHits] = []
    for name, matches in counts.items():
        path = os.fsdecode(name)
        if path_allowed(path, root, glob_re, prefix):
            hits.append(FileHits(path, matches, kept.get(name, [])))
    return hits


def _collect_rg(proc: subprocess.Popen) -> tuple[Counter, dict, str, int]:
    """Read rg's output to the end: match lines per file are counted for the whole
    output (in C, per block); only the first STORE_LINES lines are parsed and kept."""
    counts: Counter[bytes] = Counter()
    kept: dict[bytes, list[tuple[int, bool, str]]] = {}
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
        kept.setdefault(name, []).append((int(rest[:i]), rest[i : i + 1] == b":",
                                          text.decode("utf-8", errors="replace")))
        stored += 1

    def block(data: bytes) -> None:
        counts.update(_MATCH_LINE.findall(data))
        if stored < STORE_LINES:
            for raw in data.split(b"\n"):
                if stored >= STORE_LINES:
                    break
                keep(raw)

    assert proc.stdout is not None and proc.stderr is not None
    # Drain stderr alongside so rg never blocks on it.
    err_box: list[bytes] = []
    err_thread = threading.Thread(target=lambda: err_box.append(proc.stderr.read(8192)), daemon=True)
    err_thread.start()
    pending = b""
    while True:
        chunk = proc.stdout.read(READ_CHUNK)
        if not chunk:
            if pending:
                block(pending + b"\n")
            break
        data = pending + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            pending = data[:MAX_PENDING]
            continue
        pending = data[cut + 1 :][:MAX_PENDING]
        block(data[: cut + 1])
    code = proc.wait()
    err_thread.join(1.0)
    proc.stdout.close()
    proc.stderr.close()
    err = (err_box[0] if err_box else b"").decode("utf-8", errors="replace").strip()
    return counts, kept, err, code


def grep_python(pattern: str, root: Path, *, ignore_case: bool, context: int,
                glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> list[FileHits]:
    """The same search in pure Python (used when no rg binary is available)."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression: {exc}.") from None
    files = [root] if root.is_file() else (p for p, _, _ in walk(root))
    out: list[FileHits] = []
    stored = 0
    for path in files:
        if path != root and not path_allowed(path, root, glob_re, prefix):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data:
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        found = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
        if not found:
            continue
        entry = FileHits(str(path), matches=len(found))
        matched = set(found)
        wanted: set[int] = set()
        for i in found:
            wanted.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        for i in sorted(wanted):
            if stored >= STORE_LINES:
                break
            entry.lines.append((i + 1, i in matched, lines[i].rstrip("\r")))
            stored += 1
        out.append(entry)
    return out


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


def grep_notebooks(pattern: str, root: Path, *, ignore_case: bool, context: int,
                   glob_re: GlobMatcher | None, prefix: tuple[str, ...] = ()) -> list[FileHits]:
    """Hits in notebooks' cell sources (Python's regex dialect; a pattern only ripgrep
    understands finds nothing in notebooks)."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return []
    out: list[FileHits] = []
    budget = STORE_LINES
    for path in notebook_files(root):
        if path != root and not path_allowed(path, root, glob_re, prefix):
            continue
        sources = read_sources(path)
        if sources is None:
            continue
        total, kept = grep_cells(sources, regex, context, budget)
        if total:
            budget -= len(kept)
            out.append(FileHits(str(path), total, [(line, m, text) for _, line, m, text in kept],
                                cells=[cell for cell, _, _, _ in kept]))
    return out


class GrepTool(Tool):
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
        if root.is_file() and looks_binary(read_head(root)):
            raise ToolError(f"'{args.path}' is a binary file; grep searches text.")
        glob_re = compile_glob(args.glob)
        # TRUST-4: credential rules apply to paths in the allowed folder, not below root.
        prefix = ctx.access.credential_prefix(root) if root.is_dir() else ()
        rg = rg_binary()
        if rg:
            hits = await grep_rg(rg, args.pattern, root, ignore_case=args.ignore_case,
                                 context=args.context, glob_re=glob_re, prefix=prefix)
        else:
            hits = await asyncio.to_thread(grep_python, args.pattern, root, ignore_case=args.ignore_case,
                                           context=args.context, glob_re=glob_re, prefix=prefix)
        # Notebooks are searched by cell source instead of by their JSON text.
        hits = [h for h in hits if not h.path.lower().endswith(".ipynb")]
        hits += await asyncio.to_thread(grep_notebooks, args.pattern, root, ignore_case=args.ignore_case,
                                        context=args.context, glob_re=glob_re, prefix=prefix)
        if not hits:
            where = display_path(root, ctx.workspace)
            return ToolResult(ok=True, text=f"No matches for /{args.pattern}/ in {where}.")
        text, _ = format_hits(hits, ctx.workspace, MAX_MATCHES)
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
