"""The collapsible, streamed "Thinking" card (SPEC §12 ``reasoning``): the
model's reasoning shows in its own card, open while it streams and folded once the
answer starts, never inside the answer; its text is escaped like every output (TRUST-1)."""

from __future__ import annotations

from crystal_kernel.core.events import ReasoningDelta, TextDelta, ToolCallStarted, ToolResultEvent, TurnEnd
from crystal_kernel.jupyter.cards import Status
from crystal_kernel.jupyter.render import RecordingOutput, Renderer


def test_thinking_streams_in_its_own_card_and_folds_when_the_answer_starts():
    out = RecordingOutput()
    r = Renderer(out, max_rate=1000)
    r.start(Status("work", "default", "anthropic", "claude", "default", 0))
    r.render(ReasoningDelta(text="First I look "))
    live = out.outputs[1]["text/html"]
    assert "<summary>Thinking…</summary>" in live and "<details" in live and " open" in live
    r.render(ReasoningDelta(text="<script>alert(1)</script> at the files."))
    r.render(ToolCallStarted(id="c1", name="list", arguments={"path": "."}))
    r.render(ToolResultEvent(id="c1", name="list", ok=False, status="cancelled", text="Stopped."))
    r.render(ReasoningDelta(text="Now the answer."))
    r.render(TextDelta(text="Two files."))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    r.close()
    thinking = [o for o in out.outputs if "crystal-thinking" in o.get("text/html", "")]
    assert len(thinking) == 2  # one card per reasoning block, in stream order
    first = thinking[0]["text/html"]
    assert "<summary>Thinking</summary>" in first and " open" not in first  # folded once done
    assert "<script>" not in first and "&lt;script&gt;" in first
    assert thinking[0]["text/plain"] == "Thinking: First I look <script>alert(1)</script> at the files."
    answer = out.outputs[-1]
    assert answer["text/plain"] == "Two files." and "Now the answer" not in answer.get("text/html", "")
    assert r.text == "Two files." and r.reasoning.endswith("Now the answer.")
    card = next(o for o in out.outputs if 'data-tool="list"' in o.get("text/html", ""))
    assert 'data-state="cancelled"' in card["text/html"]
