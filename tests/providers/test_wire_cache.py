"""The transcript's wire form kept between requests (providers/wire_cache.py) is what
converting the whole transcript again gives, whatever happens to the transcript between
two requests (growth, interrupted calls, orphan results, compaction's replacement), and
the body bytes are exactly the SDK's own encoding (PROV-1 wire shape unchanged)."""

from __future__ import annotations

import json
import random

import pytest
from openai._utils._json import openapi_dumps

from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.prefix import PrefixFold, common_prefix
from crystal_kernel.providers.base import ModelRequest
from crystal_kernel.providers.openai_chat import chat_entries, chat_messages
from crystal_kernel.providers.wire_cache import Body, JsonArray, PairedWire, encode_body


def _message(rng: random.Random, i: int) -> Message:
    r = rng.random()
    if r < 0.3:
        return Message.user_text(f"u{i} ü \"q\"\t")
    if r < 0.55:  # calls whose ids may or may not be answered next
        calls = [ToolCallPart(id=f"c{rng.randint(0, 30)}", name="read", arguments={"p": i})
                 for _ in range(rng.randint(0, 2))]
        return Message(role="assistant", parts=[TextPart(text=f"a{i}"), *calls])
    if r < 0.85:  # results, some answering no call (dropped when sent)
        return Message(role="user", parts=[ToolResultPart(call_id=f"c{rng.randint(0, 30)}", name="read",
                                                          ok=rng.random() < 0.5, text=f"r{i} ✓")
                                           for _ in range(rng.randint(1, 2))])
    return Message(role="assistant", parts=[TextPart(text=f"t{i}")])


@pytest.mark.parametrize("block", [PairedWire.BLOCK, 60])  # 60 bytes: blocks sealed and cut often
def test_kept_wire_form_equals_converting_the_whole_transcript_each_time(block: int) -> None:
    rng = random.Random(7)
    sealed = 0
    for _ in range(120):
        wire = PairedWire(lambda m: chat_entries(m, False))
        wire.BLOCK = block
        messages: list[Message] = []
        for _ in range(25):
            op = rng.random()
            if op < 0.7 or not messages:
                messages = messages + [_message(rng, len(messages)) for _ in range(rng.randint(1, 3))]
            elif op < 0.85:  # compaction-like: a shorter transcript
                messages = messages[: rng.randint(0, len(messages))]
            else:  # one message replaced
                k = rng.randint(0, len(messages) - 1)
                messages = [*messages[:k], _message(rng, k), *messages[k + 1:]]
            entries, chunks = wire(messages)
            expected = chat_messages(ModelRequest(model="m", system="", messages=messages, tools=[]), False)
            assert entries == expected
            assert json.loads(b"".join(JsonArray(entries, chunks).pieces())) == expected
            body = {"model": "m", "messages": entries, "max_tokens": 5, "other": [1.5, None, "é"]}
            assert bytes(encode_body(body, {"messages": JsonArray(entries, chunks)})) == openapi_dumps(body)
            sealed += len(wire._blocks)
    assert (sealed > 0) == (block < 1000)


def test_a_list_that_is_not_the_kept_one_is_encoded_whole() -> None:
    body = {"messages": [{"role": "user", "content": "fresh"}]}
    stale = JsonArray([{"role": "user", "content": "stale"}], [b',{"role":"user","content":"stale"}'])
    assert bytes(encode_body(body, {"messages": stale})) == openapi_dumps(body)
    assert bytes(encode_body({}, {})) == openapi_dumps({})


async def test_a_body_is_sent_as_its_pieces_in_bounded_chunks_and_again_for_a_retry() -> None:
    rng = random.Random(3)
    small = Body.CHUNK // 50
    pieces = [bytes([65 + rng.randint(0, 25)]) * rng.randint(0, small) for _ in range(400)]
    pieces[17] = b"x" * (Body.CHUNK * 2)  # a piece larger than a chunk goes whole, uncopied
    body = Body(pieces)
    assert len(body) == len(bytes(body)) == sum(map(len, pieces))
    sent = [chunk async for chunk in body]
    assert b"".join(sent) == bytes(body)
    assert any(chunk is pieces[17] for chunk in sent)
    assert all(len(chunk) < Body.CHUNK + small for chunk in sent if chunk is not pieces[17])
    assert len(sent) < 2 * len(bytes(body)) // Body.CHUNK + 3  # gathered, not one write a piece
    assert [chunk async for chunk in body] == sent  # a retry sends the same text again
    assert bytes(Body([])) == b"" and [chunk async for chunk in Body([])] == []


def test_prefix_fold_adds_only_what_is_new_and_forgets_what_changed() -> None:
    calls: list[int] = []

    def step(total: int, item: list[int]) -> int:
        calls.append(item[0])
        return total + item[0]

    a, b, c, d = [1], [2], [3], [4]
    fold = PrefixFold(step, 0)
    assert fold([a, b, c]) == 6 and calls == [1, 2, 3]
    assert fold([a, b, c, d]) == 10 and calls == [1, 2, 3, 4]
    assert fold([a, d]) == 5 and calls[-1] == 4 and len(calls) == 5
    assert common_prefix([a, b], [a, [2]]) == 1 and common_prefix([a], [a, b]) == 1
