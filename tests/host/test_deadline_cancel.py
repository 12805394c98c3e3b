"""core.deadline.within (SPEC §13 "Waits"): a bounded wait that never loses
the caller's cancel. asyncio.wait_for before Python 3.12 returned the result when the
caller was cancelled in the moment the awaited thing finished, so an ACP turn stopped
just as the client answered its permission request ran on (seen in
tests/acp/test_acp_agent.py::test_cancel_while_a_permission_request_is_open)."""

from __future__ import annotations

import asyncio
from pathlib import Path

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


async def test_a_future_with_no_time_left_gives_its_result_when_done_and_is_cancelled_when_not():
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    done.set_result(7)
    assert await within(done, 0) == 7
    waiting: asyncio.Future[int] = loop.create_future()
    with pytest.raises(TimeoutError):
        await within(waiting, 0)
    assert waiting.cancelled()


# The places that may still use asyncio.wait_for: each waits while a front or a tool is
# being shut down or cleaned up, where a cancel lost in the same moment only lets the
# bounded cleanup finish. Anything a turn waits on (a person, the reviewer, a job, an MCP
# call, a side request, a server's start) goes through within().
CLEANUP_WAITS = {
    "crystal_kernel/acp/cli.py": "draining requests at the end of input",
    "crystal_kernel/acp/stdio.py": "flushing stdout at exit",
    "crystal_kernel/acp/agent.py": "closing a session at shutdown",
    "crystal_kernel/tools/bash.py": "reaping the shell and its supervisor after exit or stop",
    "crystal_kernel/tools/child_process.py": "reaping a stopped tree",
    "crystal_kernel/jupyter/magics.py": "closing the session when the extension unloads",
    "crystal_kernel/jupyter/kernel.py": "closing the session at kernel shutdown",
    "crystal_kernel/mcp/requests.py": "the best-effort cancel notice to a server",
}


def test_only_cleanup_paths_use_asyncio_wait_for():
    root = Path(__file__).resolve().parents[2]
    found = {str(p.relative_to(root)) for p in (root / "crystal_kernel").rglob("*.py")
             if "asyncio.wait_for(" in p.read_text()}
    assert found <= set(CLEANUP_WAITS), f"use core.deadline.within in: {sorted(found - set(CLEANUP_WAITS))}"
