"""The front-neutral renderer and cards, driven by host events (no kernel needed)."""

from __future__ import annotations

from crystal_kernel.host.events import (
    ApprovalEvent, ErrorEvent, Note, TextDelta, ToolCallStarted, ToolResultEvent, TurnEnd, UsageEvent,
)
from crystal_kernel.host.messages import ImagePart
from crystal_kernel.jupyter.cards import Status, card_bundle, CardState, diff_html
from crystal_kernel.jupyter.render import RecordingOutput, Renderer


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def status():
    return Status("work", "default", "openai", "gpt-4.1", "default", 100)


def test_stream_updates_are_throttled_to_the_rate_whatever_the_token_rate():
    out, clock = RecordingOutput(), Clock()
    r = Renderer(out, clock=clock, max_rate=15)
    r.start(status())
    for i in range(1000):  # 1000 deltas in one simulated second
        clock.now = i / 1000
        r.handle(TextDelta(text="x"))
    r.handle(TurnEnd(session_id="s", stop_reason="end_turn"))
    assert out.outputs[1]["text/plain"] == "x" * 1000
    assert out.updates[1] <= 16


def test_text_segments_are_split_by_tool_cards_and_usage_updates_status():
    out = RecordingOutput()
    r = Renderer(out, max_rate=1000)
    r.start(status())
    r.handle(TextDelta(text="Looking."))
    r.handle(ToolCallStarted(id="c1", name="bash", arguments={"command": "ls"}))
    r.handle(ApprovalEvent(id="c1", name="bash", outcome="ask", by="host"))
    r.handle(ApprovalEvent(id="c1", name="bash", outcome="allow", by="person"))
    r.handle(ToolResultEvent(id="c1", name="bash", ok=True, text="a\nb", display="terminal",
                             images=[ImagePart(mime_type="image/png", data="aGk=")]))
    r.handle(UsageEvent(input_tokens=5, output_tokens=2))
    r.handle(TextDelta(text="Done."))
    r.handle(Note(text="a note"))
    r.handle(ErrorEvent(message="boom"))
    r.handle(TurnEnd(session_id="s", stop_reason="cancelled"))
    texts = [o.get("text/plain") for o in out.outputs]
    assert texts[0].endswith("107 tokens")
    assert texts[1] == "Looking."
    assert texts[2].startswith("[bash] ls — done\nAllowed by you.\na\nb")
    assert out.outputs[3] == {"image/png": "aGk=", "text/plain": "[bash image]"}
    assert texts[4:] == ["Done.", "Note: a note", "Error: boom",
                         "Note: Interrupted. The partial answer is kept; the next cell continues."]
    assert r.text == "Looking.Done."


def test_cards_show_diffs_errors_and_reviewer_verdicts():
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new"
    html = diff_html(diff)
    # Theme colours with the light fallbacks a static export uses (readable in JupyterLab Dark).
    assert ('color:var(--jp-success-color1,#1a7f37);background-color:var(--jp-success-color3,#e6ffec)">+new<'
            in html)
    assert 'color:var(--jp-error-color1,#cf222e);background-color:var(--jp-error-color3,#ffebe9)">-old<' in html
    card = CardState(id="1", name="edit", arguments={"path": "a.py"}, state="done", result=diff, display="diff")
    assert "+new" in card_bundle(card)["text/html"]
    out = RecordingOutput()
    r = Renderer(out)
    r.handle(ToolCallStarted(id="c", name="write", arguments={"path": "x", "content": "<b>"}))
    r.handle(ApprovalEvent(id="c", name="write", outcome="deny", by="reviewer", reason="not asked",
                           verdict={"risk_level": "high", "user_authorization": "low", "rationale": "not asked"}))
    r.handle(ToolResultEvent(id="c", name="write", ok=False, text="The call was denied by the reviewer."))
    bundle = out.outputs[0]
    assert 'data-state="denied"' in bundle["text/html"] and "--jp-error-color1, #cf222e" in bundle["text/html"]
    assert "Reviewer: risk high, authorization low — not asked" in bundle["text/plain"]
    assert "&lt;b&gt;" in bundle["text/html"], "arguments are escaped"
