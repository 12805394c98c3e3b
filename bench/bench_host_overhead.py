"""Host overhead of one turn with three tool calls, against calling the SDK directly.

Both sides talk to the same loopback model server with the same scripted replies
(three replies with one `read` call each, then a text answer). The reference streams
the same four requests with the openai SDK and reads the same file itself.
Targets: ratio under 1.2x, and under 5 ms of host time per tool call.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from openai import AsyncOpenAI

from crystal_kernel.core.config import load_config
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.providers.registry import make_provider
from crystal_kernel.testing.llm_server import LLMServer

ROUNDS = 15
CALLS = 3


def script(calls: int = CALLS) -> list[dict]:
    replies = [{"tool_calls": [{"name": "read", "arguments": {"path": "data.txt"}}], "chunk": 64}
               for _ in range(calls)]
    replies.append({"text": "All three reads are done.", "chunk": 64})
    return replies


async def ours(server: LLMServer, workspace: Path, calls: int = CALLS) -> float:
    config = load_config(overrides={"provider": "openai", "baseUrl": server.base_url, "model": "bench",
                                    "approval": "full", "topicNaming": False})
    session = Session(workspace=workspace, config=config, provider=make_provider(config, workspace=workspace),
                      person_present=False)
    session.system_text()
    server.add(*script(calls))
    start = time.perf_counter()
    async for _ in run_turn(session, "read data.txt three times"):
        pass
    elapsed = time.perf_counter() - start
    await session.close()
    return elapsed


def offered_tools(workspace: Path) -> tuple[str, list[dict]]:
    """The same system text and tool list the host sends, so both sides send equal requests."""
    config = load_config(overrides={"provider": "replay", "approval": "full"})
    session = Session(workspace=workspace, config=config, provider=make_provider(config, workspace=workspace),
                      person_present=False)
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                               "parameters": t.input_schema()}} for t in run_to_completion(session.prepare_tools())]
    return session.system_text(), tools


async def reference(server: LLMServer, workspace: Path, calls: int = CALLS) -> float:
    client = AsyncOpenAI(base_url=server.base_url, api_key="bench")
    server.add(*script(calls))
    system, tools = offered_tools(workspace)
    messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": "read"}]
    start = time.perf_counter()
    for _ in range(calls + 1):
        stream = await client.chat.completions.create(model="bench", messages=messages, tools=tools, stream=True)
        calls: dict[int, dict] = {}
        async for chunk in stream:
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    entry = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                    entry["id"] = tc.id or entry["id"]
                    if tc.function:
                        entry["name"] += tc.function.name or ""
                        entry["args"] += tc.function.arguments or ""
        if not calls:
            break
        for c in calls.values():
            text = (workspace / "data.txt").read_text()
            messages.append({"role": "assistant", "tool_calls": [{"id": c["id"], "type": "function",
                             "function": {"name": c["name"], "arguments": c["args"]}}]})
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": text})
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


def main() -> list[dict]:
    async def run() -> tuple[float, float, float, float]:
        with tempfile.TemporaryDirectory() as tmp, LLMServer() as server:
            ws = Path(tmp)
            (ws / "data.txt").write_text("line\n" * 200)
            await ours(server, ws)  # warm up imports and connections
            await reference(server, ws)
            a, b, a0, b0 = [], [], [], []
            for _ in range(ROUNDS):
                a.append(await ours(server, ws))
                b.append(await reference(server, ws))
                a0.append(await ours(server, ws, 0))
                b0.append(await reference(server, ws, 0))
            med = statistics.median
            return med(a), med(b), med(a0), med(b0)

    o, r, o0, r0 = asyncio.run(run())
    # Per tool call: what three calls add to a turn on our side, beyond what they add to
    # the bare SDK loop (per-turn costs such as saving the session cancel out).
    per_call_ms = ((o - o0) - (r - r0)) / CALLS * 1000  # may dip below 0 in noise
    return [
        {"name": "host turn, 3 tool calls vs bare SDK", "ours": o * 1000, "reference": r * 1000, "unit": "ms",
         "ratio": o / r, "target": {"ratio_max": 1.2}, "met": None},
        {"name": "host time per tool call", "ours": per_call_ms, "reference": None, "unit": "ms",
         "ratio": None, "target": {"ours_max": 5.0}, "met": None},
    ]


if __name__ == "__main__":
    for row in main():
        print(row)
