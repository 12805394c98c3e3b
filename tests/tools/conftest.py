"""Fixtures for tool tests: a real workspace folder and a real Session (scripted
provider, no person) for the ToolContext."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolContext, ToolResult
from crystal_kernel.tools.catalog import load_builtin


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def session(workspace: Path, home: Path, provider: ScriptedProvider) -> Session:
    return Session(workspace=workspace, config=Config(home=home), provider=provider, person_present=False)


@pytest.fixture
def ctx(session: Session) -> ToolContext:
    return session.tool_context(NoPerson(), call_id="call-1")


async def call(tool_name: str, ctx: ToolContext, /, **arguments: Any) -> ToolResult:
    """Run a built-in tool exactly as the loop does: parse, then run; a ToolError becomes
    a failed result with its message."""
    from crystal_kernel.core.errors import ToolError

    tool = load_builtin(tool_name)
    try:
        args = tool.parse(arguments)
        return await tool.run(args, ctx)
    except ToolError as exc:
        return ToolResult.fail(str(exc))


def write_files(root: Path, files: dict[str, str]) -> None:
    """Write each relative path's text under ``root``, creating folders as needed."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
