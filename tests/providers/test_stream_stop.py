"""ROBUST-3: a person's Stop ends a streaming answer even when it lands in the very
moment a chunk arrives.

Before Python 3.12, ``asyncio.wait_for`` returns the awaited result and drops a cancel
that reaches the waiting task after the result is in but before the task resumes. The
magics' stop button hit exactly that (tests/magics/test_magic_interactive.py's interrupt
test failed about one run in five under load): the SIGINT handler scheduled the cancel
while the kernel was busy sending the previous chunk to the front, the next chunk
completed in the same loop pass, the cancel was lost, and the turn sat out the server's
hang. The stream here is a stand-in for the SDK's (the real idle bound around it):
it hands over its first chunk and schedules the cancel in that same step, then hangs
like the loopback server's ``hang`` reply; no real server can time a cancel to one loop
pass.
"""

from __future__ import annotations

import asyncio

from crystal_kernel.providers.common import idle_bounded
from crystal_kernel.providers.errors import Endpoint

ENDPOINT = Endpoint(url="http://127.0.0.1:9/v1", model="m")


class ChunkThenHang:
    """An SSE stream whose first chunk arrives together with the person's Stop
    (scheduled in the same step), after which the server stops sending."""

    def __init__(self) -> None:
        self.consumer: asyncio.Task[list[str]] | None = None
        self.sent = 0

    def __aiter__(self) -> ChunkThenHang:
        return self

    async def __anext__(self) -> str:
        if self.sent == 0:
            self.sent = 1
            assert self.consumer is not None
            asyncio.get_running_loop().call_soon(self.consumer.cancel)
            return "part"
        await asyncio.Event().wait()  # a server that stopped sending
        raise StopAsyncIteration


async def test_a_stop_landing_as_a_chunk_arrives_ends_the_stream_at_once():
    stream = ChunkThenHang()
    seen: list[str] = []

    async def consume() -> list[str]:
        async for item in idle_bounded(stream, 30.0, ENDPOINT):
            seen.append(item)
        return seen

    stream.consumer = asyncio.ensure_future(consume())
    done, _ = await asyncio.wait({stream.consumer}, timeout=3)
    try:
        assert stream.consumer in done, f"the stop was lost; the stream went on waiting (saw {seen})"
        assert stream.consumer.cancelled()
    finally:
        stream.consumer.cancel()
