"""The loopback model server: in process and as its own process, with the real SDKs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from crystal_kernel.testing.llm_server import LLMServer


async def test_non_streaming_requests_work_for_all_three_protocols() -> None:
    call = {"name": "bash", "arguments": {"command": "ls"}}
    with LLMServer([{"text": "plain", "tool_calls": [call]}] * 3) as server:
        oai = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        chat = await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert chat.choices[0].message.content == "plain"
        assert chat.choices[0].message.tool_calls[0].function.name == "bash"
        resp = await oai.responses.create(model="m", input="hi")
        assert resp.output_text == "plain"
        assert [o.type for o in resp.output] == ["message", "function_call"]
        claude = AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
        msg = await claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert msg.content[0].text == "plain" and msg.content[1].input == {"command": "ls"}
        assert msg.stop_reason == "tool_use"
        await oai.close()
        await claude.close()
        logged = server.requests
    assert [r["path"] for r in logged] == ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
    assert logged[0]["headers"]["authorization"] == "Bearer k"
    assert logged[2]["headers"]["authorization"] == "Bearer k"
    assert "anthropic-version" in logged[2]["headers"]


async def test_router_plays_two_roles() -> None:
    def router(body: dict[str, Any], path: str) -> dict[str, Any] | None:
        if "review" in json.dumps(body.get("messages", [])):
            return {"text": "APPROVE"}
        return None

    with LLMServer([{"text": "agent answer"}], router=router) as server:
        oai = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        review = await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "review this"}])
        agent = await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "work"}])
        await oai.close()
    assert review.choices[0].message.content == "APPROVE"
    assert agent.choices[0].message.content == "agent answer"


def test_runs_as_its_own_process_with_log_and_script_endpoints(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"text": "from the script"}]}))
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "crystal_kernel.testing.llm_server", "--script", str(script),
                             "--port", "0", "--log", str(log)], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")

        def post(path: str, payload: Any) -> dict[str, Any]:
            request = urllib.request.Request(url + path, data=json.dumps(payload).encode(),
                                             headers={"content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read())

        first = post("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert first["choices"][0]["message"]["content"] == "from the script"
        assert post("/_script", [{"text": "added later"}]) == {"pending": 1}
        second = post("/v1/messages", {"model": "m", "max_tokens": 5, "messages": []})
        assert second["content"] == [{"type": "text", "text": "added later"}]
        with urllib.request.urlopen(url + "/_log", timeout=5) as response:
            logged = json.loads(response.read())["requests"]
        assert [r["body"]["model"] for r in logged] == ["m", "m"]
        assert len(log.read_text().splitlines()) == 2
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        proc.stdout.close()


def test_request_log_is_bounded() -> None:
    with LLMServer([{"text": "x"}] * 5, log_limit=3) as server:
        for _ in range(5):
            request = urllib.request.Request(server.base_url + "/chat/completions", data=b'{"model": "m"}',
                                             headers={"content-type": "application/json"})
            urllib.request.urlopen(request, timeout=5).read()
        assert len(server.requests) == 3


def test_a_forgotten_server_process_exits_after_its_lifetime() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "crystal_kernel.testing.llm_server", "--lifetime", "0.5"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()


async def test_hurry_sends_the_rest_of_a_delayed_stream_at_once_and_later_streams_keep_their_delay() -> None:
    """A test that has seen a long stream flow can end it early; the next stream is paced."""
    text = "word " * 40  # 50 events of 4 characters, 0.4 s apart: 20 s unhurried
    with LLMServer([{"text": text, "delay": 0.4}, {"text": "ab cd ef gh", "delay": 0.4}]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")
        started = time.monotonic()
        got = ""
        stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got += chunk.choices[0].delta.content
                if len(got) == 8:  # two pieces seen: the rest without delay
                    server.hurry()
        assert got == text
        assert time.monotonic() - started < 10
        started = time.monotonic()
        stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        async for _ in stream:
            pass
        assert time.monotonic() - started >= 0.4 * 3  # the later stream's events are still paced
