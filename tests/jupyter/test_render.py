"""The front-neutral renderer and cards, driven by host events (no kernel needed)."""

from __future__ import annotations

from crystal_kernel.core.events import (
    ApprovalEvent,
    ErrorEvent,
    Note,
    TextDelta,
    ToolCallStarted,
    ToolResultEvent,
    TurnEnd,
    UsageEvent,
)
from crystal_kernel.core.messages import ImagePart
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import CardState, Status, card_bundle, diff_html
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
        r.render(TextDelta(text="x"))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    assert out.outputs[1]["text/plain"] == "x" * 1000
    assert out.updates[1] <= 16


def test_text_segments_are_split_by_tool_cards_and_usage_updates_status():
    out = RecordingOutput()
    r = Renderer(out, max_rate=1000)
    r.start(status())
    r.render(TextDelta(text="Looking."))
    r.render(ToolCallStarted(id="c1", name="bash", arguments={"command": "ls"}))
    r.render(ApprovalEvent(id="c1", name="bash", outcome="ask", by="host"))
    r.render(ApprovalEvent(id="c1", name="bash", outcome="allow", by="person"))
    r.render(ToolResultEvent(id="c1", name="bash", ok=True, text="a\nb", display="terminal",
                             images=[ImagePart(mime_type="image/png", data="aGk=")]))
    r.render(UsageEvent(input_tokens=5, output_tokens=2))
    r.render(TextDelta(text="Done."))
    r.render(Note(text="a note"))
    r.render(ErrorEvent(message="boom"))
    r.render(TurnEnd(session_id="s", stop_reason="cancelled"))
    texts = [o.get("text/plain") for o in out.outputs]
    assert texts[0].endswith("107 tokens")
    assert texts[1] == "Looking."
    # The person's decision is on the card, above the result (the form leaves nothing).
    assert texts[2].startswith("[bash] ls — done\nAllowed once: bash ls\na\nb")
    assert out.outputs[3] == {"image/png": "aGk=", "text/plain": "[bash image]"}
    assert texts[4:] == ["Done.", "Note: a note", "Error: boom",
                         "Note: Interrupted. The partial answer is kept; the next cell continues."]
    assert r.text == "Looking.Done."


def test_cards_show_diffs_errors_and_reviewer_verdicts():
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new"
    html = diff_html(diff)
    # The palette's colours (the lab extension's per-theme values) with the light fallbacks
    # a static export uses; tests/e2e/test_polish.py measures them at 4.5:1 in Light and Dark.
    assert f'{palette.ADDED}">+new<' in html and f'{palette.REMOVED}">-old<' in html
    assert palette.ADDED == "color:var(--crystal-diff-added,#1b5e20);background-color:var(--crystal-diff-added-bg,#c8e6c9)"
    card = CardState(id="1", name="edit", arguments={"path": "a.py"}, state="done", result=diff, display="diff")
    assert "+new" in card_bundle(card)["text/html"]
    out = RecordingOutput()
    r = Renderer(out)
    r.render(ToolCallStarted(id="c", name="write", arguments={"path": "x", "content": "<b>"}))
    r.render(ApprovalEvent(id="c", name="write", outcome="deny", by="reviewer", reason="not asked",
                           verdict={"risk_level": "high", "user_authorization": "low", "rationale": "not asked"}))
    r.render(ToolResultEvent(id="c", name="write", ok=False, text="The call was denied by the reviewer."))
    bundle = out.outputs[0]
    assert 'data-state="denied"' in bundle["text/html"] and "--crystal-error, #b71c1c" in bundle["text/html"]
    assert "Reviewer: risk high, authorization low — not asked" in bundle["text/plain"]
    assert "&lt;b&gt;" in bundle["text/html"], "arguments are escaped"


def _turn(*events):
    out = RecordingOutput()
    r = Renderer(out)
    for event in events:
        r.render(event)
    return out.outputs


def test_each_decision_is_stated_once_in_a_card():
    """A denial's reason once (not in an approval line, a result and a summary); a form's
    decision on the card, in the form's words (the form leaves nothing); a decision
    without a form in the card."""
    call = ToolCallStarted(id="c", name="bash", arguments={"command": "rm -rf data"})
    denied = ToolResultEvent(id="c", name="bash", ok=False, text="The call was denied by the person. Reason: keep it")
    card = _turn(call, ApprovalEvent(id="c", name="bash", outcome="ask", by="host"),
                 ApprovalEvent(id="c", name="bash", outcome="deny", by="person", reason="keep it"), denied)[0]
    assert card["text/plain"] == "[bash] rm -rf data — denied\nDenied: bash rm -rf data (reason: keep it)"
    assert card["text/html"].count("keep it") == 1 and 'data-state="denied"' in card["text/html"]
    policy = _turn(call, ApprovalEvent(id="c", name="bash", outcome="deny", by="policy", reason="rule rm -rf"),
                   ToolResultEvent(id="c", name="bash", ok=False, text="The call was denied. Reason: rule rm -rf"))[0]
    assert policy["text/plain"].count("rule rm -rf") == 1 and policy["text/html"].count("rule rm -rf") == 1
    verdict = {"risk_level": "high", "user_authorization": "low", "rationale": "not asked for"}
    reviewer = _turn(call, ApprovalEvent(id="c", name="bash", outcome="deny", by="reviewer", reason="not asked for",
                                         verdict=verdict))[0]
    assert reviewer["text/plain"].count("not asked for") == 1
    # Allowed for the session earlier: no form this time, so the card says who allowed it.
    again = _turn(call, ApprovalEvent(id="c", name="bash", outcome="allow", by="person",
                                      reason="allowed for this session"))[0]
    assert "Allowed by you (allowed for this session)" in again["text/plain"]


def test_question_card_shows_questions_and_answers_not_json():
    args = {"questions": [{"header": "Format", "question": "Which output format?", "options": [
        {"label": "CSV", "description": ""}, {"label": "Parquet", "description": ""}]},
        {"header": "Deploy", "question": "Deploy $ENV now?", "options": []}]}
    start = ToolCallStarted(id="q", name="question", arguments=args)
    waiting = _turn(start)[0]
    assert waiting["text/plain"].splitlines() == [
        "[question] Format, Deploy — waiting for your answer", "Format: Which output format?", "Deploy: Deploy $ENV now?"]
    done = _turn(start, ToolResultEvent(id="q", name="question", ok=True, text='[["Parquet"], ["no, later"]]'))[0]
    assert done["text/plain"].splitlines()[1:] == ["Format: Which output format? → Parquet",
                                                   "Deploy: Deploy $ENV now? → no, later"]
    assert "[[" not in done["text/html"] and '"options"' not in done["text/html"]
    assert "<b>Parquet</b>" in done["text/html"]
    dismissed = _turn(start, ToolResultEvent(id="q", name="question", ok=False, text="The person dismissed it."))[0]
    assert "The person dismissed it." in dismissed["text/plain"]


def test_stream_updates_slow_down_as_the_answer_grows_and_the_final_bundle_is_whole():
    """A display update re-sends the whole answer: live updates carry only the rendered
    HTML and come less often as it grows; the final update is the full bundle, the same
    sanitized rendering as ever (TRUST-1)."""
    from crystal_kernel.jupyter.render import LIVE_BYTES_PER_SECOND
    from crystal_kernel.jupyter.safe_html import markdown_bundle

    out, clock = RecordingOutput(), Clock()
    r = Renderer(out, clock=clock, max_rate=15)
    r.start(None)
    piece = "word <b>x</b> " * 10  # 140 characters a delta
    for i in range(2000):  # 280 KB over 20 simulated seconds
        clock.now = i / 100
        r.render(TextDelta(text=piece))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    live, final = out.sent[1:-1], out.sent[-1]  # the updates after the first show
    assert all(set(b) == {"text/html"} for b in live)
    assert final == markdown_bundle(piece * 2000)
    assert "<b>" not in final["text/html"] and "&lt;b&gt;" in final["text/html"]
    # 15 a second at the start, then bounded by the byte rate: far fewer than 15 x 20 s.
    sent = sum(len(b["text/html"]) for b in live)
    assert sent <= LIVE_BYTES_PER_SECOND * 20 + len(final["text/html"])
    assert 5 <= len(live) < 40
    # the last live updates are seconds apart (each waits its own size / the byte rate)
    assert len(live[-1]["text/html"]) / LIVE_BYTES_PER_SECOND > 1


def test_stream_deltas_carry_only_what_changed_in_the_html_and_the_final_bundle_is_whole():
    """With a front that renders them (the lab extension), live updates of an answer
    carry only how the sanitized HTML of the Markdown so far changed (stream_html.py),
    at most DELTA_RATE a second, so the bytes sent while it streams stay near its length
    whatever its size; every HTML they rebuild is the kernel's sanitized rendering of a
    prefix of the answer (TRUST-1), and the final update is that rendering of all of it."""
    from crystal_kernel.core.html_text import ANSWER_IN_HTML, answer_text
    from crystal_kernel.jupyter.render import DELTA_RATE
    from crystal_kernel.jupyter.safe_html import clean, markdown_bundle
    from crystal_kernel.jupyter.stream_html import STREAM_MIME, apply_update

    out, clock = RecordingOutput(deltas=True), Clock()
    r = Renderer(out, clock=clock, max_rate=15)
    r.start(None)
    piece = "word <b>x</b> " * 10
    for i in range(2000):  # 280 KB over 20 simulated seconds
        clock.now = i / 100
        r.render(TextDelta(text=piece))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    sent, shown_again = out.sent, out.kept
    live, final = sent[:-1], sent[-1]
    whole = piece * 2000
    # The final output: the same sanitized HTML as ever, and the text not a second time.
    assert final["text/html"] == markdown_bundle(whole)["text/html"]
    assert "<b>" not in final["text/html"] and "&lt;b&gt;" in final["text/html"]
    assert final["text/plain"].startswith("word <b>x</b>") and final["text/plain"].endswith(ANSWER_IN_HTML)
    assert len(final["text/plain"]) < 300
    assert answer_text(final).startswith("word <b>x</b> word")
    assert all(set(b) == {STREAM_MIME, "text/plain"} for b in live)
    # Each update applies to the HTML the one before it built; the result is sanitized.
    html = ""
    for b in live:
        rebuilt = apply_update(html, b[STREAM_MIME])
        assert rebuilt is not None and len(rebuilt) >= len(html) and clean(rebuilt) == rebuilt
        html = rebuilt
    assert html.startswith('<div class="crystal-answer') and "&lt;b&gt;" in html and "<b>" not in html
    shown = html.count("word &lt;b&gt;x&lt;/b&gt;") // 10  # pieces the last update showed
    assert shown >= 500 and html == markdown_bundle(piece * shown)["text/html"]
    # A paragraph growing at its end re-sends only its end: the pieces add up to about
    # the answer's HTML once.
    assert sum(len(b[STREAM_MIME]["html"]) for b in live) < 1.1 * len(final["text/html"])
    assert len(live) <= 20 * DELTA_RATE + 2
    # What a reloaded page gets again is the whole HTML so far, not the last change.
    assert apply_update("", shown_again[-2][STREAM_MIME]) == html
    assert shown_again[-2][STREAM_MIME]["at"] == 0


def test_stream_deltas_render_an_unclosed_fence_as_code_and_survive_other_alphabets():
    """A fence still open mid-stream shows as a code block (CommonMark: it runs to the
    end of the text so far); offsets count UTF-16 code units, as the browser does, so
    text beyond the BMP (emoji) does not shift them."""
    from crystal_kernel.jupyter.safe_html import markdown_html
    from crystal_kernel.jupyter.stream_html import STREAM_MIME, apply_update

    out, clock = RecordingOutput(deltas=True), Clock()
    r = Renderer(out, clock=clock, max_rate=15)
    r.start(None)
    pieces = ["# Plan 🚀\n\n", "Run `ls` first ✓.\n\n", "```python\nprint('😀')\n", "x = 1\n", "```\n\nDone 🎉."]
    html, texts = "", ""
    for i, p in enumerate(pieces):
        clock.now = i
        r.render(TextDelta(text=p))
        texts += p
        html = apply_update(html, out.sent[-1][STREAM_MIME]) or "MISSED"
        assert html == markdown_html(texts)
        if i == 2:  # the fence is open: a code block, not a paragraph with backticks
            assert '<pre class="crystal-code" data-lang="python"' in html and "```" not in html
        if i >= 1:
            assert "<h1>Plan 🚀</h1>" in html and "<code>ls</code>" in html
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    assert out.sent[-1]["text/html"] == html


def test_stream_deltas_are_off_for_a_front_that_did_not_ask_for_them():
    out, clock = RecordingOutput(), Clock()
    r = Renderer(out, clock=clock, max_rate=15)
    r.start(None)
    r.render(TextDelta(text="hello"))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    assert set(out.outputs[0]) == {"text/plain", "text/html"}
