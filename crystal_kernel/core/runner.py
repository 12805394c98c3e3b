"""Run a coroutine to completion from synchronous code: the one bridge from sync
callers (a CLI subcommand, a test, a script) to the host's async paths, which are the
only implementation (no sync twins, docs/architecture.md).

Without a running event loop in the calling thread the coroutine runs on a new loop
in this thread. Called from inside a running loop (sync code a loop is executing), it
runs on a new loop in a worker thread while the caller waits: blocking, as any
synchronous call made on a loop blocks it, but never re-entering the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_completion(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end and return its result (or raise its exception)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    outcome: list[T] = []
    failure: list[BaseException] = []
    context = contextvars.copy_context()

    def main() -> None:
        try:
            outcome.append(context.run(asyncio.run, coro))
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    worker = threading.Thread(target=main, name="crystal-run-to-completion", daemon=True)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
