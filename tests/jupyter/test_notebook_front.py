"""One NotebookFront (jupyter/notebook_front.py) that the Crystal kernel and the magics
compose (SPEC §11): the steps after the front door, written once. Here on real sessions
and real files, without a kernel: what the kernel's front does (continue the notebook's
session, name it current) and the magics' does not; a fork gets the notebook attached
afresh (its Trust cards shown again, TRUST-2); the session is remembered for the
notebook; a live view spawned from the magics' worker loop runs on the kernel's loop.
The kernel's and the magics' own tests (tests/jupyter, tests/magics) drive both fronts
end to end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.jupyter import notebook_identity
from crystal_kernel.jupyter.notebook_front import NotebookFront
from crystal_kernel.jupyter.notebook_map import notebooks_by_session
from crystal_kernel.testing.scripted import ScriptedProvider


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Session]:
    monkeypatch.setenv("JPY_SESSION_NAME", "analysis.ipynb")
    notebook_identity.reset()
    return []


def _front(tmp_path: Path, opened: list[Session], *, kernel: bool) -> NotebookFront:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)

    def door() -> Session:
        session = Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider(), notebook=True)
        opened.append(session)
        return session

    return NotebookFront(object(), open_session=door, continues_notebook=kernel, unattended=False)


def test_the_kernels_front_opens_once_attaches_and_remembers(tmp_path: Path, opened: list[Session]) -> None:
    front = _front(tmp_path, opened, kernel=True)
    front.remember()  # no session yet: nothing to remember, nothing fails
    session = front.ensure_session()
    assert front.ensure_session() is session and opened == [session]
    assert front.session is session and front.state is not None
    assert session.notebook_path == "analysis.ipynb" and session.tool_context(NoPerson()).notebook_shell is front.shell
    assert notebook_identity.current() == session.id
    front.remember()
    assert notebooks_by_session(session.workspace) == {session.id: "analysis.ipynb"}
    session.release_lock()


def test_a_fork_is_attached_afresh(tmp_path: Path, opened: list[Session]) -> None:
    front = _front(tmp_path, opened, kernel=True)
    parent = front.ensure_session()
    assert front.state is not None and front.state.first_offer(("mcp.json", "d1"))
    assert not front.state.first_offer(("mcp.json", "d1"))  # once per session
    child = parent.fork()
    front.attach(child)
    front.remember()
    assert front.session is child and notebook_identity.current() == child.id
    assert front.state.first_offer(("mcp.json", "d1"))  # the fork shows its cards again
    assert notebooks_by_session(child.workspace)[child.id] == "analysis.ipynb"
    child.release_lock()


def test_the_magics_front_neither_continues_nor_names_the_session_current(tmp_path: Path,
                                                                          opened: list[Session]) -> None:
    front = _front(tmp_path, opened, kernel=False)
    session = front.ensure_session()
    front.remember()
    assert notebook_identity.current() is None
    assert notebooks_by_session(session.workspace) == {session.id: "analysis.ipynb"}
    session.release_lock()


async def test_a_view_spawned_on_the_worker_loop_runs_on_the_kernels_loop(tmp_path: Path,
                                                                          opened: list[Session]) -> None:
    front = _front(tmp_path, opened, kernel=False)
    front.main_loop = asyncio.get_running_loop()
    ran_on: list[int] = []
    done = asyncio.Event()

    async def view() -> None:
        ran_on.append(threading.get_ident())
        done.set()

    def worker() -> None:
        asyncio.run(_spawn(front, view()))

    thread = threading.Thread(target=worker)
    thread.start()
    await asyncio.wait_for(done.wait(), timeout=30)
    thread.join(timeout=30)
    assert ran_on == [threading.get_ident()]


async def _spawn(front: NotebookFront, coro: Coroutine[Any, Any, None]) -> None:
    assert front.spawn(coro) is None  # handed to the kernel's loop
