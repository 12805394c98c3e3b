"""Prompt-cache breakpoints on the Anthropic wire (bench/bench_cost.py reports them).

The adapter sends through the official ``anthropic`` SDK (AsyncAnthropic) to the
loopback server; the test reads the bodies as the server received them. The Messages
API caches the prefix up to a ``cache_control`` block, in the order tools, system,
messages, and refuses more than four breakpoints: one on the system text covers the
tools and the system; one on the newest message covers the whole history, and the next
step's request finds it again by looking back from its own newest message.
"""

from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.providers.base import ModelRequest
from crystal_kernel.testing.llm_server import LLMServer

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [ToolSpec(name, f"The {name} tool.", {"type": "object", "properties": {"path": {"type": "string"}}})
         for name in ("read", "edit")]


def markers(value: Any, where: str = "") -> list[str]:
    """Where ``cache_control`` sits in ``value``, as dotted paths."""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(where)
        for key, item in value.items():
            found += markers(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += markers(item, f"{where}[{index}]")
    return found


def step(n: int) -> list[Message]:
    """The assistant's n-th tool call and its result."""
    return [Message(role="assistant", parts=[TextPart(text=f"Step {n}."),
                                             ToolCallPart(id=f"c{n}", name="read", arguments={"path": f"f{n}"})]),
            Message(role="user", parts=[ToolResultPart(call_id=f"c{n}", name="read", ok=True, text=f"body {n}")])]


async def _drain(provider: Any, request: ModelRequest) -> None:
    async for _ in provider.stream(request):
        pass


async def test_breakpoints_on_system_and_newest_message_only_at_every_step(server: LLMServer, adapter) -> None:
    provider = adapter("anthropic")
    assert isinstance(provider.client, AsyncAnthropic)  # the official SDK puts the body on the wire
    transcript = [Message.user_text("Fix the bug.")]
    for n in range(4):
        server.add({"text": "ok"})
        await _drain(provider, ModelRequest(model="claude-sonnet-4-6", system="You are Crystal.",
                                            messages=list(transcript), tools=TOOLS))
        transcript += step(n)
    bodies = server.bodies("anthropic")
    assert len(bodies) == 4
    for body in bodies:
        last = len(body["messages"]) - 1
        blocks = len(body["messages"][last]["content"]) - 1
        # Two of the API's four: the tools sit before the system, so its marker caches them too.
        assert sorted(markers(body)) == [f"messages[{last}].content[{blocks}]", "system[0]"]
        assert body["system"][0]["cache_control"] == EPHEMERAL
        assert body["messages"][last]["content"][blocks]["cache_control"] == EPHEMERAL
    # The newest message of one step is an older message of the next: unmarked there, and the
    # prefix up to it is byte-for-byte the same apart from the marker.
    first, second = bodies[1]["messages"], bodies[2]["messages"]
    assert second[: len(first) - 1] == first[:-1]
    moved = dict(first[-1]["content"][-1])
    assert moved.pop("cache_control") == EPHEMERAL and second[len(first) - 1]["content"][-1] == moved
    assert bodies[1]["tools"] == bodies[2]["tools"] and bodies[1]["system"] == bodies[2]["system"]


async def test_sdk_create_with_the_adapters_body_puts_the_same_markers_on_the_wire(server: LLMServer,
                                                                                  adapter) -> None:
    """The body the adapter builds, sent by the SDK's own ``messages.create``, reaches the
    server with the same breakpoints: the SDK keeps ``cache_control`` as given."""
    provider = adapter("anthropic")
    request = ModelRequest(model="claude-sonnet-4-6", system="You are Crystal.",
                           messages=[Message.user_text("Fix the bug."), *step(0)], tools=TOOLS)
    server.add({"text": "ours"}, {"text": "the SDK's"})
    await _drain(provider, request)
    reply = await provider.client.messages.create(**provider.body(request))
    assert reply.content[0].text == "the SDK's"
    ours, theirs = server.bodies("anthropic")
    assert sorted(markers(ours)) == sorted(markers(theirs)) == ["messages[2].content[0]", "system[0]"]
    assert {k: v for k, v in ours.items() if k != "stream"} == theirs
