"""`crystal run --reasoning` in a real subprocess (SPEC §12: the flag, the jsonl
``reasoning`` event streamed before the answer text, ``tool_result.status``), and a
text-mode turn cut off at the output limit saying why on stderr."""

from __future__ import annotations

import json

from crystal_kernel.testing.llm_server import LLMServer
from tests.cli.test_crystal_run import crystal, openai_env


def test_jsonl_streams_reasoning_before_the_answer_and_status_on_results(workspace):
    replies = [
        {"reasoning": "Look first.", "tool_calls": [{"name": "list", "arguments": {"path": "."}}]},
        {"reasoning": "Now answer.", "text": "Empty folder."},
    ]
    with LLMServer(replies) as server:
        out = crystal(["run", "what is here?", "--workspace", str(workspace), "--format", "jsonl",
                       "--approval", "full", "--reasoning", "low"], env_extra=openai_env(server))
        bodies = server.bodies("chat")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert [e["text"] for e in events if e["type"] == "reasoning"] and \
        "".join(e["text"] for e in events if e["type"] == "reasoning") == "Look first.Now answer."
    assert types.index("reasoning") < types.index("tool_call")
    second_thought = max(i for i, t in enumerate(types) if t == "reasoning")
    assert second_thought < types.index("text")
    assert "".join(e["text"] for e in events if e["type"] == "text") == "Empty folder."
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["status"] == "ok" and result["ok"] is True
    assert all(b["reasoning_effort"] == "low" for b in bodies)


def test_text_mode_keeps_reasoning_off_stdout(workspace):
    with LLMServer([{"reasoning": "Secret plan.", "text": "Hi."}]) as server:
        out = crystal(["run", "hi", "--workspace", str(workspace)], env_extra=openai_env(server))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hi.\n"
    assert "thinking: Secret plan." in out.stderr


def test_text_mode_cut_off_at_the_output_limit_says_why(workspace):
    with LLMServer([{"text": "A very long ans", "stop": "length"}]) as server:
        out = crystal(["run", "write a novel", "--workspace", str(workspace)], env_extra=openai_env(server))
        body = server.bodies("chat")[0]
    assert out.returncode == 1
    # Why it stopped, then the line every text-mode run ends with: how to continue.
    *_, why, hint = out.stderr.strip().splitlines()
    assert "output limit (maxOutputTokens 16384)" in why
    assert hint.startswith("Session ") and "crystal run --resume" in hint
    assert body["max_tokens"] == 16384


def test_bad_reasoning_value_is_refused(workspace):
    out = crystal(["run", "hi", "--workspace", str(workspace), "--reasoning", "extreme"])
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--reasoning" in out.stderr
