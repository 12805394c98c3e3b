"""Fixtures for tool tests: a real workspace folder and the smallest session a
ToolContext needs.

The stand-in session below exists only until crystal_kernel/host/session.py lands; it
carries the attributes tools read (access, config, workspace, home, todos, provider,
flags, note).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.host.access import AccessRules
from crystal_kernel.host.config import Config
from crystal_kernel.host.interaction import NoPerson
from crystal_kernel.tools.base import ToolContext, ToolResult
from crystal_kernel.tools.catalog import load_builtin


@dataclass
class StandInSession:
    workspace: Path
    home: Path
    config: Config
    access: AccessRules
    todos: list[Any] = field(default_factory=list)
    provider: Any = None
    mode: str = "work"
    notes: list[str] = field(default_factory=list)
    id: str = "test-session"

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def session(workspace: Path, home: Path) -> StandInSession:
    config = Config(home=home)
    return StandInSession(workspace=workspace.resolve(), home=home, config=config,
                          access=AccessRules(workspace))


@pytest.fixture
def ctx(session: StandInSession) -> ToolContext:
    return ToolContext(session=session, interaction=NoPerson(), call_id="call-1")  # type: ignore[arg-type]


async def call(name: str, ctx: ToolContext, **arguments: Any) -> ToolResult:
    """Run a built-in tool exactly as the loop does: parse, then run; a ToolError becomes
    a failed result with its message."""
    from crystal_kernel.errors import ToolError

    tool = load_builtin(name)
    try:
        args = tool.parse(arguments)
        return await tool.run(args, ctx)
    except ToolError as exc:
        return ToolResult.fail(str(exc))
