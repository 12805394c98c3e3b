"""Workspace trust (TRUST-2): configuration that comes from the workspace and can run
programs or reach the network is used only after the person trusts that file.

Files that need trust (:func:`workspace_files`): ``<workspace>/.crystal/mcp.json`` and
every workspace exec tool set ``<workspace>/.crystal/tools/<dir>/tools.json``. Home
configuration is the person's own and always trusted; so is a workspace file that lies
inside Home (a workspace at ``~`` has ``~/.crystal`` as both).

What the person trusted is kept in ``{home}/trust.json`` (written atomically; unknown
keys survive), keyed by the file's resolved path, with a SHA-256 of what it runs: the
file for ``mcp.json``, the whole set folder for an exec set (so a changed script needs
trust again). A changed file is untrusted until trusted again. Only the person's own
commands write trust: ``crystal trust``, ``/trust`` and the kernel's Trust button;
no tool does (and ``{home}`` is outside every workspace, TRUST-3).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import atomic_write_json, read_json_object

TRUST_FILE = "trust.json"
Kind = Literal["mcp", "exec"]
# Bounds on hashing an exec set folder: beyond them, names and sizes stand in for content.
MAX_HASHED_FILES = 2000
MAX_HASHED_BYTES = 64 * 1024 * 1024
# Folders inside a set that are caches, not code a person reviews.
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".venv", ".mypy_cache", ".pytest_cache"})


@dataclass(frozen=True)
class WorkspaceFile:
    """One workspace configuration file and whether the person trusts it as it is now."""

    kind: Kind
    path: Path  # resolved
    digest: str
    trusted: bool
    # True when an earlier version was trusted and the file changed since.
    changed: bool = False

    @property
    def label(self) -> str:
        return "MCP servers" if self.kind == "mcp" else f"exec tool set '{self.path.parent.name}'"

    def note(self) -> str:
        """The one-line note a listing shows for an untrusted file."""
        what = ("its servers were not started and their tools are not offered" if self.kind == "mcp"
                else "its tools are not offered")
        why = "changed since you trusted it" if self.changed else "is not trusted yet"
        return (f"Workspace {self.label} configuration {self.path} {why}; {what}. Read it, then trust it with "
                f"`crystal trust {self.path}`, `/trust {self.path}` or the Trust button in the kernel.")


def trust_path(home: Path) -> Path:
    return Path(home) / TRUST_FILE


def file_digest(kind: Kind, path: Path) -> str:
    """SHA-256 of what the file makes Crystal run: the file itself (mcp.json), or every
    file of the exec set's folder (tools.json and the programs beside it)."""
    path = Path(path)
    if kind == "mcp":
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return ""
    return _folder_digest(path.parent)


def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    budget, count = MAX_HASHED_BYTES, 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, folder)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            count += 1
            if os.path.islink(full):
                digest.update(b"link:" + os.fsencode(os.readlink(full)) + b"\0")
            elif count <= MAX_HASHED_FILES and st.st_size <= budget:
                try:
                    with open(full, "rb") as handle:
                        digest.update(hashlib.sha256(handle.read()).digest())
                    budget -= st.st_size
                except OSError:
                    digest.update(b"unreadable\0")
            else:
                digest.update(f"size:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def needs_trust(home: Path, path: Path) -> bool:
    """False for a file in Home (the person's own configuration)."""
    real = Path(os.path.realpath(path))
    return not _inside(real, Path(os.path.realpath(home)))


def workspace_candidates(workspace: Path) -> list[tuple[Kind, Path]]:
    """Every workspace configuration file that exists and can execute: mcp.json, then
    the exec sets' tools.json in folder order."""
    crystal = paths.host_dir(workspace)
    out: list[tuple[Kind, Path]] = []
    mcp = crystal / "mcp.json"
    if mcp.is_file():
        out.append(("mcp", mcp))
    try:
        sets = sorted(p for p in (crystal / "tools").iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        sets = []
    out.extend(("exec", p / "tools.json") for p in sets if (p / "tools.json").is_file())
    return out


class TrustStore:
    """``{home}/trust.json``: what the person trusted."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.path = trust_path(self.home)

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": 1, "files": {}}
        data = read_json_object(self.path, "trust file")
        if not isinstance(data.get("files", {}), dict):
            raise UserError(f"Trust file {self.path} is corrupt: 'files' is not an object.")
        data.setdefault("files", {})
        return data

    def entry(self, path: Path) -> dict[str, Any] | None:
        try:
            files = self._read()["files"]
        except UserError:
            return None  # a corrupt trust file trusts nothing
        value = files.get(str(Path(os.path.realpath(path))))
        return value if isinstance(value, dict) else None

    def state(self, kind: Kind, path: Path) -> WorkspaceFile:
        """Whether ``path`` is trusted as it is now."""
        real = Path(os.path.realpath(path))
        digest = file_digest(kind, real)
        if not needs_trust(self.home, real):
            return WorkspaceFile(kind, real, digest, True)
        entry = self.entry(real)
        if entry is None:
            return WorkspaceFile(kind, real, digest, False)
        ok = bool(digest) and entry.get("sha256") == digest and entry.get("kind") == kind
        return WorkspaceFile(kind, real, digest, ok, changed=not ok)

    def trust(self, kind: Kind, path: Path) -> WorkspaceFile:
        """Record the person's trust in ``path`` as it is now (the person's command only)."""
        real = Path(os.path.realpath(path))
        digest = file_digest(kind, real)
        if not digest:
            raise UserError(f"Cannot read {real} to trust it.")
        data = self._read()
        data["files"][str(real)] = {"kind": kind, "sha256": digest,
                                    "trusted": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        atomic_write_json(self.path, data, inside=self.path.parent)
        return WorkspaceFile(kind, real, digest, True)

    def forget(self, path: Path) -> bool:
        data = self._read()
        removed = data["files"].pop(str(Path(os.path.realpath(path))), None) is not None
        if removed:
            atomic_write_json(self.path, data, inside=self.path.parent)
        return removed


def is_trusted(home: Path, kind: Kind, path: Path) -> WorkspaceFile:
    """The state of one workspace file (Home files are always trusted)."""
    return TrustStore(home).state(kind, path)


def workspace_states(home: Path, workspace: Path) -> list[WorkspaceFile]:
    """Every executable workspace configuration file with its trust state."""
    store = TrustStore(home)
    return [store.state(kind, path) for kind, path in workspace_candidates(workspace)
            if needs_trust(home, path)]


def trust_all(home: Path, workspace: Path) -> list[WorkspaceFile]:
    """Trust every workspace file that is not trusted as it is now (``/trust all``)."""
    store = TrustStore(home)
    return [store.trust(s.kind, s.path) for s in workspace_states(home, workspace) if not s.trusted]


def find_candidate(workspace: Path, name: str) -> tuple[Kind, Path]:
    """The workspace file a person named: the file, its set folder, or a path relative
    to the workspace. UserError when it is not one that needs trust."""
    given = Path(name).expanduser()
    options = [given] if given.is_absolute() else [Path(workspace) / given, Path.cwd() / given]
    candidates = {Path(os.path.realpath(p)): kind for kind, p in workspace_candidates(workspace)}
    for option in options:
        real = Path(os.path.realpath(option))
        for probe in (real, real / "tools.json", real / "mcp.json"):
            if probe in candidates:
                return candidates[probe], probe
    names = ", ".join(str(p) for p in candidates) or "none in this workspace"
    raise UserError(f"'{name}' is not a workspace configuration file that needs trust "
                    f"(.crystal/mcp.json or .crystal/tools/<dir>/tools.json; found: {names}).")


def describe(states: list[WorkspaceFile]) -> str:
    """A listing for `crystal trust list` and `/trust`."""
    if not states:
        return "No workspace configuration here needs trust (.crystal/mcp.json, .crystal/tools/<dir>/tools.json)."
    lines = []
    for s in states:
        mark = "trusted" if s.trusted else ("changed" if s.changed else "untrusted")
        lines.append(f"{mark:9}  {s.kind:4}  {s.path}{_servers(s)}")
    if any(not s.trusted for s in states):
        lines.append("Read a file, then trust it with `crystal trust FILE` or `/trust FILE` (`/trust all` for every one).")
    return "\n".join(lines)


def _servers(state: WorkspaceFile) -> str:
    """The server names of an mcp.json, read without expanding anything."""
    if state.kind != "mcp":
        return ""
    try:
        data = json.loads(state.path.read_text(encoding="utf-8-sig"))
        names = list((data.get("mcpServers") or {}).keys())
    except (OSError, ValueError, AttributeError):
        return ""
    return f"  (servers: {', '.join(map(str, names))})" if names else ""
