"""Crystal against a real llama.cpp ``llama-server`` (SmolLM2-135M): the
interop suite of docs/interop.md, on the `crystal run` contract of SPEC §11 and §12.

Each test runs ``crystal run --format jsonl`` in a subprocess, as a person would, against
a server no one here wrote, and asserts what the person sees: the events, the exit code,
stderr. Requests are bounded (``maxOutputTokens``, ``requestTimeoutSeconds``, ``maxSteps``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest

from tests.interop.conftest import ALIAS, CRYSTAL, LlamaServer, crystal_run, only_tools, write_config

PROVIDERS = ["openai", "openai-responses", "anthropic"]


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def notes(events: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in of(events, "note")]


def answer(events: list[dict[str, Any]]) -> str:
    return "".join(e["text"] for e in of(events, "text"))


def test_the_context_window_is_asked_of_llama_server_and_shown(llama, workspace, private_home):
    """the window of an unknown local model comes from /props n_ctx, and shows."""
    write_config(private_home)
    out, events = crystal_run("Say hello.", llama, workspace, extra=only_tools("read"))
    assert events and events[-1]["type"] == "turn_end", out.stderr
    assert (f"Context window of {ALIAS}: 8,192 tokens (llama.cpp n_ctx, asked of {llama.v1}).") in notes(events)
    assert answer(events).strip(), events
    usage = of(events, "usage")
    assert usage and usage[-1]["inputTokens"] > 0 and 0 < usage[-1]["outputTokens"] <= 48


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_output_limit_is_sent_and_a_cut_answer_says_so(provider, llama, workspace, private_home):
    """SPEC §12 maxOutputTokens: the server stops where Crystal asked; the turn ends
    with stop reason max_tokens, and text mode says why on stderr."""
    write_config(private_home, maxOutputTokens=6)
    prompt = "Write a long story about a lighthouse keeper and the sea, in many paragraphs."
    out, events = crystal_run(prompt, llama, workspace, provider=provider, extra=only_tools("read"))
    assert events[-1] == {**events[-1], "type": "turn_end", "stopReason": "max_tokens"}, (events, out.stderr)
    assert of(events, "usage")[-1]["outputTokens"] <= 6
    assert not of(events, "error"), events
    text = subprocess.run([CRYSTAL, "run", prompt, "--workspace", str(workspace), "--provider", provider,
                           "--base-url", llama.root if provider == "anthropic" else llama.v1, "--model", ALIAS,
                           *only_tools("read")], capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert text.returncode == 1 and "output limit (maxOutputTokens 6)" in text.stderr, text.stderr
    assert "Traceback" not in text.stderr


# A 135M model calls a tool when shown the call to make: the Hermes form the template
# describes, which llama.cpp's grammar and parser then turn into a streamed tool call.
TOOL_PROMPT = ('Read the file notes.txt with the read tool. Answer with exactly this and nothing else:\n'
               '<tool_call>\n{"name": "read", "arguments": {"path": "notes.txt"}}\n</tool_call>')


# Measured here: SmolLM2-135M answers this prompt in prose on every protocol and never
# writes a <tool_call>, so no tool call is streamed (docs/interop.md). Strict: the day a
# model or template makes it call, this reports XPASS as a failure to be turned on.
@pytest.mark.xfail(strict=True, reason="SmolLM2-135M does not emit a tool call (measured; docs/interop.md)")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_real_streamed_tool_call_runs_and_the_next_request_is_accepted(provider, llama, workspace,
                                                                         private_home):
    """llama.cpp streams the call (Chat Completions tool_calls deltas, Responses
    function_call items, Messages tool_use blocks); Crystal runs it, and the server takes
    the follow-up request that carries the call and its result (the `"content": null`
    defect made every such request fail on llama-cpp-python's server)."""
    (workspace / "notes.txt").write_text("periwinkle\n")
    write_config(private_home, maxOutputTokens=64)
    out, events = crystal_run(TOOL_PROMPT, llama, workspace, provider=provider, extra=only_tools("read"))
    calls = of(events, "tool_call")
    assert calls, (events, out.stderr)
    assert calls[0]["name"] == "read", calls
    assert "notes.txt" in json.dumps(calls[0]["arguments"]), calls
    results = of(events, "tool_result")
    assert results and results[0]["ok"] and "periwinkle" in results[0]["text"], results
    # The request after the result was accepted: no error, and the turn ended normally
    # (or at the step limit when the small model keeps calling the tool).
    assert not of(events, "error"), (events, out.stderr)
    assert events[-1]["type"] == "turn_end" and events[-1]["stopReason"] in ("end_turn", "max_tokens", "max_steps"), \
        events[-1]


@pytest.fixture(scope="module")
def small_llama(tmp_path_factory):
    """A server with a small window, for requests that do not fit."""
    server = LlamaServer(tmp_path_factory.mktemp("llama-small"), ctx=SMALL_CTX).start()
    yield server
    server.stop()


SMALL_CTX = 2048


def filler(words: int) -> str:
    """A prompt of about ``words`` tokens (" word" is one token) with nothing to answer."""
    return "Here is a list to keep: " + " ".join(["word"] * words) + ". Reply with OK."


def test_a_request_too_long_for_the_server_is_compacted_and_sent_once_more(small_llama, workspace,
                                                                             private_home):
    """The server refuses a request for its length (HTTP 400, "exceeds the available
    context size (2048 tokens)"): Crystal adopts the size it names, compacts the
    conversation, and sends the step once more; the turn succeeds."""
    # contextWindow set far too large: no probe, no compaction ahead of time, so the
    # server's refusal is what Crystal must act on.
    write_config(private_home, contextWindow=131072, maxOutputTokens=24)
    flags = only_tools("read")
    first, events1 = crystal_run(filler(600), small_llama, workspace, extra=flags)
    assert events1[-1]["stopReason"] in ("end_turn", "max_tokens"), (events1, first.stderr)
    used = of(events1, "usage")[-1]
    fixed = used["inputTokens"] - 600  # system text, tool list, template
    # The second prompt overflows the window by about 150 tokens, yet fits beside a
    # summary of the first turn (at most 256 tokens, a window's eighth).
    more = SMALL_CTX - used["inputTokens"] - used["outputTokens"] + 150
    assert fixed + 256 + 40 + more < SMALL_CTX, (fixed, more)
    second, events2 = crystal_run(filler(more), small_llama, workspace,
                                  extra=[*flags, "--resume", events1[-1]["sessionId"]])
    said = notes(events2)
    assert any(f"(now taken as {SMALL_CTX:,} tokens); compacting the conversation and trying once more." in n
               for n in said), (said, events2, second.stderr)
    assert not of(events2, "error"), (events2, second.stderr)
    assert events2[-1]["stopReason"] in ("end_turn", "max_tokens"), events2[-1]
    assert of(events2, "usage")[-1]["inputTokens"] < SMALL_CTX


def test_a_request_that_cannot_fit_reports_the_servers_words(small_llama, workspace, private_home):
    """nothing older to compact: one line with the server's own reason."""
    write_config(private_home, contextWindow=131072, maxOutputTokens=24)
    out, events = crystal_run(filler(2500), small_llama, workspace, extra=only_tools("read"))
    errors = of(events, "error")
    assert len(errors) == 1 and "exceeds the available context size" in errors[0]["message"], (events, out.stderr)
    assert "Nothing older is left to summarise." in notes(events)
    assert events[-1] == {**events[-1], "type": "turn_end", "stopReason": "error"}
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr


def test_a_server_killed_mid_stream_ends_the_turn_with_one_clear_line(tmp_path, workspace, private_home):
    """llama-server dies (SIGKILL) while the answer streams: Crystal prints one
    line saying so, no traceback, emits turn_end, and exits non-zero."""
    server = LlamaServer(tmp_path, ctx=SMALL_CTX, ignore_eos=True).start()
    try:
        write_config(private_home, maxOutputTokens=2000, requestTimeoutSeconds=60)
        args = [CRYSTAL, "run", "Tell me a very long story.", "--workspace", str(workspace), "--provider", "openai",
                "--base-url", server.v1, "--model", ALIAS, "--format", "jsonl", *only_tools("read")]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env=dict(os.environ))
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 180
        texts = 0
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            texts += json.loads(line)["type"] == "text"
            if texts >= 3:  # the answer is streaming
                server.kill()
                break
        assert texts >= 3, (lines, proc.stderr.read() if proc.stderr else "")
        rest, stderr = proc.communicate(timeout=120)
    finally:
        server.stop()
    events = [json.loads(line) for line in [*lines, *rest.splitlines()] if line.strip()]
    errors = of(events, "error")
    assert len(errors) == 1, events
    assert "broke mid-answer" in errors[0]["message"] or "connection" in errors[0]["message"], errors
    assert events[-1]["type"] == "turn_end" and events[-1]["stopReason"] == "error", events[-1]
    assert proc.returncode != 0
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
