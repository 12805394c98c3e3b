"""Workspace access: which paths a tool may read or write.

Every path a tool touches is resolved (symlinks included) and must lie inside the
workspace or a directory added with ``/access add DIR [ro|rw]``; writes need rw.
Credential locations are refused even inside allowed folders (see
:data:`CREDENTIAL_RULES`, documented in docs/security.md).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.paths import HOST_DIR

# Folder names that hold credentials anywhere in a path.
CREDENTIAL_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".azure", ".kube", ".password-store", ".docker"})
# Names compare case-insensitively: `.ENV`, `ID_RSA` and `Credentials.JSON` are the same files
# on case-insensitive file systems, and renamed copies are still secrets.
# File-name globs that are credentials wherever they are.
CREDENTIAL_FILES = (
    ".netrc", "_netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass",
    ".env", ".env.*", "*.env",
    "id_rsa", "id_rsa.*", "id_dsa", "id_dsa.*", "id_ecdsa", "id_ecdsa.*", "id_ed25519", "id_ed25519.*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "credentials", "credentials.json", "service-account*.json",
    # More key and token files seen in the wild.
    "id_ecdsa_sk", "id_ecdsa_sk.*", "id_ed25519_sk", "id_ed25519_sk.*", "credentials.toml",
    ".htpasswd", ".my.cnf", ".vault-token", ".boto", ".s3cfg", ".terraformrc", "*.kdbx",
    # TRUST-4: more secret files seen in repositories and homes.
    ".envrc", "*.tfstate", "*.tfstate.backup", "*.tfvars", "*.ppk", ".yarnrc.yml", ".yarnrc", ".dockercfg",
    ".bash_history", ".zsh_history", ".sh_history", ".history", ".python_history", ".psql_history",
    ".mysql_history", ".node_repl_history", ".sqlite_history", ".rediscli_history", ".lesshst",
    "secrets.yml", "secrets.yaml", "secret.yml", "secret.yaml", "secrets.json", "secrets.toml",
    "rclone.conf", "credentials.yml", "credentials.yaml", "credentials.xml", "client_secret*.json",
    ".pgpass.conf", "*.gpg", "*.asc", "*.keytab",
    "token.json", ".git-credential*", "*.ovpn",
)
# Example env files are documentation, not secrets.
CREDENTIAL_EXCEPTIONS = (".env.example", ".env.sample", ".env.template", ".env.dist")
# Relative path suffixes (parts) that are credentials.
CREDENTIAL_SUFFIXES = (
    (".git", "config"), (".config", "gcloud"), (".config", "gh", "hosts.yml"),
    (".config", "hub"), (".terraform.d", "credentials.tfrc.json"),
    (".cargo", "credentials"), (".cargo", "credentials.toml"), (".gem", "credentials"),
    (".config", "rclone"), (".config", "op"), (".docker", "config.json"), (".kaggle", "kaggle.json"),
    (".config", "git", "credentials"), (".local", "share", "keyrings"),
)

CREDENTIAL_RULES = (
    "folders: " + ", ".join(sorted(CREDENTIAL_DIRS)) + "; files: " + ", ".join(CREDENTIAL_FILES)
    + "; paths: " + ", ".join("/".join(s) for s in CREDENTIAL_SUFFIXES)
)


_SUFFIX_HEADS = frozenset(s[0] for s in CREDENTIAL_SUFFIXES)


@functools.cache
def _credential_name_pattern() -> re.Pattern[str]:
    """The file globs as one case-insensitive regex, compiled on first use: only names
    that are not ASCII need it, and compiling it cost every start ~3 ms (docs/benchmarks.md)."""
    return re.compile("|".join(fnmatch.translate(g) for g in CREDENTIAL_FILES if "/" not in g), re.IGNORECASE)


_EXCEPTIONS = frozenset(e.lower() for e in CREDENTIAL_EXCEPTIONS)


def _split_name_globs() -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """CREDENTIAL_FILES' name globs as plain string tests: exact names, ``head*``,
    ``*tail`` and ``head*tail``. The regex alternation of ~90 globs cost ~4 µs a name,
    most of glob's and grep's own time on a 50,000-file tree."""
    exact, heads, tails, both = set(), [], [], []
    for glob in (g.lower() for g in CREDENTIAL_FILES if "/" not in g):
        if any(c in glob for c in "?[]") or glob.count("*") > 1:
            raise ValueError(f"credential glob {glob!r} needs the regex check")  # none today
        if "*" not in glob:
            exact.add(glob)
            continue
        head, tail = glob.split("*")
        if head and tail:
            both.append((head, tail))
        elif head:
            heads.append(head)
        else:
            tails.append(tail)
    return frozenset(exact), tuple(heads), tuple(tails), tuple(both)


_EXACT_NAMES, _NAME_HEADS, _NAME_TAILS, _NAME_HEAD_TAILS = _split_name_globs()
_HEAD_TAIL_TAILS = tuple({tail for _, tail in _NAME_HEAD_TAILS})
# A lower-cased ASCII name that is none of these, starts with no head and ends with no
# tail cannot be a credential: CredentialCheck.keep's fast path for most files.
_SUSPECT_NAMES = _EXACT_NAMES | CREDENTIAL_DIRS
_SUSPECT_TAILS = _NAME_TAILS + _HEAD_TAIL_TAILS


def is_credential_name(name: str) -> bool:
    """True when a lower-cased file name matches CREDENTIAL_FILES (not an exception).

    ASCII names take string tests equal to the globs; other names keep the
    case-insensitive regex, whose Unicode case folding (``ſ`` matches ``s``) the
    lower-cased name alone would not reproduce."""
    if name in _EXCEPTIONS:
        return False
    if not name.isascii():
        return _credential_name_pattern().match(name) is not None
    if name in _EXACT_NAMES or name.endswith(_NAME_TAILS) or name.startswith(_NAME_HEADS):
        return True
    if name.endswith(_HEAD_TAIL_TAILS):
        for head, tail in _NAME_HEAD_TAILS:
            if len(name) >= len(head) + len(tail) and name.startswith(head) and name.endswith(tail):
                return True
    return False


def is_credential_path(path: Path) -> bool:
    """True when a (resolved) path names a credential location."""
    return is_credential_parts(path.parts)


def is_credential_parts(parts: tuple[str, ...]) -> bool:
    """:func:`is_credential_path` on path components (cheap for tools listing many files)."""
    if not parts:
        return False
    parts = tuple(p.lower() for p in parts)
    if not CREDENTIAL_DIRS.isdisjoint(parts):
        return True
    if is_credential_name(parts[-1]):
        return True
    if len(parts) < 2 or _SUFFIX_HEADS.isdisjoint(parts):
        return False
    for suffix in CREDENTIAL_SUFFIXES:
        n = len(suffix)
        for i in range(len(parts) - n + 1):
            if tuple(parts[i : i + n]) == suffix:
                return True
    return False


class CredentialCheck:
    """``is_credential_parts(prefix + rel.split("/"))`` for the many relative POSIX paths
    of one listing: each folder's components are lower-cased and checked once, then a
    file costs one dict look-up and a name test."""

    def __init__(self, prefix: tuple[str, ...] = ()) -> None:
        self.prefix = prefix
        # folder -> 2: a credential folder, 1: a CREDENTIAL_SUFFIXES head is in it (the
        # whole path is checked), 0: only the file name can make it a credential.
        self._folders: dict[str, int] = {}

    def _folder_state(self, folder: str) -> int:
        parts = tuple(p.lower() for p in self.prefix + (tuple(folder.split("/")) if folder else ()))
        state = (2 if not CREDENTIAL_DIRS.isdisjoint(parts)
                 else 1 if not _SUFFIX_HEADS.isdisjoint(parts) else 0)
        self._folders[folder] = state
        return state

    def keep(self, rels: Iterable[str]) -> list[str]:
        """The paths of ``rels`` that are not credentials, in order: what a listing tool
        shows. Most names (lower-cased ASCII, in a folder of state 0, with no head, tail
        or exact name of the rules) are kept after three string tests; the others take
        :meth:`__call__`. On 12,500 paths: ~10 ms instead of ~35 ms under load."""
        folders = self._folders
        suspect, heads, tails = _SUSPECT_NAMES, _NAME_HEADS, _SUSPECT_TAILS
        kept = []
        for rel in rels:
            folder, _, name = rel.rpartition("/")
            state = folders.get(folder)
            if state is None:
                state = self._folder_state(folder)
            if state == 0:
                low = name.lower()
                if low.isascii() and not (low in suspect or low.startswith(heads) or low.endswith(tails)):
                    kept.append(rel)
                    continue
            if not self(rel):
                kept.append(rel)
        return kept

    def __call__(self, rel: str) -> bool:
        folder, _, name = rel.rpartition("/")
        state = self._folders.get(folder)
        if state is None:
            state = self._folder_state(folder)
        if state == 2:
            return True
        if state == 1:
            return is_credential_parts(self.prefix + tuple(rel.split("/")))
        name = name.lower()
        # Every CREDENTIAL_SUFFIXES entry has two parts or more, so with none of their
        # heads above the file only CREDENTIAL_DIRS and the name rules can match.
        return name in CREDENTIAL_DIRS or is_credential_name(name)


@dataclass
class DirectoryRule:
    path: Path
    mode: Literal["ro", "rw"] = "rw"
    # False: a client added it for this session only (ACP additionalDirectories); it is
    # never saved as the person's grant (host/folders.py, TRUST-6).
    granted: bool = True


@dataclass
class AccessRules:
    """The session's workspace root plus added directories."""

    workspace: Path
    directories: list[DirectoryRule] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.realpath(self.workspace))

    def add(self, directory: str | Path, mode: Literal["ro", "rw"] = "rw", *, granted: bool = True) -> DirectoryRule:
        """Allow ``directory``; the checks of what may be added are host/folders.py's."""
        resolved = Path(os.path.realpath(Path(directory).expanduser()))
        if not resolved.is_dir():
            raise ToolError(f"'{directory}' is not a folder.")
        self.directories = [d for d in self.directories if d.path != resolved]
        rule = DirectoryRule(resolved, mode, granted)
        self.directories.append(rule)
        return rule

    def remove(self, directory: str | Path) -> bool:
        resolved = Path(os.path.realpath(Path(directory).expanduser()))
        before = len(self.directories)
        self.directories = [d for d in self.directories if d.path != resolved]
        return len(self.directories) != before

    def absolute(self, path: str | Path) -> Path:
        """The path made absolute against the workspace, not yet resolved."""
        if "\x00" in str(path):  # the OS refuses it with ValueError, not OSError
            raise ToolError(f"The path {str(path)!r} contains a NUL character.")
        try:
            p = Path(path).expanduser()
        except RuntimeError:  # "~someone" with no such user
            raise ToolError(f"'{path}' names the home folder of an unknown user.") from None
        return p if p.is_absolute() else self.workspace / p

    def resolve(self, path: str | Path, *, write: bool = False) -> Path:
        """Resolve a tool's path and check it; raise ToolError the model can read."""
        if str(path).strip() == "":
            raise ToolError("The path is empty.")
        resolved = Path(os.path.realpath(self.absolute(path)))
        try:  # a name too long for the file system raises here, not as "missing"
            resolved.exists()
        except OSError as exc:
            raise ToolError(f"'{str(path)[:200]}' cannot be used: {exc.strerror or exc}.") from None
        rule = self.rule_for(resolved)
        if rule is None:
            raise ToolError(
                f"'{path}' is outside the workspace ({self.workspace}) and every added directory; "
                "access refused."
            )
        if write and rule.mode != "rw":
            raise ToolError(f"'{path}' is in a read-only directory ({rule.path}); writing is refused.")
        if is_credential_path(resolved.relative_to(rule.path)) or is_credential_path(Path(resolved.name)):
            raise ToolError(f"'{path}' is a credential location; access refused.")
        return resolved

    def credential_prefix(self, resolved: Path) -> tuple[str, ...]:
        """The components of a resolved folder below the allowed folder that holds it:
        listing tools check a found file's credential rules on ``prefix + its path
        below the folder``, so ``grep`` in ``.git`` still skips ``.git/config``."""
        rule = self.rule_for(Path(resolved))
        if rule is None:
            return ()
        return Path(resolved).relative_to(rule.path).parts

    def rule_for(self, resolved: Path) -> DirectoryRule | None:
        if _inside(resolved, self.workspace):
            return DirectoryRule(self.workspace, "rw")
        for d in self.directories:
            if _inside(resolved, d.path):
                return d
        return None

    def in_workspace(self, path: str | Path) -> bool:
        """Authority: True when the resolved path lies in the workspace itself."""
        resolved = Path(os.path.realpath(self.absolute(path)))
        return _inside(resolved, self.workspace)

    def is_host_owned(self, path: str | Path, home: Path | str | None = None) -> bool:
        """TRUST-3: True when the path (resolved, and as written) lies in a ``.crystal``
        folder (prompts, review texts, manifests, mcp.json, sessions, the search index)
        or in Home (config.json, trust.json): files that steer the host."""
        try:
            written = self.absolute(path)
        except ToolError:
            return False
        resolved = Path(os.path.realpath(written))
        for candidate in (written, resolved):
            if HOST_DIR in candidate.parts:
                return True
        if home:
            real_home = Path(os.path.realpath(Path(home).expanduser()))
            if _inside(resolved, real_home):
                return True
        return False

    def directories_text(self) -> str:
        """PH-6: empty without added directories, else the access text."""
        if not self.directories:
            return ""
        lines = ["Directories added to this session besides the workspace:"]
        for d in self.directories:
            lines.append(f"- {d.path} ({'read and write' if d.mode == 'rw' else 'read only'})")
        return "\n".join(lines)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def project_file_problem(path: Path | str, workspace: Path | str) -> str | None:
    """Why a workspace file must not be read as project text (AGENTS.md, CRYSTAL.md,
    ``.crystal/prompts/*``, prompt attachments, skills), or None when it may be.

    The host reads these files itself and sends them to the model, with no tool call
    and no approval: a cloned repository's ``AGENTS.md`` that is a symbolic link to
    ``/proc/self/environ`` or ``~/.aws/credentials`` would send the person's secrets to
    the model server (TRUST-4). So the file's real location must lie inside the
    workspace and must not be a credential location, as for the file tools."""
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(workspace))
    if not _inside(real, root):
        return f"it leads outside the workspace (to {real}) through a symbolic link"
    if is_credential_parts(real.relative_to(root).parts) or is_credential_name(real.name.lower()):
        return "it is a credential location"
    return None
