"""ROBUST-3: every built-in tool honours cancellation within 2 s.

Each tool of the catalog gets an input that makes it slow or blocking — a long command,
a job wait, a question nobody answers, a model that never answers, a notebook cell that
sleeps, MCP servers and an exec tool that never reply, or files on a *hung mount*: a
folder whose file operations (open, scandir) block the calling thread for 15 s, as a
network file system that stopped answering does. The turn is cancelled the way the stop button does
it, 0.5 s into the tool; the turn must end within 2 s with the tool's result marked
``cancelled``. A tool doing blocking file work on the event loop would hold the loop and
fail here.

Tools that have no slow input at all (they only touch the session's memory) are run
with their largest input and must finish at once. ``python``, ``variables`` and
``cell_output`` run inside a kernel: ``test_cancel_notebook_tools.py`` covers them. The
catalog check at the end fails when a tool is added without a case here.
"""

from __future__ import annotations

import asyncio
import builtins
import io
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import ToolCallStarted, ToolResultEvent, TurnEnd
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.providers.base import Capabilities
from crystal_kernel.testing.scripted import HANG, ScriptedProvider, text_reply, tool_reply
from crystal_kernel.tools.catalog import BUILTIN_TOOLS

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000185d3f1a30000000049454e44ae426082")
KERNEL_TOOLS = {"python", "variables", "cell_output"}


class HungMount:
    """File operations on paths under ``root`` block their thread until released (at
    most 30 s): a network mount that stopped answering."""

    def __init__(self, root: Path):
        self.root = str(root)
        self.release = threading.Event()
        self.blocked = threading.Event()

    def _hang(self, path: Any) -> None:
        try:
            text = os.fsdecode(path) if not isinstance(path, int) else ""
        except TypeError:
            return
        if text == self.root or text.startswith(self.root + os.sep):
            self.blocked.set()
            self.release.wait(15)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_open, real_os_open, real_scandir = builtins.open, os.open, os.scandir
        real_readlink = os.readlink

        def hung_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            self._hang(file)
            return real_open(file, *args, **kwargs)

        def hung_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
            dir_fd = kwargs.get("dir_fd")
            if dir_fd is None:
                self._hang(path)
            elif not isinstance(path, int):  # relative to an open folder: where it leads
                self._hang(os.path.join(real_readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path)))
            return real_os_open(path, *args, **kwargs)

        def hung_scandir(path: Any = ".") -> Any:
            self._hang(path)
            return real_scandir(path)

        monkeypatch.setattr(builtins, "open", hung_open)
        monkeypatch.setattr(io, "open", hung_open)
        monkeypatch.setattr(os, "open", hung_os_open)
        monkeypatch.setattr(os, "scandir", hung_scandir)


@dataclass
class Case:
    arguments: dict[str, Any]
    setup: Callable[[Path, Session], Any] | None = None
    person: bool = False
    hung: bool = False
    replies: list = field(default_factory=list)  # what the model answers inside the tool


def hung_files(ws: Path, _session: Session) -> None:
    hung = ws / "hung"
    (hung / "sub").mkdir(parents=True)
    (hung / "data.txt").write_text("alpha\nbeta\n")
    (hung / "sub" / "more.txt").write_text("gamma\n")
    (hung / "image.png").write_bytes(PNG)
    nb = {"cells": [{"cell_type": "markdown", "id": "c1", "metadata": {}, "source": "hello"}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (hung / "nb.ipynb").write_text(json.dumps(nb))


def sleepy_notebook(ws: Path, _session: Session) -> None:
    nb = {"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "import time\ntime.sleep(60)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (ws / "sleepy.ipynb").write_text(json.dumps(nb))


def image(ws: Path, _session: Session) -> None:
    (ws / "shot.png").write_bytes(PNG)


def mcp_server(ws: Path, _session: Session) -> None:
    from crystal_kernel.core.paths import home_dir
    from tests.mcp.mcp_support import stdio_entry, write_config

    write_config(home_dir() / "mcp.json", {"demo": stdio_entry()})


SLOW: dict[str, Case] = {
    "read": Case({"path": "hung/data.txt"}, hung_files, hung=True),
    "list": Case({"path": "hung"}, hung_files, hung=True),
    "tree": Case({"path": "hung"}, hung_files, hung=True),
    "glob": Case({"pattern": "**/*.txt", "path": "hung"}, hung_files, hung=True),
    "grep": Case({"pattern": "alpha", "path": "hung/data.txt"}, hung_files, hung=True),
    "search": Case({"query": "alpha"}, hung_files, hung=True),
    "question": Case({"questions": [{"question": "Which one?", "header": "Pick",
                                     "options": [{"label": "A", "description": "a"},
                                                 {"label": "B", "description": "b"}]}]}, person=True),
    "edit": Case({"path": "hung/data.txt", "old_string": "alpha", "new_string": "omega"}, hung_files, hung=True),
    "write": Case({"path": "hung/new.txt", "content": "new\n"}, hung_files, hung=True),
    "bash": Case({"command": "sleep 60"}),
    "bash_status": Case({"job_id": "j1", "wait_seconds": 60}),
    "notebook_edit": Case({"path": "hung/nb.ipynb", "action": "insert", "source": "x", "cell_type": "markdown"},
                          hung_files, hung=True),
    "notebook_run": Case({"path": "sleepy.ipynb"}, sleepy_notebook),
    "view_image": Case({"path": "hung/image.png"}, hung_files, hung=True),
    "describe_image": Case({"path": "shot.png"}, image, replies=[[HANG]]),
}
# Only the session's memory: nothing can make them wait. They must finish at once.
INSTANT = {
    "todowrite": {"todos": [{"content": f"step {i}", "status": "pending"} for i in range(200)]},
    "todoread": {},
    "bash_start": {"command": "sleep 60"},
    "bash_logs": {"job_id": "j1"},
    "bash_stop": {"job_id": "j1"},
    "skill": {"name": "no-such-skill"},
}


class NeverAnswers:
    """A person who is present but never answers a form."""

    person_present = True

    async def ask_questions(self, questions: Any) -> Any:
        await asyncio.Event().wait()

    async def ask_approval(self, request: Any) -> Any:
        await asyncio.Event().wait()


def make_session(ws: Path, replies: list, *, person: bool) -> Session:
    from crystal_kernel.jupyter import notebook_plugin

    notebook_plugin.register()  # a notebook session's catalog, as the kernel registers it
    provider = ScriptedProvider(list(replies), capabilities=Capabilities(images=True))
    return Session(workspace=ws, config=load_config(overrides={"approval": "full"}), provider=provider,
                   person_present=person, notebook=True)


#: The longest the event loop may go without running a ready task during a turn on the
#: hung mount. A file operation there blocks for 15 s; far above any scheduling delay.
LOOP_STALL_LIMIT = 5.0


async def longest_stall(done: asyncio.Event) -> float:
    """The longest gap, in seconds, between two ticks of a 0.05 s heartbeat on the event
    loop until ``done`` is set: blocking work on the loop shows as a gap that long."""
    longest, last = 0.0, time.monotonic()
    while not done.is_set():
        await asyncio.sleep(0.05)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    return longest


async def cancel_inside(session: Session, tool: str, interaction: Any, wait: Callable[[], bool]) -> tuple:
    """Run a turn, cancel it 0.5 s after ``tool`` started (and ``wait()`` holds);
    returns (seconds from the cancel to TurnEnd, events, the loop's longest stall)."""
    turn = run_turn(session, "go", interaction)
    events: list[Any] = []
    started = asyncio.Event()
    ended = asyncio.Event()
    heartbeat = asyncio.ensure_future(longest_stall(ended))

    async def consume() -> None:
        async for event in turn:
            events.append(event)
            if isinstance(event, ToolCallStarted) and event.name == tool:
                started.set()

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(started.wait(), 30)
    deadline = time.monotonic() + 10
    while not wait() and time.monotonic() < deadline:  # noqa: ASYNC110 - a thread sets it
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    cancelled_at = time.monotonic()
    turn.cancel()
    await asyncio.wait_for(task, 30)
    took = time.monotonic() - cancelled_at
    ended.set()
    return took, events, await heartbeat


@pytest.mark.parametrize("tool", sorted(SLOW))
async def test_cancelling_a_turn_inside_the_tool_ends_it_within_2_seconds(workspace, tool, monkeypatch):
    case = SLOW[tool]
    replies = [tool_reply([(tool, case.arguments)]), *case.replies, text_reply("done")]
    if tool == "bash_status":
        replies.insert(0, tool_reply([("bash_start", {"command": "sleep 60"})]))
    session = make_session(workspace, replies, person=case.person)
    if case.setup is not None:
        case.setup(workspace, session)
    mount = HungMount(workspace / "hung")
    if case.hung:
        mount.install(monkeypatch)
    try:
        took, events, stall = await cancel_inside(session, tool, NeverAnswers() if case.person else None,
                                                  mount.blocked.is_set if case.hung else (lambda: True))
    finally:
        mount.release.set()
        await session.close()
    if case.hung:
        assert mount.blocked.is_set(), f"{tool} never touched the hung mount: the case tests nothing"
    # A hung file operation on the event loop (before the tool starts too, e.g. the
    # approval preview's read) holds every other task of the host and the cancel.
    assert stall < LOOP_STALL_LIMIT, f"{tool}: the event loop was held for {stall:.1f} s during the turn"
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "cancelled", events[-3:]
    assert took < 2, f"{tool}: the turn ended {took:.1f} s after the cancel"
    result = [e for e in events if isinstance(e, ToolResultEvent) and e.name == tool][-1]
    assert result.status == "cancelled", (result.status, result.text[:300])


@pytest.mark.parametrize("tool", sorted(INSTANT))
async def test_tools_without_a_slow_input_finish_at_once(workspace, tool):
    replies = [tool_reply([(tool, INSTANT[tool])]), text_reply("done")]
    if tool in ("bash_logs", "bash_stop"):
        replies.insert(0, tool_reply([("bash_start", {"command": "yes | head -c 2000000; sleep 60"})]))
    session = make_session(workspace, replies, person=False)
    try:
        events = []
        started = time.monotonic()
        async for event in run_turn(session, "go"):
            events.append(event)
            if isinstance(event, ToolCallStarted) and event.name == tool:
                started = time.monotonic()
            if isinstance(event, ToolResultEvent) and event.name == tool:
                took = time.monotonic() - started
    finally:
        await session.close()
    # bash_stop stops a job: TERM, then KILL after the 1 s grace at most.
    assert took < (2 if tool == "bash_stop" else 0.5), f"{tool} took {took:.2f} s"


def exec_sleeper(ws: Path) -> str:
    from crystal_kernel.core.paths import home_dir

    folder = home_dir() / "tools" / "sleepy"
    folder.mkdir(parents=True)
    (folder / "tools.json").write_text(json.dumps({
        "command": [sys.executable, "-c", "import time; time.sleep(120)"],
        "tools": [{"name": "sleepy_wait", "output": "text", "timeoutSeconds": 100}]}))
    return "sleepy_wait"


def mcp_stdio(ws: Path) -> str:
    mcp_server(ws, None)  # type: ignore[arg-type]
    return "demo_slow"


@pytest.mark.parametrize("kind", ["mcp-stdio", "mcp-http", "exec"])
async def test_an_external_tool_that_never_answers_is_cancelled_within_2_seconds(workspace, tmp_path, kind):
    """MCP servers (stdio and streamable HTTP on loopback) and an exec tool that never
    answer: the turn still ends within 2 s of the cancel."""
    from crystal_kernel.core.paths import home_dir

    http = None
    if kind == "mcp-http":
        from tests.mcp.mcp_support import HttpServer, write_config

        http = HttpServer(tmp_path)
        http.start()
        write_config(home_dir() / "mcp.json", {"web": {"url": http.url}})
        tool, arguments = "web_slow", {"seconds": 60}
    elif kind == "mcp-stdio":
        tool, arguments = mcp_stdio(workspace), {"seconds": 60}
    else:
        tool, arguments = exec_sleeper(workspace), {}
    session = make_session(workspace, [tool_reply([(tool, arguments)]), text_reply("done")], person=False)
    try:
        took, events, _ = await cancel_inside(session, tool, None, lambda: True)
    finally:
        await session.close()
        if http is not None:
            http.kill()
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "cancelled", events[-3:]
    assert took < 2, f"{kind}: the turn ended {took:.1f} s after the cancel"
    result = [e for e in events if isinstance(e, ToolResultEvent) and e.name == tool][-1]
    assert result.status == "cancelled", (result.status, result.text[:300])


def test_every_builtin_tool_has_a_case():
    covered = set(SLOW) | set(INSTANT) | KERNEL_TOOLS
    assert covered == set(BUILTIN_TOOLS), sorted(set(BUILTIN_TOOLS) ^ covered)
