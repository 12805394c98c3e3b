"""Workspace access: which paths a tool may read or write.

Every path a tool touches is resolved (symlinks included) and must lie inside the
workspace or a directory added with ``/access add DIR [ro|rw]``; writes need rw.
Credential locations are refused even inside allowed folders (see
:data:`CREDENTIAL_RULES`, documented in docs/security.md).
"""

from __future__ import annotations

import fnmatch
import os
import re
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


# All file globs as one compiled pattern: the file tools check every path they list.
_SUFFIX_HEADS = frozenset(s[0] for s in CREDENTIAL_SUFFIXES)
_CREDENTIAL_NAME = re.compile("|".join(fnmatch.translate(g) for g in CREDENTIAL_FILES if "/" not in g),
                              re.IGNORECASE)
_EXCEPTIONS = frozenset(e.lower() for e in CREDENTIAL_EXCEPTIONS)


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
    name = parts[-1]
    if name not in _EXCEPTIONS and _CREDENTIAL_NAME.match(name):
        return True
    if len(parts) < 2 or _SUFFIX_HEADS.isdisjoint(parts):
        return False
    for suffix in CREDENTIAL_SUFFIXES:
        n = len(suffix)
        for i in range(len(parts) - n + 1):
            if tuple(parts[i : i + n]) == suffix:
                return True
    return False


@dataclass
class DirectoryRule:
    path: Path
    mode: Literal["ro", "rw"] = "rw"


@dataclass
class AccessRules:
    """The session's workspace root plus added directories."""

    workspace: Path
    directories: list[DirectoryRule] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.realpath(self.workspace))

    def add(self, directory: str | Path, mode: Literal["ro", "rw"] = "rw") -> DirectoryRule:
        resolved = Path(os.path.realpath(Path(directory).expanduser()))
        if not resolved.is_dir():
            raise ToolError(f"'{directory}' is not a folder.")
        self.directories = [d for d in self.directories if d.path != resolved]
        rule = DirectoryRule(resolved, mode)
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
