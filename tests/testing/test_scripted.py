"""The in-process scripted provider used by host tests."""

from __future__ import annotations

import asyncio
import json

import pytest

from crystal_kernel.core.errors import ProviderError
from crystal_kernel.core.messages import Message
from crystal_kernel.providers.base import Finished, ModelRequest, Provider, TextChunk, ToolCallChunk, UsageChunk
from crystal_kernel.testing import HANG, Delay, Fail, ScriptedProvider, text_reply, tool_reply


def _req(text: str = "hi") -> ModelRequest:
    return ModelRequest(model="scripted", system="sys", messages=[Message.user_text(text)])


async def _collect(provider: ScriptedProvider, request: ModelRequest) -> list:
    return [item async for item in provider.stream(request)]


async def test_scripted_plays_replies_in_order_and_records_requests() -> None:
    p = ScriptedProvider([
        text_reply("hello", chunk=2),
        tool_reply([("write", {"path": "a.txt", "content": "x"}), ("bash", {"command": "cat a.txt"})], text="ok"),
        lambda req: [TextChunk(f"echo {req.messages[-1].text()}")],
    ])
    assert isinstance(p, Provider)
    first = await _collect(p, _req("one"))
    assert "".join(i.text for i in first if isinstance(i, TextChunk)) == "hello"
    assert [i.text for i in first if isinstance(i, TextChunk)] == ["he", "ll", "o"]
    assert first[-2:] == [UsageChunk(10, 5), Finished("end_turn")]
    second = await _collect(p, _req("two"))
    calls = [i for i in second if isinstance(i, ToolCallChunk)]
    assert [c.name for c in calls] == ["write", "bash"]
    assert json.loads(calls[0].arguments) == {"path": "a.txt", "content": "x"}
    assert len({c.id for c in calls}) == 2
    assert second[-1] == Finished("tool_use")
    third = await _collect(p, _req("three"))
    assert third == [TextChunk("echo three"), Finished("end_turn")]
    assert [r.messages[-1].text() for r in p.requests] == ["one", "two", "three"]
    with pytest.raises(AssertionError, match="ran out of replies: 3 scripted"):
        await _collect(p, _req())


async def test_scripted_fail_keeps_earlier_items_and_exception_reply() -> None:
    p = ScriptedProvider([
        [TextChunk("part"), Fail(ProviderError("The stream broke."))],
        ProviderError("down"),
    ])
    got = []
    with pytest.raises(ProviderError, match="stream broke"):
        async for item in p.stream(_req()):
            got.append(item)
    assert got == [TextChunk("part")]
    with pytest.raises(ProviderError, match="down"):
        await _collect(p, _req())


async def test_scripted_hang_is_cancellable_promptly() -> None:
    p = ScriptedProvider([[Delay(0.01), TextChunk("a"), HANG]], hang_timeout=10)
    task = asyncio.create_task(_collect(p, _req()))
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    start = loop.time()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loop.time() - start < 1
    assert p.cancelled == 1


async def test_scripted_records_a_snapshot_of_each_request() -> None:
    p = ScriptedProvider([text_reply("a"), text_reply("b")])
    transcript = [Message.user_text("one")]
    await _collect(p, ModelRequest(model="m", system="s", messages=transcript))
    transcript.append(Message.user_text("two"))
    await _collect(p, ModelRequest(model="m", system="s", messages=transcript))
    assert [len(r.messages) for r in p.requests] == [1, 2]
