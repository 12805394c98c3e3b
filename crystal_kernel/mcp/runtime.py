"""The one event loop every MCP connection of this process lives on.

Why a loop of its own, on a long-lived daemon thread:

- The fronts' event loops (kernel, CLI, ACP) must keep serving while servers start:
  ``Session.prepare_tools()`` awaits the start here (the only way a catalog is built;
  code without a loop runs it with ``core.runner.run_to_completion``).
- The SDK's transports are anyio task groups that must be entered and left by one
  task; each connection keeps one task here for its whole life.
- Stdio servers run under the jobs supervisor with ``PR_SET_PDEATHSIG``, which Linux
  fires when the *thread* that forked the child ends. This thread lives as long as the
  process, so the signal means exactly "the host is gone" (SIGKILL included).

Callers in another loop await :func:`run` (cancellation reaches the task here; the SDK
then sends ``notifications/cancelled`` to the server); :func:`run_sync` serves the
few synchronous steps (parking a listing's servers off the loop, the exit handler).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from crystal_kernel.core.deadline import within

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The MCP loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            ready = threading.Event()
            holder: list[asyncio.AbstractEventLoop] = []

            def main() -> None:
                new = asyncio.new_event_loop()
                asyncio.set_event_loop(new)
                holder.append(new)
                ready.set()
                new.run_forever()

            # Crystal reports server failures itself, in English, to the person and the
            # model; without a handler the SDK's own log records would reach stderr via
            # logging's last resort (tracebacks in the middle of a CLI answer).
            for name in ("mcp", "httpx", "httpcore"):
                logging.getLogger(name).addHandler(logging.NullHandler())
            _thread = threading.Thread(target=main, name="crystal-mcp", daemon=True)
            _thread.start()
            ready.wait()
            _loop = holder[0]
        return _loop


def on_mcp_loop() -> bool:
    """Whether the caller is running on the MCP loop's thread."""
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the MCP loop from any thread."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


async def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Await ``coro`` on the MCP loop from another loop. Cancelling the caller cancels
    the task there; ``timeout`` (seconds) is a last guard, the SDK has its own."""
    future = asyncio.wrap_future(submit(coro))
    if timeout is None:
        return await future
    return await within(future, timeout)


def run_sync(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Block the calling thread (never the MCP loop's own) for at most ``timeout`` s."""
    if on_mcp_loop():
        raise RuntimeError("run_sync called on the MCP loop itself")
    future = submit(coro)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"gave up after {timeout:g} seconds") from None


async def gather_bounded(coros: list[Awaitable[Any]], timeout: float) -> list[Any]:
    """Run ``coros`` at once on the current loop; results or exceptions, in order."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    out: list[Any] = []
    for task in tasks:
        if task in pending:
            out.append(TimeoutError(f"gave up after {timeout:g} seconds"))
        elif task.exception() is not None:
            out.append(task.exception())
        else:
            out.append(task.result())
    return out
