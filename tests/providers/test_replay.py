"""Cassettes: recording live replies, replaying them, mismatches and hand-authored files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import ProviderError, UserError
from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.providers.base import Finished, ModelRequest, TextChunk, ToolCallChunk, UsageChunk
from crystal_kernel.providers.registry import make_provider
from crystal_kernel.providers.replay import RecordingProvider, ReplayProvider, cassette_path
from crystal_kernel.testing.llm_server import LLMServer

BASH = ToolSpec("bash", "Run a command.", {"type": "object"})


def req(messages: list[Message], system: str = "Today is Monday 10:00.", purpose: str = "turn") -> ModelRequest:
    return ModelRequest(model="gpt-4.1", system=system, messages=messages, tools=[BASH], purpose=purpose)


async def collect(provider: Any, request: ModelRequest) -> list[Any]:
    return [item async for item in provider.stream(request)]


def first_turn() -> list[Message]:
    return [Message.user_text("List the files")]


def second_turn(call_id: str) -> list[Message]:
    return first_turn() + [
        Message(role="assistant", parts=[TextPart(text="Listing."),
                                         ToolCallPart(id=call_id, name="bash", arguments={"command": "ls"})]),
        Message(role="user", parts=[ToolResultPart(call_id=call_id, name="bash", ok=True,
                                                   text="a.txt  (listed at 10:00:01)")]),
    ]


def config_for(home: Path, **overrides: Any):
    return load_config(home, overrides=overrides, environ={})


async def test_record_then_replay_serves_the_same_replies(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RECORD_KEY", "k")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with LLMServer([
        {"text": "Listing.", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": "ls"}}],
         "usage": {"input_tokens": 50, "output_tokens": 9}},
        {"text": "There is one file, a.txt.", "usage": {"input_tokens": 70, "output_tokens": 8}},
    ]) as server:
        config = config_for(tmp_path / "home", provider="openai", baseUrl=server.base_url, apiKeyEnv="RECORD_KEY",
                            record=True)
        live = make_provider(config, workspace=workspace)
        assert isinstance(live, RecordingProvider)
        one = await collect(live, req(first_turn()))
        two = await collect(live, req(second_turn("call_1")))
        await live.aclose()
    cassette = workspace / ".crystal" / "cassettes" / "default.json"
    data = json.loads(cassette.read_text())
    assert data["version"] == 1 and len(data["interactions"]) == 2
    first = data["interactions"][0]
    assert first["match"]["messages"] == [{"role": "user", "parts": [{"text": "List the files"}]}]
    assert first["match"]["tools"] == ["bash"]
    assert first["reply"] == [{"text": "Listing."},
                              {"tool_call": {"id": "call_1", "name": "bash", "arguments": {"command": "ls"}}},
                              {"usage": {"input_tokens": 50, "output_tokens": 9}}, {"finish": "tool_use"}]
    assert "Today is" not in cassette.read_text(), "the volatile system text is not recorded"

    replay = make_provider(config_for(tmp_path / "home"), workspace=workspace)
    assert isinstance(replay, ReplayProvider)
    # A different date in the system text and different tool output text still match.
    again_one = await collect(replay, req(first_turn(), system="Today is Tuesday 11:30."))
    second = second_turn("call_1")
    second[2].parts[0].text = "a.txt  (listed at 11:30:07)"
    again_two = await collect(replay, req(second))

    def text(items: list[Any]) -> str:
        return "".join(i.text for i in items if isinstance(i, TextChunk))

    assert text(again_one) == text(one) == "Listing."
    assert [i for i in again_one if isinstance(i, ToolCallChunk)] == [i for i in one if isinstance(i, ToolCallChunk)]
    assert text(again_two) == text(two) == "There is one file, a.txt."
    assert len([i for i in again_two if isinstance(i, TextChunk)]) > 1, "replayed text streams in pieces"
    assert UsageChunk(70, 8) in again_two and again_two[-1] == Finished("end_turn")


def write_cassette(path: Path, interactions: list[dict[str, Any]], **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "interactions": interactions, **extra}, indent=1))


async def test_mismatch_names_the_first_difference(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    write_cassette(cassette, [
        {"match": {"messages": [{"role": "user", "parts": [{"text": "List the files"}]}]}, "reply": [{"text": "a"}]},
        {"match": {"messages": [{"role": "user", "parts": [{"text": "List the files"}]},
                                {"role": "assistant", "parts": [{"text": "a"}]},
                                {"role": "user", "parts": [{"text": "Now delete them"}]}]},
         "reply": [{"text": "b"}]},
    ])
    replay = ReplayProvider(cassette)
    await collect(replay, req(first_turn()))
    transcript = first_turn() + [Message(role="assistant", parts=[TextPart(text="a")]),
                                 Message.user_text("Now rename them")]
    with pytest.raises(ProviderError) as info:
        await collect(replay, req(transcript))
    assert str(info.value) == ("Replay mismatch at interaction 2: message 3 text differs: "
                               "expected 'Now delete them' got 'Now rename them'.")


async def test_tool_call_difference_and_exhausted_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    write_cassette(cassette, [{"match": {"messages": [
        {"role": "user", "parts": [{"text": "List the files"}]},
        {"role": "assistant", "parts": [{"text": "Listing."},
                                        {"tool_call": {"name": "bash", "arguments": {"command": "ls -a"}}}]},
        {"role": "user", "parts": [{"tool_result": {"name": "bash", "ok": True}}]}]},
        "reply": [{"text": "done"}]}])
    replay = ReplayProvider(cassette)
    with pytest.raises(ProviderError, match=r"interaction 1: message 2 part 2 tool call arguments differ: "
                                            r"expected '\{\"command\": \"ls -a\"\}' got '\{\"command\": \"ls\"\}'"):
        await collect(replay, req(second_turn("x")))
    write_cassette(cassette, [{"match": {}, "reply": [{"text": "only one"}]}])
    replay = ReplayProvider(cassette)
    await collect(replay, req(first_turn()))
    with pytest.raises(ProviderError, match="has no reply left for this request"):
        await collect(replay, req(first_turn()))


async def test_hand_authored_cassette_with_user_match_and_extra_keys(tmp_path: Path, monkeypatch) -> None:
    workspace = tmp_path / "ws"
    cassette = workspace / "tour" / "one.json"
    write_cassette(cassette, [
        {"match": {"user": "Write hello.py"}, "person": {"answers": ["yes"]},
         "reply": [{"text": "Writing it."},
                   {"tool_call": {"name": "write", "arguments": {"path": "hello.py", "content": "print(1)\n"}}}]},
        {"match": {"purpose": "turn"}, "reply": [{"text": "Done: hello.py prints 1."}]},
    ], note="authored by hand")
    monkeypatch.setenv("CRYSTAL_CASSETTE", "tour/one.json")
    config = config_for(tmp_path / "home")
    assert cassette_path(config, workspace) == workspace / "tour" / "one.json"
    replay = make_provider(config, workspace=workspace)
    items = await collect(replay, req([Message.user_text("Write hello.py")]))
    (call,) = [i for i in items if isinstance(i, ToolCallChunk)]
    assert call.name == "write" and json.loads(call.arguments)["path"] == "hello.py"
    assert call.id == "replay_1_1"
    assert items[-1] == Finished("tool_use")
    assert replay.last_interaction["person"] == {"answers": ["yes"]}
    with pytest.raises(ProviderError, match="holds no recorded reply for this topic request"):
        await collect(replay, req([Message.user_text("x")], purpose="topic"))
    items = await collect(replay, req([Message.user_text("Write hello.py")]))
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "Done: hello.py prints 1."


async def test_recording_appends_and_keeps_unknown_keys(tmp_path: Path) -> None:
    from crystal_kernel.testing import ScriptedProvider, text_reply

    cassette = tmp_path / "c.json"
    write_cassette(cassette, [{"match": {"user": "old"}, "reply": [{"text": "old"}], "person": {"approve": True}}],
                   note="keep me")
    recorder = RecordingProvider(ScriptedProvider([text_reply("new answer")]), cassette)
    await collect(recorder, req([Message.user_text("new"), ]))
    recorder.annotate_last(person={"answers": ["blue"]})
    data = json.loads(cassette.read_text())
    assert data["note"] == "keep me"
    assert data["interactions"][0]["person"] == {"approve": True}
    assert data["interactions"][1]["reply"][0] == {"text": "new answer"}
    assert data["interactions"][1]["person"] == {"answers": ["blue"]}


async def test_interrupted_reply_is_not_recorded(tmp_path: Path) -> None:
    from crystal_kernel.testing import Fail, ScriptedProvider

    cassette = tmp_path / "c.json"
    recorder = RecordingProvider(ScriptedProvider([[TextChunk("half"), Fail(ProviderError("broke"))]]), cassette)
    with pytest.raises(ProviderError):
        await collect(recorder, req(first_turn()))
    assert not cassette.exists()


def test_corrupt_cassette_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    from crystal_kernel.testing import ScriptedProvider

    cassette = tmp_path / "c.json"
    cassette.write_text("{not json")
    with pytest.raises(UserError, match="Cannot record: Replay cassette .* cannot be read"):
        RecordingProvider(ScriptedProvider([]), cassette)
    assert cassette.read_text() == "{not json"


async def test_missing_or_malformed_cassette_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match=r"No model is connected: the provider is replay .* does not exist"):
        await collect(ReplayProvider(tmp_path / "none.json"), req(first_turn()))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "interactions": [{"match": {}}]}))
    with pytest.raises(ProviderError, match="interaction 1 needs a \"reply\" list"):
        await collect(ReplayProvider(bad), req(first_turn()))


async def test_resumed_session_replays_from_the_middle(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    write_cassette(cassette, [
        {"match": {"user": "first"}, "reply": [{"text": "one"}]},
        {"match": {"user": "second"}, "reply": [{"text": "two"}]},
    ])
    replay = ReplayProvider(cassette)  # a new process: starts at interaction 1
    items = await collect(replay, req([Message.user_text("first"), Message(role="assistant", parts=[
        TextPart(text="one")]), Message.user_text("second")]))
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "two"


async def test_images_are_matched_by_type(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    write_cassette(cassette, [{"match": {"messages": [
        {"role": "user", "parts": [{"text": "see"}, {"image": "image/png"}]}]}, "reply": [{"text": "ok"}]}])
    msg = Message(role="user", parts=[TextPart(text="see"), ImagePart.from_bytes("image/jpeg", b"x")])
    with pytest.raises(ProviderError, match="message 1 part 2 image type differs: expected 'image/png'"):
        await collect(ReplayProvider(cassette), req([msg]))


async def test_recorded_side_calls_are_served_by_purpose(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    write_cassette(cassette, [
        {"match": {"purpose": "turn"}, "reply": [{"text": "turn one"}]},
        {"match": {"purpose": "topic"}, "reply": [{"text": "Listing files"}]},
        {"match": {}, "reply": [{"text": "turn two"}]},
    ])
    replay = ReplayProvider(cassette)

    async def text(purpose: str) -> str:
        items = await collect(replay, req(first_turn(), purpose=purpose))
        return "".join(i.text for i in items if isinstance(i, TextChunk))

    assert await text("turn") == "turn one"
    # The next turn arrives before the topic request: the topic reply is skipped, then found.
    assert await text("turn") == "turn two"
    assert await text("topic") == "Listing files"
    with pytest.raises(ProviderError, match="^Replay cassette c.json holds no recorded reply for this review request.$"):
        await collect(replay, req(first_turn(), purpose="review"))
