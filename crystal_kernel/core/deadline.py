"""Awaiting something for at most a number of seconds, without losing a cancel.

``asyncio.wait_for`` before Python 3.12 swallows a cancel of the waiting task when the
awaited one finishes in the same moment (a turn stopped just as the person answered
would run on); ``asyncio.timeout`` is 3.11 and later. :func:`within` runs the awaitable
as its own task and waits for it with ``asyncio.wait``, which never absorbs a cancel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar, cast

T = TypeVar("T")


async def within(coroutine: Awaitable[T], seconds: float | None) -> T:
    """The result of ``coroutine`` (any awaitable: an async iterator's ``__anext__()``
    too), or TimeoutError (it cancelled) after ``seconds`` (None: no limit; 0 or less:
    it is not run at all; a future that is already done gives its result, one that is not
    is cancelled). A cancel of the caller cancels it."""
    if seconds is not None and seconds <= 0:
        if isinstance(coroutine, asyncio.Future):
            if coroutine.done():
                return cast(T, coroutine.result())
            coroutine.cancel()
        else:
            close = getattr(coroutine, "close", None)
            if close is not None:
                close()
        raise TimeoutError
    task = asyncio.ensure_future(coroutine)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:
                pass
    if task not in done:
        raise TimeoutError
    return task.result()
