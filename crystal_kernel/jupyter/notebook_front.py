"""The notebook front: what the Crystal kernel and the ``%crystal`` magics share after
the front door (SPEC §11).

Both open their session through ``host.bootstrap.open_session`` (each its own way: the
kernel withdraws the key variables, the magics take their options) and then do the same
steps, here once: attach the notebook to the session (:class:`NotebookState`), remember
the session for the notebook (the notebook map, which /resume and /sessions read), run
what a command leaves running (``/logs --follow``, the ``/jobs`` table). Only the
kernel continues the notebook's own session (``metadata.crystal.session_id``) and names
it as the kernel's current one (notebook_identity); the magics' synchronous form runs
on a worker loop, so a task it spawns goes to the kernel's loop (``main_loop``).

:class:`NotebookState` is what the front attaches to its session (the IPython shell,
the notebook's path, live editing: the host's
:class:`~crystal_kernel.core.notebook.NotebookAttachment`, which the tools reach through
their ToolContext) plus what only the notebook's page needs: the Trust cards already
shown (TRUST-2, jupyter/trust_view.py). One per attached session: a fork or a new
session starts with no card shown.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.notebook import NotebookAttachment
from crystal_kernel.jupyter import notebook_identity

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


@dataclass
class NotebookState(NotebookAttachment):
    """A notebook's side of one session."""

    # Untrusted workspace files a Trust card was shown for: (path, digest) pairs.
    trust_offered: set[tuple[str, str]] = field(default_factory=set)

    def first_offer(self, key: tuple[str, str]) -> bool:
        """True the first time a Trust card for this (path, digest) is offered here;
        False after: each card is shown once per session."""
        if key in self.trust_offered:
            return False
        self.trust_offered.add(key)
        return True


def attach_notebook(session: Session, shell: Any, notebook: str | None) -> NotebookState:
    """Give a session what only a notebook has: the IPython shell (notebook tools), the
    notebook's path, and live editing of notebooks open in JupyterLab."""
    from crystal_kernel.jupyter import notebook_plugin
    from crystal_kernel.jupyter.live_notebook import live_edit

    notebook_plugin.register()  # the notebook tools come from this front
    state = NotebookState(shell=shell, path=notebook, live_edit=live_edit)
    session.attach_notebook(state)
    return state


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class NotebookFront:
    """One notebook's session and the steps after the front door.

    ``open_session``: the front's door (called on first use); ``continues_notebook``:
    the Crystal kernel (it continues the notebook's session and names it current); the
    magics do neither. ``unattended``: under replay the cassette answers (the question
    tool stays offered). ``log``: where a problem remembering the session is written
    (None: it is dropped, a convenience that never fails a cell)."""

    def __init__(self, shell: Any, *, open_session: Callable[[], Session], continues_notebook: bool,
                 unattended: bool, log: Any = None) -> None:
        self.shell = shell
        self.notebook = os.environ.get("JPY_SESSION_NAME")  # the name the kernel started with
        self.session: Session | None = None
        self.state: NotebookState | None = None  # this notebook's side of the session
        # The loop spawned tasks run on when the caller is another (the magics' worker).
        self.main_loop: asyncio.AbstractEventLoop | None = None
        self._open = open_session
        self._continues = continues_notebook
        self._unattended = unattended
        self._log = log
        self._background: set[asyncio.Task[None]] = set()

    # ----- the session ------------------------------------------------------------------------
    def ensure_session(self) -> Session:
        """The session, opened (and, in the kernel, continued) on first use."""
        if self.session is None:
            session = self._open()
            if self._continues:
                from crystal_kernel.host.recorded_person import adopt_replayed_person
                from crystal_kernel.jupyter.notebook_session import continue_notebook_session

                adopt_replayed_person(session, self._unattended)  # before it resumes: replay answers
                continue_notebook_session(session)
            self.attach(session)
            return session
        return self.session

    def attach(self, session: Session) -> None:
        """Make ``session`` this notebook's (first use, a fork, ``--new``)."""
        from crystal_kernel.host.recorded_person import adopt_replayed_person

        adopt_replayed_person(session, self._unattended)  # replay: the cassette answers
        self.state = attach_notebook(session, self.shell, self.notebook)
        self.session = session
        if self._continues:
            notebook_identity.set_current(session.id)

    def remember(self) -> None:
        """Remember the session for this notebook, by the notebook's name now (after a
        rename or move) when the page said it; the sidebar and /sessions name it so."""
        from crystal_kernel.jupyter.notebook_map import remember_session

        if self.session is None:  # no session yet: nothing to remember
            return
        if self._continues:
            notebook_identity.set_current(self.session.id)  # after /resume, too
        problem = remember_session(self.session, notebook_identity.notebook_path() or self.notebook)
        if problem and self._log is not None:
            self._log.warning("%s", problem)

    # ----- tasks that outlive the cell ----------------------------------------------------------
    def track(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
        """A task that outlives the cell (``/logs --follow``, the ``/jobs`` table), on
        the kernel's loop even when the caller runs on the magics' worker loop."""
        loop, running = self.main_loop, _running_loop()
        if running is not None and (loop is None or running is loop):
            return self.track(asyncio.ensure_future(coro))
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: self.track(asyncio.ensure_future(coro)))
            return None
        coro.close()
        from crystal_kernel.jupyter.render import IPythonOutput, Renderer

        Renderer(IPythonOutput()).show_note(
            "Live updates need a running kernel event loop; the view shows its first state only.")
        return None

    def cancel_background(self) -> None:
        """Cancel the tasks spawned (shutdown, unloading the extension)."""
        for task in list(self._background):
            task.cancel()
