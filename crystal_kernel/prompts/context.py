"""The host values a prompt is bound with (PH-2 … PH-6, PH-12).

:class:`PromptContext` is a plain dataclass so tests and the CLI can build one without a
session; :func:`context_from_session` reads a session's attributes with defaults. A
context is built each time a system message is composed, so every value (time
included) is fresh at that moment (PH-3, PH-12).
"""

from __future__ import annotations

import functools
import platform as _platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crystal_kernel.core.access import project_file_problem
from crystal_kernel.core.paths import home_dir
from crystal_kernel.prompts.skills import discover_skills, skills_text

if TYPE_CHECKING:
    from crystal_kernel.core.access import AccessRules
    from crystal_kernel.core.config import Config
    from crystal_kernel.providers.base import Provider

PRODUCT_NAME = "Crystal"
# Instruction files: workspace root first-party names, then the Home file (read once each).
WORKSPACE_INSTRUCTION_FILES = ("AGENTS.md", "CRYSTAL.md")
HOME_INSTRUCTION_FILE = "CRYSTAL.md"
# Bound what one instruction file may add to every request.
MAX_INSTRUCTION_CHARS = 64_000


@functools.lru_cache(maxsize=1)
def os_name() -> str:
    """PH-3 ``os``: OS name and version (the distribution's name on Linux)."""
    system = _platform.system()
    if system == "Linux":
        try:
            pretty = _platform.freedesktop_os_release().get("PRETTY_NAME", "")
        except OSError:
            pretty = ""
        kernel = f"Linux {_platform.release()}"
        return f"{pretty} ({kernel})" if pretty else kernel
    if system == "Darwin":
        return f"macOS {_platform.mac_ver()[0]}".strip()
    if system == "Windows":
        return f"Windows {_platform.version()}".strip()
    return f"{system} {_platform.release()}".strip() or sys.platform


@functools.lru_cache(maxsize=1)
def platform_name() -> str:
    """PH-3 ``platform``: linux, macos, windows, or Python's platform name."""
    return {"linux": "linux", "darwin": "macos", "win32": "windows", "cygwin": "windows"}.get(
        sys.platform, sys.platform)


@functools.lru_cache(maxsize=1)
def architecture() -> str:
    """PH-3 ``architecture``: the process architecture (x86_64, arm64, …)."""
    machine = (_platform.machine() or "unknown").lower()
    machine = {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)
    if sys.maxsize <= 2**32 and machine in ("x86_64", "arm64"):
        machine = "x86" if machine == "x86_64" else "arm"  # a 32-bit process on a 64-bit machine
    return machine


def format_time(now: datetime) -> str:
    """PH-3 ``time``: local time with a numeric UTC offset, e.g. ``14:03:27 +02:00``."""
    offset = now.strftime("%z") or "+0000"
    return f"{now:%H:%M:%S} {offset[:3]}:{offset[3:]}"


def git_root_of(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` holding a ``.git`` folder or file."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None



class PromptFlagsSource(Protocol):
    """The process flags prompts read (host.flags.ProcessFlags satisfies it)."""

    @property
    def prompt_set(self) -> str | None: ...

    @property
    def prompt_attachments(self) -> str: ...

    @property
    def prompt_attachment(self) -> list[str]: ...

    @property
    def disable_tool(self) -> list[str]: ...


class PromptSource(Protocol):
    """What composing a prompt reads of a session, and the one thing it may do to it:
    queue a note for the person. The host's :class:`~crystal_kernel.host.session.Session`
    satisfies it (mypy checks that where a session is passed; host/view.py's SessionView
    extends it); prompts/ never imports the host, which imports prompts/."""

    @property
    def id(self) -> str: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def home(self) -> Path: ...

    @property
    def mode(self) -> str: ...

    @property
    def approval(self) -> str: ...

    @property
    def access(self) -> AccessRules: ...

    @property
    def config(self) -> Config: ...

    @property
    def provider(self) -> Provider: ...

    @property
    def flags(self) -> PromptFlagsSource: ...

    @property
    def notebook_path(self) -> str | None: ...

    @property
    def forked_from(self) -> str | None: ...

    def note(self, text: str, *, once: bool = False) -> None: ...


class PromptSession(PromptSource, Protocol):
    """A session whose prompt selection the person changes (``/promptset``,
    ``/promptattach``): refused while a turn runs, then the system text is composed again."""

    @property
    def busy(self) -> bool: ...

    def refresh_system(self) -> None: ...


@dataclass
class PromptContext:
    """Everything a prompt's host slots are computed from."""

    workspace: Path
    home: Path = field(default_factory=home_dir)
    mode: str = "work"
    provider: str = ""
    model: str = ""
    session_id: str = ""
    approval: str = "default"
    # PH-6: the session's directory-access text ("" without added directories).
    directories: str = ""
    # Skills bootstrap text (host-owned, PH-12), or a callable computing it on first use.
    skills: str | Callable[[], str] = ""
    disabled_tools: list[str] = field(default_factory=list)
    now: datetime = field(default_factory=lambda: datetime.now().astimezone())
    product_name: str = PRODUCT_NAME
    # The session, when there is one (plugins may read it through the context).
    session: PromptSource | None = None
    # The notebook the kernel or the magics run in ("" elsewhere), for the env block.
    notebook_path: str = ""

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace)
        self.home = Path(self.home)

    # --- atomic slots -----------------------------------------------------------------
    @property
    def is_git_repo(self) -> str:
        return "yes" if (self.workspace / ".git").exists() else "no"

    @functools.cached_property
    def git_root(self) -> str:
        root = git_root_of(self.workspace)
        return str(root) if root else ""

    @property
    def model_line(self) -> str:
        if not self.model:
            return ""
        via = f" through the {self.provider} provider" if self.provider else ""
        return f"You are running as the model {self.model}{via}."

    # --- composite slots --------------------------------------------------------------
    def env_text(self) -> str:
        """PH-5: OS, architecture and local time, plus git root, session and approval."""
        lines = [
            f"Operating system: {os_name()}",
            f"Architecture: {architecture()}",
            f"Local time: {self.now:%Y-%m-%d} {format_time(self.now)}",
        ]
        if self.git_root:
            lines.append(f"Git repository root: {self.git_root}")
        if self.session_id:
            lines.append(f"Session: {self.session_id}")
        if self.approval:
            lines.append(f"Approval mode: {self.approval}")
        if self.notebook_path:
            path = Path(self.notebook_path)
            try:
                path = path.relative_to(self.workspace)
            except ValueError:
                pass
            lines.append(f"This notebook (the user's, in Jupyter): {path}")
        return "\n".join(lines)

    def skills_text(self) -> str:
        return self.skills() if callable(self.skills) else self.skills

    def instruction_files(self) -> list[Path]:
        """The instruction files that exist: Home CRYSTAL.md, then the workspace root's
        AGENTS.md and CRYSTAL.md (later ones are the more specific)."""
        candidates = [self.home / HOME_INSTRUCTION_FILE]
        candidates += [self.workspace / name for name in WORKSPACE_INSTRUCTION_FILES]
        out: list[Path] = []
        for path in candidates:
            if path.is_file() and path not in out:
                out.append(path)
        return out

    def instructions_text(self) -> str:
        """PH-2 raw ``{{instructions}}``: each instruction file under a source line, then
        the directory-access text (PH-6). Empty when there is nothing."""
        blocks: list[str] = []
        for path in self.instruction_files():
            # TRUST-4: a workspace file is read only where it really lies in the workspace.
            problem = None if path.parent == self.home else project_file_problem(path, self.workspace)
            if problem:
                blocks.append(f"From {path}: not read, because {problem}.")
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                continue
            if not text:
                continue
            if len(text) > MAX_INSTRUCTION_CHARS:
                text = text[:MAX_INSTRUCTION_CHARS] + f"\n[… {path.name} truncated at {MAX_INSTRUCTION_CHARS} characters]"
            blocks.append(f"From {path}:\n{text}")
        if self.directories:
            blocks.append(self.directories)
        return "\n\n".join(blocks)

    def instructions_section(self) -> str:
        """PH-2 ``{{instructions_section}}``: the raw instructions under a heading, or ""."""
        body = self.instructions_text()
        if not body:
            return ""
        return (
            "# Workspace instructions\n\n"
            "The user's instruction files below override the built-in defaults above. "
            "The user's latest message overrides both.\n\n" + body
        )

    def host_values(self) -> dict[str, str]:
        """The atomic slots (PH-3), cheap enough to compute eagerly."""
        return {
            "workspace": str(self.workspace),
            "is_git_repo": self.is_git_repo,
            "platform": platform_name(),
            "os": os_name(),
            "architecture": architecture(),
            "date": f"{self.now:%Y-%m-%d}",
            "time": format_time(self.now),
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
            "product_name": self.product_name,
            "session_id": self.session_id,
            "approval": self.approval,
        }

    def lazy_values(self) -> dict[str, Callable[[], object]]:
        """Slots computed on first use (they read files or walk folders)."""
        return {
            "git_root": lambda: self.git_root,
            "model_line": lambda: self.model_line,
            "env": self.env_text,
            "skills": self.skills_text,
            "directories": lambda: self.directories,
            "instructions": self.instructions_text,
            "instructions_section": self.instructions_section,
        }


def context_from_session(session: PromptSource) -> PromptContext:
    """A fresh :class:`PromptContext` from a session."""
    disabled = list(session.flags.disable_tool)
    return PromptContext(
        workspace=session.workspace,
        home=session.home,
        mode=session.mode,
        provider=session.provider.name,
        model=session.provider.model,
        session_id=session.id,
        approval=session.approval,
        directories=session.access.directories_text(),
        skills=lambda: session_skills_text(session, disabled),
        disabled_tools=disabled,
        session=session,
        notebook_path=session.notebook_path or "",
    )


def session_skills_text(session: PromptSource, disabled: list[str]) -> str:
    """The ``{{skills}}`` slot: "" when skills are off or the skill tool is disabled."""
    if "skill" in disabled or session.config.skills is False:
        return ""
    return skills_text(discover_skills(session.home, session.workspace))
