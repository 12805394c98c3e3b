"""core.deadline.within (SPEC §13 "Waits"): a bounded wait that never loses
the caller's cancel. asyncio.wait_for before Python 3.12 returned the result when the
caller was cancelled in the moment the awaited thing finished, so an ACP turn stopped
just as the client answered its permission request ran on (seen in
tests/acp/test_acp_agent.py::test_cancel_while_a_permission_request_is_open)."""

from __future__ import annotations

import asyncio

import pytest

from crystal_kernel.core.deadline import within


async def test_a_cancel_at_the_moment_of_the_answer_is_kept():
    answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waiter() -> int:
        return await within(_await(answer), 30)

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0.01)  # the waiter is waiting
    answer.set_result(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_deadline_cancels_the_awaited_and_raises_timeout():
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await within(slow(), 0.1)
    assert started.is_set() and cancelled.is_set()


async def test_zero_runs_nothing():
    ran = False

    async def job() -> None:
        nonlocal ran
        ran = True

    with pytest.raises(TimeoutError):
        await within(job(), 0)
    assert not ran
    assert await within(asyncio.sleep(0, "done"), None) == "done"


async def _await(future: asyncio.Future[int]) -> int:
    return await future
