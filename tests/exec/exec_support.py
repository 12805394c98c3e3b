"""Helpers for exec tool set tests (imported by the tests and conftest.py).

StandInSession: the part of the Session an exec tool reads, used until
crystal_kernel/host/session.py lands; the scripts the tests run are real processes.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.tool_sources import discover_external_tools
from crystal_kernel.tools.base import ToolContext

PY = sys.executable


@dataclass
class StandInSession:
    """The part of the Session an exec tool reads (stand-in until host/session.py lands)."""

    workspace: Path
    home: Path
    id: str = "sess-test-1"
    approval: str = "default"
    mode: str = "work"
    config: Config = None  # type: ignore[assignment]
    access: AccessRules = None  # type: ignore[assignment]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = self.config or Config(home=self.home)
        self.access = AccessRules(self.workspace)
        self.workspace = self.access.workspace

    def note(self, text: str) -> None:
        self.notes.append(text)

    def tool_context(self, interaction: Any, *, call_id: str = "", images_ok: bool = True) -> ToolContext:
        """Built from the parts alone, as a script or a plugin's test would."""
        return ToolContext(access=self.access, config=self.config, interaction=interaction, call_id=call_id,
                           images_ok=images_ok, session_id=self.id, approval=self.approval)


def make_ctx(session: Any, images_ok: bool = True) -> ToolContext:
    return session.tool_context(NoPerson(), call_id="call-1", images_ok=images_ok)


def write_set(root: Path, name: str, manifest: dict[str, Any], files: dict[str, str] | None = None) -> Path:
    """Write a set folder <root>/<name>/ with tools.json and script files."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.json").write_text(json.dumps(manifest), encoding="utf-8")
    for fname, text in (files or {}).items():
        (folder / fname).write_text(text, encoding="utf-8")
    return folder


def home_set(home: Path, name: str, manifest: dict[str, Any], files: dict[str, str] | None = None) -> Path:
    return write_set(home / "tools", name, manifest, files)


def load(home: Path, workspace: Path) -> tuple[dict[str, Any], list[str]]:
    tools, notes = run_to_completion(discover_external_tools(home, workspace))
    return {t.name: t for t in tools}, notes


async def call(tool: Any, arguments: dict[str, Any], ctx: ToolContext):
    """Parse and run as the loop would (ToolError becomes a failed result)."""
    from crystal_kernel.core.errors import ToolError
    from crystal_kernel.tools.base import ToolResult

    try:
        args = tool.parse(arguments)
        return await tool.run(args, ctx)
    except ToolError as exc:
        return ToolResult.fail(str(exc))
