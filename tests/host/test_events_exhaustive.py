"""Every front renders every event (docs/architecture.md, the event list).

The turn's events are one union (core/events.py ``Event``); each front has one
``render`` that matches it and ends in ``assert_never``: the kernel's cells and the
magics (jupyter/render.py ``Renderer``), ACP (acp/updates.py ``TurnUpdates``) and
``crystal run`` text and jsonl (cli/printer.py ``TurnPrinter``). Two proofs:

- at run time, one event of every member of the union goes through every front;
- statically, mypy run on the fronts with an event added to the union fails at each
  front's ``assert_never`` (so adding an event cannot go unnoticed by a front).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

from crystal_kernel.acp.updates import TurnUpdates
from crystal_kernel.cli.printer import TurnPrinter
from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import (
    ApprovalEvent,
    Compacted,
    ErrorEvent,
    Event,
    Note,
    ReasoningDelta,
    TextDelta,
    TodosUpdated,
    ToolCallStarted,
    ToolProgress,
    ToolResultEvent,
    TurnEnd,
    TurnStarted,
    UsageEvent,
)
from crystal_kernel.core.todos import Todo
from crystal_kernel.core.tool_types import FileChange
from crystal_kernel.host.session import Session
from crystal_kernel.jupyter.render import RecordingOutput, Renderer
from crystal_kernel.testing.scripted import ScriptedProvider

REPO = Path(__file__).resolve().parents[2]
# Each front's render module, and how many exhaustive dispatches it holds.
FRONTS = {
    "crystal_kernel/jupyter/render.py": 1,  # Renderer.render: kernel cells and magics
    "crystal_kernel/acp/updates.py": 1,  # TurnUpdates.render
    "crystal_kernel/cli/printer.py": 2,  # TurnPrinter: text and jsonl
}


def one_of_each(workspace: Path) -> list[Event]:
    """One event of every member of the union, in a turn's order."""
    return [
        TurnStarted(session_id="s1", provider="openai", model="gpt-test"),
        ReasoningDelta(text="Look first."),
        TextDelta(text="Editing."),
        ToolCallStarted(id="c1", name="edit", arguments={"path": "a.txt"}),
        ToolProgress(id="c1", name="edit", progress=1, total=2, message="half"),
        ApprovalEvent(id="c1", name="edit", outcome="allow", by="host"),
        ToolResultEvent(id="c1", name="edit", ok=True, text="Edited a.txt.", display="diff",
                        file_change=FileChange(path=str(workspace / "a.txt"), old_text="a\n", new_text="b\n")),
        TodosUpdated(todos=[Todo(content="Fix it", status="in_progress")]),
        Compacted(summarised=8, kept=4, before_tokens=9000, after_tokens=2500),
        Note(text="a note"),
        UsageEvent(input_tokens=5, output_tokens=2),
        ErrorEvent(message="boom"),
        TurnEnd(session_id="s1", stop_reason="end_turn"),
    ]


def test_the_samples_cover_the_union(workspace):
    assert {type(e) for e in one_of_each(workspace)} == set(get_args(Event))


def test_the_kernel_renderer_renders_every_event(workspace):
    output = RecordingOutput()
    renderer = Renderer(output)
    for event in one_of_each(workspace):
        renderer.render(event)
    renderer.close()
    shown = json.dumps(output.outputs)
    assert "Compacted the conversation: 8 older messages became a summary, 4 recent" in shown
    assert renderer.errors == ["boom"] and renderer.stop_reason == "end_turn"


def test_crystal_run_prints_every_event(workspace, capsys):
    text = TurnPrinter("text")
    for event in one_of_each(workspace):
        text.render(event)
    out = capsys.readouterr()
    assert out.out == "Editing.\n"
    assert "note: Compacted the conversation: 8 older messages" in out.err and "✓ edit Edited a.txt." in out.err

    jsonl = TurnPrinter("jsonl")
    for event in one_of_each(workspace):
        jsonl.render(event)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == [
        "turn_start", "reasoning", "text", "tool_call", "approval", "tool_result", "todos", "compacted", "note",
        "usage", "error", "turn_end"]  # tool_progress is no jsonl event
    assert lines[0] == {"type": "turn_start", "sessionId": "s1", "provider": "openai", "model": "gpt-test"}
    assert lines[6] == {"type": "todos", "todos": [{"content": "Fix it", "status": "in_progress"}]}
    assert lines[7] == {"type": "compacted", "summarised": 8, "kept": 4, "beforeTokens": 9000, "afterTokens": 2500}
    assert "file_change" not in lines[5] and "fileChange" not in lines[5]  # §11's tool_result, unchanged


def test_acp_sends_every_event(workspace):
    session = Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]),
                      person_present=False)
    sent: list[Any] = []

    async def send(update: Any) -> None:
        sent.append(update)

    async def run() -> TurnUpdates:
        await session.prepare_tools()  # tool_locations looks the tools up
        updates = TurnUpdates(session, send, {}, lambda: None)
        for event in one_of_each(workspace):
            await updates.render(event)
        await updates.finish()
        await session.close()
        return updates

    updates = asyncio.run(run())
    kinds = [u.session_update for u in sent]
    assert kinds == ["agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update",
                     "tool_call_update", "tool_call_update", "plan", "agent_thought_chunk",
                     "agent_thought_chunk", "usage_update"]
    plan = sent[kinds.index("plan")]
    assert [(e.content, e.status) for e in plan.entries] == [("Fix it", "in_progress")]
    diff = sent[5].content[0]  # the edit's result: a diff from the typed file change
    assert diff.type == "diff" and diff.old_text == "a\n" and diff.new_text == "b\n"
    assert "Compacted the conversation" in sent[7].content.text
    assert (updates.tokens_in, updates.tokens_out, updates.errors) == (5, 2, ["boom"])


def test_an_event_added_to_the_union_fails_mypy_in_every_front(tmp_path):
    """The fronts and the union, copied with one event added, type-checked on their own
    (the rest of crystal_kernel is skipped, pydantic and typing are followed): each
    front's assert_never rejects the new event."""
    package = tmp_path / "crystal_kernel"
    for folder in ("", "core", "jupyter", "acp", "cli"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    events = (REPO / "crystal_kernel/core/events.py").read_text()
    union = re.search(r"^Event = \(", events, re.MULTILINE)
    assert union is not None
    added = 'class Surprise(_Event):\n    type: Literal["surprise"] = "surprise"\n\n\n'
    events = events[:union.start()] + added + "Event = (Surprise | " + events[union.end():]
    (package / "core" / "events.py").write_text(events)
    for front in FRONTS:
        shutil.copy(REPO / front, tmp_path / front)
    (tmp_path / "mypy.ini").write_text("[mypy]\nignore_missing_imports = true\n"
                                       "[mypy-crystal_kernel.*]\nfollow_imports = skip\n"
                                       "[mypy-acp.*]\nfollow_imports = skip\n")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache"),
         "crystal_kernel/core/events.py", *FRONTS],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert all('"assert_never" has incompatible type "Surprise"' in line for line in errors), checked.stdout
    found = {front: sum(line.startswith(front + ":") for line in errors) for front in FRONTS}
    assert found == FRONTS, checked.stdout
