"""Gitignore-aware file walking, shared by grep, glob, tree and search.

The rules mirror what ripgrep does with the flags in :data:`RG_BASE_FLAGS`, so the
``rg`` binary and the pure-Python fallback list the same files: hidden entries (names
starting with a dot) are skipped unless named as the starting folder, symbolic links are
not followed, and ``.gitignore``, ``.ignore`` and ``.rgignore`` files apply in the
folder that holds them, below it, and from every parent folder of the starting point
(whether or not the folder is a git repository). Global git excludes are not read.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from crystal_kernel.tools.globmatch import GlobMatcher, compile_glob_matcher

IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
RG_BASE_FLAGS = (
    "--no-config", "--no-require-git", "--no-ignore-global", "--no-ignore-exclude", "--color", "never",
)


@lru_cache(maxsize=1)
def rg_binary() -> str | None:
    """The ripgrep binary shipped by the ``ripgrep`` package (next to the interpreter), or
    one on PATH."""
    here = shutil.which("rg", path=str(Path(sys.executable).parent))
    return here or shutil.which("rg")


def hidden_path(rel: str) -> bool:
    """A relative path with a hidden component (a name starting with a dot)."""
    return rel.startswith(".") or "/." in rel


# A name suffix rg can take in a glob as it is: no character that means more in a glob,
# and no NUL, which no argv can carry (such a suffix matches no name: the listing is untyped).
_PLAIN_SUFFIX = re.compile(r"[^*?\[\]{}\\!,:/\x00]+")


@dataclass(frozen=True)
class IgnoreRule:
    regex: GlobMatcher
    negate: bool
    dir_only: bool


def parse_ignore(text: str) -> list[IgnoreRule]:
    """The rules of one gitignore-format file."""
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        # Trailing spaces are dropped unless escaped.
        stripped = line.rstrip(" ")
        if stripped.endswith("\\") and len(stripped) < len(line):
            stripped += " "
        line = stripped
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        elif line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        # A workspace's ignore file is untrusted too: linear matching (globmatch.py).
        rules.append(IgnoreRule(compile_glob_matcher(line, anchored=anchored), negate, dir_only))
    return rules


@dataclass(frozen=True)
class IgnoreFile:
    base: Path
    rules: tuple[IgnoreRule, ...]


def _read_ignores(folder: Path) -> list[IgnoreFile]:
    found = []
    for name in IGNORE_FILES:
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        rules = parse_ignore(text)
        if rules:
            found.append(IgnoreFile(folder, tuple(rules)))
    return found


def is_ignored(path: Path, is_dir: bool, stack: list[IgnoreFile]) -> bool:
    """Last matching rule wins; deeper ignore files come later in ``stack``."""
    for ignore in reversed(stack):
        try:
            rel = path.relative_to(ignore.base).as_posix()
        except ValueError:
            continue
        for rule in reversed(ignore.rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(rel):
                return not rule.negate
    return False


def initial_stack(root: Path) -> list[IgnoreFile]:
    """Ignore files of every parent of ``root`` (outermost first) and of ``root``."""
    stack: list[IgnoreFile] = []
    for folder in reversed([root, *root.parents]):
        stack.extend(_read_ignores(folder))
    return stack


def walk(root: Path, *, max_depth: int | None = None, files_only: bool = True) -> Iterator[tuple[Path, bool, int]]:
    """Yield ``(path, is_dir, depth)`` below ``root`` in sorted depth-first order, skipping
    hidden, ignored and symlinked entries. ``depth`` is 1 for root's own entries."""
    yield from _walk(root, initial_stack(root), 1, max_depth, files_only)


def _walk(folder: Path, stack: list[IgnoreFile], depth: int, max_depth: int | None,
          files_only: bool) -> Iterator[tuple[Path, bool, int]]:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if not is_dir and not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        path = Path(entry.path)
        if is_ignored(path, is_dir, stack):
            continue
        if is_dir:
            if not files_only:
                yield path, True, depth
            if max_depth is None or depth < max_depth:
                yield from _walk(path, stack + _read_ignores(path), depth + 1, max_depth, files_only)
        else:
            yield path, False, depth


class FileListing:
    """Every file below ``root`` that the walking rules keep, as POSIX paths relative to
    ``root`` (plain strings: a 50,000-file listing makes no ``Path`` objects), unordered.

    :meth:`batches` yields them as ``rg --files`` prints them, so a caller's work on one
    batch overlaps rg's walk of the rest; it blocks (run it in a worker thread), and
    :meth:`stop` (from any thread, e.g. a cancelled caller) kills rg so it ends at once."""

    def __init__(self, root: Path, *, use_rg: bool = True, name_suffix: str = "") -> None:
        self.root = root
        self.rg = rg_binary() if use_rg else None
        # Only names ending so are wanted: rg filters them with a file type, which (unlike
        # its --glob) never overrides the ignore files. A hint: the Python walk lists all.
        self.name_suffix = name_suffix
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    def batches(self) -> Iterator[list[str]]:
        if self.rg is None:
            prefix = len(str(self.root)) + 1
            yield [str(p)[prefix:].replace(os.sep, "/") for p, _, _ in walk(self.root)]
            return
        # Run in ``root`` with no path argument: rg prints paths relative to it, unprefixed.
        argv = [self.rg, *RG_BASE_FLAGS, "--files", "--null"]
        # A file type lets rg's hidden files through (not its ignore files): they are
        # taken out below, as the listing without a type leaves them out.
        typed = _PLAIN_SUFFIX.fullmatch(self.name_suffix) is not None
        if typed:
            argv += ["--type-add", f"crystalsuffix:*{self.name_suffix}", "--type", "crystalsuffix"]
        proc = self._proc = subprocess.Popen(
            argv, cwd=str(self.root), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        if self._stopped:
            self.stop()
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        pending = b""
        try:
            while chunk := os.read(out, 1 << 16):
                data = pending + chunk
                cut = data.rfind(b"\0")
                if cut < 0:
                    pending = data
                    continue
                pending = data[cut + 1 :]
                # A NUL never falls inside a UTF-8 sequence: each batch decodes on its own.
                batch = os.fsdecode(data[:cut]).split("\0")
                yield [rel for rel in batch if not hidden_path(rel)] if typed else batch
            if pending:
                rel = os.fsdecode(pending)
                if not (typed and hidden_path(rel)):
                    yield [rel]
        finally:
            self.stop()
            proc.stdout.close()
            proc.wait()

    def stop(self) -> None:
        self._stopped = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

