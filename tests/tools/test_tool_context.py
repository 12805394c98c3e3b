"""A tool receives the parts of the session it uses, never the Session (TRUST-3: a tool,
a plugin's included, cannot switch modes, approve its own calls or read the transcript
through its context). A plugin tool written against the documented ToolContext
(docs/plugins.md) runs from a context built of the parts alone, and through the loop."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.messages import ToolResultPart
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult


class NoteInput(ToolInput):
    text: str


class NoteTool(Tool[NoteInput]):
    """Write a note file in the workspace and say what the context offered."""

    name = "team_note"
    Input = NoteInput
    risk = Risk.READ

    async def run(self, args: NoteInput, ctx: ToolContext) -> ToolResult:
        (ctx.workspace / "note.txt").write_text(args.text)
        todos = len(ctx.todos)
        return ToolResult(ok=True, text=f"noted in {ctx.workspace.name}; limit {ctx.config.tool_output_limit}; "
                                        f"session {ctx.session_id}; todos {todos}")


class SessionReader(Tool[NoteInput]):
    """A tool written for the old context, which carried the whole Session."""

    name = "old_style"
    Input = NoteInput

    async def run(self, args: NoteInput, ctx: ToolContext) -> ToolResult:
        return ToolResult(ok=True, text=str(ctx.session.mode))  # type: ignore[attr-defined]


def _session(tmp_path: Path, provider: ScriptedProvider | None = None) -> Session:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    return Session(workspace=workspace, config=Config(home=home), provider=provider or ScriptedProvider(),
                   person_present=False)


def test_context_has_no_session(tmp_path: Path) -> None:
    session = _session(tmp_path)
    assert "session" not in {f.name for f in dataclasses.fields(ToolContext)}
    ctx = session.tool_context(NoPerson(), call_id="c1")
    assert not hasattr(ctx, "session")
    with pytest.raises(AttributeError, match="docs/plugins.md"):
        ctx.session  # type: ignore[attr-defined]  # noqa: B018
    # No part is the Session, nor a method bound to it.
    for f in dataclasses.fields(ctx):
        value = getattr(ctx, f.name)
        assert value is not session, f.name
        assert getattr(value, "__self__", None) is not session, f.name
    # What the session shares is shared, not copied: todowrite edits the session's list.
    assert ctx.todos is session.todos and ctx.access is session.access and ctx.config is session.config
    assert ctx.workspace == session.workspace and ctx.home == session.home and ctx.session_id == session.id


async def test_plugin_tool_runs_from_documented_parts(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = ToolContext(access=AccessRules(workspace), config=Config(home=tmp_path), interaction=NoPerson(),
                      session_id="s9")
    tool = NoteTool()
    args = tool.parse({"text": "hello"})
    assert tool.classify(args, ctx).risk == Risk.READ
    result = await tool.run(args, ctx)
    assert result.ok and result.text == "noted in ws; limit 30000; session s9; todos 0"
    assert (workspace / "note.txt").read_text() == "hello"
    # Parts a bare context lacks say so in words.
    with pytest.raises(Exception, match="Background jobs are not available"):
        ctx.jobs  # noqa: B018


async def test_plugin_tool_through_the_loop_and_old_style_tool_fails_in_words(tmp_path: Path) -> None:
    """The loop builds the context; the model reads the tool's text. A tool still reading
    ``ctx.session`` fails that call (an internal error naming the migration), not the turn."""
    provider = ScriptedProvider()
    session = _session(tmp_path, provider)
    session.approval = "full"
    (await session.prepare_tools())[:] = [NoteTool(), SessionReader()]  # the catalog this turn uses
    provider.add(tool_reply([("team_note", {"text": "hi"}), ("old_style", {"text": "x"})]), text_reply("done"))
    async for _ in run_turn(session, "go", NoPerson()):
        pass
    results = [p for m in provider.requests[-1].messages for p in m.parts if isinstance(p, ToolResultPart)]
    texts = {r.name: r.text for r in results}
    assert texts["team_note"].startswith("noted in ws; limit ") and f"session {session.id}" in texts["team_note"]
    assert "ToolContext has no 'session'" in texts["old_style"] and "docs/plugins.md" in texts["old_style"]
    assert (session.workspace / "note.txt").read_text() == "hi"


def test_tool_context_is_documented() -> None:
    """Every field of ToolContext is named in docs/plugins.md."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    for f in dataclasses.fields(ToolContext):
        assert f"`{f.name}`" in doc, f.name
    for name, _member in inspect.getmembers(ToolContext, lambda m: isinstance(m, property)):
        assert f"`{name}`" in doc, name
