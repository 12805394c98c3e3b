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
from typing import Any, Awaitable, Callable

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
    done = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc_type))
    return done == 1


def run_blocking(make: Callable[[], Awaitable[Any]], on_interrupt: Callable[[int], None]) -> tuple[Any, bool]:
    """Run ``make()`` on a worker thread's event loop and wait for it.

    Returns (its value, whether an interrupt arrived). Its exception is re-raised here.
    ``on_interrupt(worker_ident)`` is called for every KeyboardInterrupt while waiting.
    """
    ctx = contextvars.copy_context()
    box: dict[str, Any] = {}
    # An Event, not Thread.join: a KeyboardInterrupt inside join() can leave the thread
    # looking finished while it still runs.
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = ctx.run(asyncio.run, make())
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc
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
    if "error" in box:
        raise box["error"]
    return box.get("value"), interrupted_at is not None
