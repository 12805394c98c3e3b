"""``prompt.json`` manifests of prompt sets and attachments (PS-4, PA-3, PA-5).

A manifest is read raw so every write keeps unknown fields; a missing, unreadable or
invalid one makes its folder skipped with an English note, and is never written.
Writes are atomic and happen only when a value really changes. Commands that read
several manifests and then write some (enable a set and disable the others, renumber
attachments) run under :func:`manifest_lock`, so two processes doing it at once (two
kernels, a kernel and the CLI) end with consistent manifests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crystal_kernel.core.access import project_file_problem
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import atomic_write_json
from crystal_kernel.prompts.names import MAX_DESCRIPTION, MAX_TITLE, SUFFIXES, folder_name_problem

MANIFEST = "prompt.json"
# In each sets/attachments root; discovery skips dot names.
LOCK_FILE = ".lock"
# Bound what one prompt or attachment file may add to every request.
MAX_PROMPT_CHARS = 200_000


@dataclass
class Folder:
    """One discovered set or attachment folder with its (valid) manifest."""

    name: str
    path: Path
    source: str                     # "home" or "workspace"
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def enabled(self) -> bool:
        return self.data.get("enabled") is True

    @property
    def order(self) -> int | None:
        value = self.data.get("order")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def title(self) -> str:
        return self.data.get("name") or self.name

    @property
    def description(self) -> str:
        return self.data.get("description") or ""

    def file_for(self, prompt_name: str) -> Path | None:
        """``<prompt_name>.md`` (or ``.txt``) in this folder, when it exists."""
        return find_prompt_file(self.path, prompt_name)

    def update(self, **changes: Any) -> bool:
        """Write the changed values into prompt.json (unknown fields kept); False when
        nothing changed and nothing was written."""
        if all(self.data.get(k, _ABSENT) == v for k, v in changes.items()):
            return False
        # Re-read so a field someone added since discovery survives too.
        current, reason = read_manifest(self.path)
        if current is None:  # it went bad since discovery: leave it exactly as it is
            raise UserError(f"{self.manifest_path} was left unchanged: {reason}.")
        current.update(changes)
        try:
            atomic_write_json(self.manifest_path, current)
        except OSError as exc:  # a full or read-only disk: the old file is still whole
            raise UserError(f"Cannot write {self.manifest_path}: {exc.strerror or exc}; it was left unchanged.") from None
        self.data = current
        return True


    def refresh(self) -> None:
        """Re-read prompt.json (under the lock: another process may have changed it);
        a manifest gone bad keeps the data seen at discovery (update() refuses it)."""
        current, _ = read_manifest(self.path)
        if current is not None:
            self.data = current


_ABSENT = object()


@contextmanager
def manifest_lock(*roots: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<root>/.lock`` for each existing root (in a
    fixed order, so two holders never wait on each other). Roots that do not exist
    are skipped (commands never create folders), and so is a root where the lock file
    cannot be created (a read-only folder: the write itself then fails clearly)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield
        return
    held: list[int] = []
    try:
        for root in sorted({Path(os.path.realpath(r)) for r in roots if Path(r).is_dir()}):
            try:
                fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # closing releases the lock


def find_prompt_file(folder: Path, prompt_name: str) -> Path | None:
    for suffix in SUFFIXES:
        candidate = folder / f"{prompt_name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def read_prompt_file(path: Path | None, notes: list[str], *, inside: Path | None = None) -> str | None:
    """A prompt or attachment file's text, verbatim (a UTF-8 BOM dropped); None when
    missing, empty (whitespace only) or unreadable (with a note). Capped at
    :data:`MAX_PROMPT_CHARS` with a note. ``inside``: the workspace a workspace file
    must really lie in (a link leading out, or a credential file, is not read: TRUST-4,
    core/access.project_file_problem)."""
    if path is None:
        return None
    if inside is not None:
        problem = project_file_problem(path, inside)
        if problem:
            notes.append(f"Skipped the prompt file {path}: {problem}.")
            return None
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read(MAX_PROMPT_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        notes.append(f"Skipped the prompt file {path}: it cannot be read ({exc}).")
        return None
    if len(text) > MAX_PROMPT_CHARS:
        notes.append(f"The prompt file {path} is longer than {MAX_PROMPT_CHARS} characters; the rest was cut.")
        text = text[:MAX_PROMPT_CHARS]
    return text if text.strip() else None


def read_manifest(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(data, None)`` for a valid manifest, else ``(None, reason)``."""
    path = folder / MANIFEST
    if not path.is_file():
        return None, f"it has no {MANIFEST}"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"its {MANIFEST} cannot be read ({exc})"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"its {MANIFEST} is not valid JSON (line {exc.lineno}: {exc.msg})"
    if not isinstance(data, dict):
        return None, f"its {MANIFEST} is not a JSON object"
    problem = manifest_problem(data)
    if problem:
        return None, f"its {MANIFEST} is invalid: {problem}"
    return data, None


def manifest_problem(data: dict[str, Any]) -> str | None:
    """PS-4 / PA-5 field rules, as one English reason, or None."""
    title = data.get("name")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE):
        return f"'name' must be text of at most {MAX_TITLE} characters"
    description = data.get("description")
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
        return f"'description' must be text of at most {MAX_DESCRIPTION} characters"
    if "enabled" in data and not isinstance(data["enabled"], bool):
        return "'enabled' must be true or false"
    order = data.get("order")
    if order is not None and (isinstance(order, bool) or not isinstance(order, int)):
        return "'order' must be a whole number"
    return None


def discover(root: Path, source: str, kind: str, notes: list[str],
             reserved: tuple[str, ...] = ()) -> dict[str, Folder]:
    """Every valid folder directly under ``root``, by name; skipped ones add a note.
    ``kind`` names the feature in notes ("prompt set", "prompt attachment")."""
    found: dict[str, Folder] = {}
    try:
        entries = sorted(root.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return found
    except OSError as exc:
        notes.append(f"Cannot read the {kind} folder {root}: {exc.strerror or exc}.")
        return found
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        name = entry.name
        if folder_name_problem(name):
            notes.append(f"Skipped the {kind} folder {entry}: its name is not 1–64 lowercase "
                         "letters, digits and single hyphens.")
            continue
        if name in reserved:
            notes.append(f"Skipped the {kind} folder {entry}: '{name}' is reserved for the built-in prompts.")
            continue
        data, reason = read_manifest(entry)
        if data is None:
            notes.append(f"Skipped the {kind} '{name}' ({entry}): {reason}.")
            continue
        found[name] = Folder(name=name, path=entry, source=source, data=data)
    return found
