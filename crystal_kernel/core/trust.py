"""Workspace trust (TRUST-2, TRUST-5): what the host reads from a workspace's
``.crystal/`` that can run code or steer a decision is used only once the person has
trusted that exact content.

Files that need trust (:func:`workspace_candidates`):

- ``mcp`` ``<workspace>/.crystal/mcp.json`` (its servers run);
- ``exec`` every workspace exec tool set ``.crystal/tools/<dir>/tools.json``, hashed
  as its whole closure (core/trust_digest.py: every file, links resolved, no folder
  skipped; a link leading outside the set is refused);
- ``prompt`` every workspace text the reviewer reads: ``.crystal/prompts/review.md``,
  ``review.user.md`` and each attachment's ``review.md`` (``.txt`` too);
- ``cassette`` every ``.crystal/cassettes/*.json``: its recorded person answers stand
  in for the person only when trusted (host/recorded_person.py).

Home configuration is the person's own and always trusted; so is a workspace file that
lies inside Home (a workspace at ``~`` has ``~/.crystal`` as both).

What the person trusted is kept in ``{home}/trust.json`` (written atomically; unknown
keys survive), keyed by the file's resolved path, with a SHA-256 of its content. A
changed file is untrusted until trusted again. Only the person's own commands write
trust: ``crystal trust``, ``/trust`` and the kernel's Trust button; no tool does (and
``{home}`` is outside every workspace, TRUST-3).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import atomic_write_json, read_json_object
from crystal_kernel.core.trust_digest import Digest, bytes_digest, mcp_digest, set_digest

TRUST_FILE = "trust.json"
Kind = Literal["mcp", "exec", "prompt", "cassette"]
# The workspace prompt files the reviewer reads (REV-3), by file name.
REVIEW_PROMPTS = ("review", "review.user")
PROMPT_SUFFIXES = (".md", ".txt")
_WHAT_IS_LEFT_UNUSED: dict[str, str] = {
    "mcp": "its servers were not started and their tools are not offered",
    "exec": "its tools are not offered",
    "prompt": "the reviewer does not read it and uses the Home or built-in text instead",
    "cassette": "its recorded person answers are not used: approvals are denied and questions dismissed",
}


@dataclass(frozen=True)
class WorkspaceFile:
    """One workspace configuration file and whether the person trusts it as it is now."""

    kind: Kind
    path: Path  # resolved
    digest: str
    trusted: bool
    # True when an earlier version was trusted and the file changed since.
    changed: bool = False
    # Why it cannot be trusted at all as it is (a link leading out, too big, unreadable).
    problem: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "mcp":
            return "MCP servers configuration"
        if self.kind == "exec":
            return f"exec tool set '{self.path.parent.name}'"
        if self.kind == "prompt":
            return "review prompt"
        return "cassette"

    @property
    def left_unused(self) -> str:
        """What stays unused until the file is trusted ("its tools are not offered")."""
        return _WHAT_IS_LEFT_UNUSED[self.kind]

    def note(self) -> str:
        """The one-line note a listing shows for an untrusted file."""
        what = self.left_unused
        if self.problem:
            return f"Workspace {self.label} {self.path} cannot be trusted: {self.problem}; {what}."
        why = "changed since you trusted it" if self.changed else "is not trusted yet"
        return (f"Workspace {self.label} {self.path} {why}; {what}. Read it, then trust it with "
                f"`crystal trust {self.path}`, `/trust {self.path}` or the Trust button in the kernel.")


def trust_path(home: Path) -> Path:
    return Path(home) / TRUST_FILE


def content_digest(kind: Kind, path: Path) -> Digest:
    """What the file makes Crystal run or read, hashed: the file itself (a review
    prompt, a cassette), an mcp.json with the workspace files its servers name, or the
    exec set's whole closure (core/trust_digest.py)."""
    if kind == "exec":
        return set_digest(Path(path))
    return mcp_digest(Path(path)) if kind == "mcp" else bytes_digest(Path(path))


def file_digest(kind: Kind, path: Path) -> str:
    """The SHA-256 of :func:`content_digest`; "" when it cannot be trusted as it is."""
    return content_digest(kind, path).sha256


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def needs_trust(home: Path, path: Path) -> bool:
    """False for a file in Home (the person's own configuration)."""
    real = Path(os.path.realpath(path))
    return not _inside(real, Path(os.path.realpath(home)))


def workspace_candidates(workspace: Path) -> list[tuple[Kind, Path]]:
    """Every workspace file that can run code or steer a decision: mcp.json, the exec
    sets' tools.json in folder order, the review prompts, then the cassettes."""
    crystal = paths.host_dir(os.path.abspath(workspace))
    out: list[tuple[Kind, Path]] = []
    mcp = crystal / "mcp.json"
    if mcp.is_file():
        out.append(("mcp", mcp))
    try:
        sets = sorted(p for p in (crystal / "tools").iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        sets = []
    out.extend(("exec", p / "tools.json") for p in sets if (p / "tools.json").is_file())
    out.extend(("prompt", p) for p in review_prompt_files(workspace))
    try:
        cassettes = sorted(p for p in paths.cassettes_dir(workspace).glob("*.json") if p.is_file())
    except OSError:
        cassettes = []
    out.extend(("cassette", p) for p in cassettes)
    return out


def review_prompt_files(workspace: Path) -> list[Path]:
    """The workspace files the reviewer's texts are made of (REV-3): the review
    overrides and each prompt attachment's review file (the ones that exist)."""
    crystal = paths.host_dir(workspace)
    folders = [crystal / "prompts"]
    try:
        folders += sorted(p for p in (crystal / "prompt-attachments").iterdir()
                          if p.is_dir() and not p.name.startswith("."))
    except OSError:
        pass
    found: list[Path] = []
    for index, folder in enumerate(folders):
        for name in REVIEW_PROMPTS if index == 0 else ("review",):
            for suffix in PROMPT_SUFFIXES:
                candidate = folder / f"{name}{suffix}"
                if candidate.is_file():
                    found.append(candidate)
    return found


def link_on_the_way(path: Path) -> str | None:
    """Why ``path`` cannot be trusted when a symbolic link lies between its workspace and
    it (the ``.crystal`` folder, a folder inside it, or the file itself); None otherwise.

    Trust is kept by the file's real path: a hostile repository whose ``.crystal`` (or
    ``mcp.json``) is a link to another project's trusted one would otherwise inherit that
    trust, and its servers would start in the hostile workspace (TRUST-5: trust content,
    not paths). The workspace's own path may hold links (it is the person's folder)."""
    named = Path(os.path.abspath(path))
    parts = named.parts
    if paths.HOST_DIR not in parts:
        return None
    index = len(parts) - 1 - parts[::-1].index(paths.HOST_DIR)
    workspace = Path(*parts[:index])
    step = Path(os.path.realpath(workspace))
    for part in parts[index:]:
        step = step / part
        if os.path.islink(step):
            return (f"{step.relative_to(os.path.realpath(workspace))} is a symbolic link "
                    "(replace it with the folder or file itself to trust it)")
    return None


def needs_content_trust(home: Path, workspace: Path | None, path: Path) -> bool:
    """True for a file inside the workspace (and not inside Home): a cloned repository
    or a tool may have written it. A file elsewhere was named by the person."""
    if workspace is None or not needs_trust(home, path):
        return False
    return _inside(Path(os.path.realpath(path)), Path(os.path.realpath(workspace)))


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
        # The path as named, not resolved: a link at the set folder or file is refused.
        named = Path(os.path.abspath(path))
        if not needs_trust(self.home, named):
            return WorkspaceFile(kind, named, file_digest(kind, Path(os.path.realpath(named))), True)
        found = content_digest(kind, named)
        linked = None if found.problem else link_on_the_way(named)
        if linked:
            return WorkspaceFile(kind, named, "", False, problem=linked)
        digest = found.sha256
        entry = self.entry(named)
        if entry is None:
            return WorkspaceFile(kind, named, digest, False, problem=found.problem)
        ok = bool(digest) and entry.get("sha256") == digest and entry.get("kind") == kind
        return WorkspaceFile(kind, named, digest, ok, changed=not ok, problem=found.problem)

    def trust(self, kind: Kind, path: Path) -> WorkspaceFile:
        """Record the person's trust in ``path`` as it is now (the person's command only)."""
        real = Path(os.path.realpath(path))
        named = Path(os.path.abspath(path))
        found = content_digest(kind, named)
        digest = found.sha256
        problem = found.problem or (link_on_the_way(named) if digest else None)
        if not digest or problem:
            raise UserError(f"Cannot trust {named}: {problem or 'it cannot be read'}.")
        data = self._read()
        data["files"][str(real)] = {"kind": kind, "sha256": digest,
                                    "trusted": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        atomic_write_json(self.path, data, inside=self.path.parent)
        return WorkspaceFile(kind, named, digest, True)

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
    # By resolved path, but the path handed back is the one the workspace names (a
    # link at a set folder must be seen as one by the digest).
    candidates: dict[Path, tuple[Kind, Path]] = {Path(os.path.realpath(p)): (kind, p)
                                                 for kind, p in workspace_candidates(workspace)}
    for option in options:
        real = Path(os.path.realpath(option))
        for probe in (real, real / "tools.json", real / "mcp.json"):
            probe = Path(os.path.realpath(probe))
            if probe in candidates:
                return candidates[probe]
    names = ", ".join(str(p) for _, p in candidates.values()) or "none in this workspace"
    raise UserError(f"'{name}' is not a workspace configuration file that needs trust "
                    f"(.crystal/mcp.json, .crystal/tools/<dir>/tools.json, .crystal/prompts/review*.md, "
                    f"an attachment's review.md or .crystal/cassettes/*.json; found: {names}).")


def describe(states: list[WorkspaceFile]) -> str:
    """A listing for `crystal trust list` and `/trust`."""
    if not states:
        return ("No workspace configuration here needs trust (.crystal/mcp.json, .crystal/tools/<dir>/tools.json, "
                "review prompts, cassettes).")
    lines = []
    for s in states:
        mark = "trusted" if s.trusted else ("refused" if s.problem else "changed" if s.changed else "untrusted")
        why = f"  ({s.problem})" if s.problem and not s.trusted else ""
        lines.append(f"{mark:9}  {s.kind:8}  {s.path}{_servers(s)}{why}")
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
