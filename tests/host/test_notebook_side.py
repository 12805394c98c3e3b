"""What only a notebook has is not session state (SPEC §11, the session's split): a
notebook front attaches a NotebookAttachment (shell, notebook path, live editing), which
the tools reach through their ToolContext and the system text names; the Trust cards a
notebook has shown (TRUST-2) stay with the front (jupyter/notebook_front.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.notebook import NotebookAttachment
from crystal_kernel.host.session import Session
from crystal_kernel.host.state import SessionState
from crystal_kernel.testing.scripted import ScriptedProvider

NOTEBOOK_ONLY = {"notebook_shell", "notebook_path", "live_notebook_edit", "trust_offered"}


def _session(tmp_path: Path) -> Session:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    return Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider(), notebook=True)


def test_notebook_fields_are_not_session_state(tmp_path: Path) -> None:
    assert NOTEBOOK_ONLY.isdisjoint(f.name for f in dataclasses.fields(SessionState))
    assert NOTEBOOK_ONLY.isdisjoint(vars(_session(tmp_path)))


async def test_an_attached_notebook_reaches_the_tools_the_prompt_and_a_fork(tmp_path: Path) -> None:
    session = _session(tmp_path)
    shell = object()

    async def live_edit(path: Path, args: dict[str, object]) -> None:
        return None

    assert session.tool_context(NoPerson()).notebook_shell is None
    session.attach_notebook(NotebookAttachment(shell=shell, path="analysis.ipynb", live_edit=live_edit))
    ctx = session.tool_context(NoPerson())
    assert ctx.notebook_shell is shell and ctx.live_notebook_edit is live_edit
    assert "analysis.ipynb" in session.system_text()
    child = session.fork()
    try:
        assert child.tool_context(NoPerson()).notebook_shell is shell and child.notebook_path == "analysis.ipynb"
    finally:
        child.release_lock()
