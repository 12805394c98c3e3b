"""The synchronous form of the magic (``answer = %crystal PROMPT``).

Synchronous code runs inside ipykernel's event loop, which cannot be re-entered (and
nest_asyncio breaks ipykernel 7, DESIGN.md). So the turn runs on a worker thread with
its own event loop while the cell's thread waits. The worker runs in a copy of the
cell's context, so everything it displays lands in the cell. Comm messages are not
handled while the cell's thread waits, so this form shows no widgets: questions are
unavailable and calls that need approval are denied.

Ctrl-C / the stop button (SIGINT) reaches the waiting thread as KeyboardInterrupt; it
cancels the turn, and stops user code the python tool is running on the worker with an
asynchronous KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from IPython.core.error import UsageError

from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter.magics_args import CellPlan, MagicOptions, interpolate, plan
from crystal_kernel.jupyter.notebook_turn import TurnOutcome

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

T = TypeVar("T")

SYNC_NOTE = ("Synchronous call (x = %crystal …): no widgets here, so questions are unavailable and calls "
             "that need approval are denied. A %%crystal cell is interactive.")
# After an interrupt, how long the cell waits for the worker to wind down.
GIVE_UP_SECONDS = 15.0


class TurnInterrupted(KeyboardInterrupt):
    """The turn was interrupted; IPython shows one line instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


class TurnFailed(Exception):
    """The turn ended with an error (already shown in the cell)."""

    def _render_traceback_(self) -> list[str]:
        return [f"CrystalError: {self}"]


def raise_in_thread(ident: int, exc_type: type[BaseException] = KeyboardInterrupt) -> bool:
    """Raise ``exc_type`` in thread ``ident`` at its next Python instruction."""
    done: int = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc_type))
    return done == 1


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]], on_interrupt: Callable[[int], None]) -> tuple[T | None, bool]:
    """Run ``make()`` on a worker thread's event loop and wait for it.

    Returns (its value, whether an interrupt arrived). Its exception is re-raised here.
    ``on_interrupt(worker_ident)`` is called for every KeyboardInterrupt while waiting.
    """
    ctx = contextvars.copy_context()
    values: list[T] = []
    errors: list[BaseException] = []
    # An Event, not Thread.join: a KeyboardInterrupt inside join() can leave the thread
    # looking finished while it still runs.
    done = threading.Event()

    def target() -> None:
        try:
            values.append(ctx.run(asyncio.run, make()))
        except BaseException as exc:  # handed to the waiting thread
            errors.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=target, name="crystal-sync-turn", daemon=True)
    worker.start()
    interrupted_at: float | None = None
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted_at = interrupted_at or time.monotonic()
            assert worker.ident is not None
            on_interrupt(worker.ident)
        if interrupted_at is not None and time.monotonic() - interrupted_at > GIVE_UP_SECONDS:
            raise TurnInterrupted(f"The turn did not stop within {GIVE_UP_SECONDS:g} seconds; "
                                  "it goes on in the background.")
    if errors:
        raise errors[0]
    return (values[0] if values else None), interrupted_at is not None


def raise_for(outcome: TurnOutcome) -> None:
    if outcome.stop_reason == "cancelled":
        raise TurnInterrupted("The turn was interrupted.")
    if outcome.stop_reason == "error":
        raise TurnFailed(outcome.errors[0] if outcome.errors else "The turn failed.")


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class SyncForm(ABC):
    """The synchronous form's part of :class:`crystal_kernel.jupyter.magics.MagicsHost`
    (a mixin: it uses the host's session, options and turn machinery, declared here)."""

    shell: Any
    crystal: Any  # the host's Session, None until the first turn or command opens it
    _main_loop: asyncio.AbstractEventLoop | None
    _turn_loop: asyncio.AbstractEventLoop | None
    _stop_requested: bool

    @abstractmethod
    def skipped_in_notebook_run(self) -> bool:
        """Whether a prompt is skipped because a notebook run is replaying this cell."""

    @abstractmethod
    def _refuse_if_busy(self) -> None:
        """A UserError while a turn runs."""

    @abstractmethod
    async def apply(self, opts: MagicOptions) -> list[str]:
        """Apply the magic's option flags to the session; the lines that say what changed."""

    @abstractmethod
    def _show_status(self, lines: list[str]) -> None:
        """Show the status line (an option-only call)."""

    @abstractmethod
    async def _commands(self, lines: list[str]) -> None:
        """Run slash commands and show their answers."""

    @abstractmethod
    def ensure_session(self, opts: MagicOptions | None = None) -> Session:
        """The host's session, opened on first use."""

    @abstractmethod
    async def _turn_run(self, text: str, notes: list[str], interactive: bool) -> TurnOutcome:
        """One turn, rendered into the cell."""

    @abstractmethod
    def _cancel_turn(self) -> None:
        """Cancel the running turn (on the turn's loop)."""

    def open_cell(self, line: str, body: str | None) -> tuple[MagicOptions, CellPlan, str, list[str]] | None:
        """How both forms of the magic start: what the cell asks, and for a prompt its
        text with the notebook's ``{name}`` values filled in and the notes saying so;
        None when a notebook run replaying this cell skips its prompt. Bad input is a
        UserError."""
        opts, cell = plan(line, body)
        prompt = cell.prompt
        notes: list[str] = []
        if cell.what == "prompt":
            if self.skipped_in_notebook_run():
                return None
            prompt, notes = interpolate(prompt, self.shell.user_ns)
        return opts, cell, prompt, notes

    def run_sync(self, line: str, body: str | None) -> str | None:
        """Run the magic synchronously: the final answer's text for a turn, None for
        commands and option-only calls. Bad input is a one-line UsageError."""
        try:
            opened = self.open_cell(line, body)
            if opened is None:
                return None
            opts, cell, prompt, notes = opened
            what = cell.what
            if what == "prompt" or opts.any():
                self._refuse_if_busy()  # commands and the status line may run during a turn
        except UserError as exc:
            raise UsageError(str(exc)) from None
        self._main_loop = running_loop()
        self._stop_requested = False
        self._turn_loop = None

        async def work() -> TurnOutcome | None:
            shown = await self.apply(opts)
            if what == "status":
                self._show_status(shown)
                return None
            if what == "commands" and self.crystal is not None and self.crystal.busy:
                # From the python tool during a turn: the turn owns the session's clients,
                # so nothing is swapped; commands that would change the session refuse.
                await self._commands(list(cell.commands))
                return None
            async with self._worker_clients(self.ensure_session(), person=(what == "prompt")):
                if what == "commands":
                    await self._commands(list(cell.commands))
                    return None
                return await self._turn_run(prompt, [*shown, SYNC_NOTE, *notes], interactive=False)

        try:
            outcome, interrupted = run_blocking(work, self._interrupt_worker)
        except UserError as exc:
            raise UsageError(str(exc)) from None
        if outcome is None:
            if interrupted:
                raise TurnInterrupted("Interrupted.")
            return None
        raise_for(outcome)
        return outcome.text

    def _interrupt_worker(self, ident: int) -> None:
        from crystal_kernel.jupyter.notebook_tools import sync_code_running

        self._stop_requested = True
        if sync_code_running():
            raise_in_thread(ident)
        loop = self._turn_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_turn)

    @asynccontextmanager
    async def _worker_clients(self, session: Any, *, person: bool) -> AsyncIterator[None]:
        """On the worker's loop, use a provider (and reviewer) of its own: HTTP
        connections belong to the loop that opened them. No person answers here."""
        from crystal_kernel.providers.registry import make_provider

        async with session.lend_provider(make_provider(session.config, workspace=session.workspace),
                                         without_person=person):
            yield
