"""TRUST-1: the transcript endpoint the sidebar reads gives text parts as Markdown
rendered and sanitized on the server (``html``), and keeps every other model or tool
string as plain text (the sidebar puts those in with textContent)."""

from __future__ import annotations

import re

from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart, dump_transcript
from crystal_kernel.host.store import SessionStore

PAYLOAD = '<img src=x onerror="window.__pwned=1"> [x](javascript:window.__pwned=1)'


def test_trust1_transcript_html_is_sanitized_markdown(api, jp_root_dir):
    transcript = [
        Message.user_text("Show me " + PAYLOAD),
        Message(role="assistant", parts=[
            TextPart(text="| a | b |\n| --- | --- |\n| 1 | 2 |\n\n```sh\necho $HOME\n```\n\n" + PAYLOAD),
            ToolCallPart(id="c1", name="bash", arguments={"command": PAYLOAD})]),
        Message(role="user", parts=[ToolResultPart(call_id="c1", name="bash", ok=True, text=PAYLOAD)]),
    ]
    doc = {"version": 1, "id": "20261130-050000-abc123", "created": "2026-11-30T05:00:00+00:00",
           "updated": "2026-11-30T05:10:00+00:00", "topic": PAYLOAD, "mode": "work", "approval": "edit",
           "provider": "openai", "model": "m", "turns": 1, "transcript": dump_transcript(transcript),
           "history": dump_transcript(transcript), "usage": {}}
    SessionStore(jp_root_dir).save(doc)
    status, data = api("GET", "sessions", "20261130-050000-abc123")
    assert status == 200
    answer = data["messages"][1]["parts"][0]
    assert answer["text"].endswith(PAYLOAD)  # the raw text, for textContent
    html = answer["html"]
    # echo is coloured (a builtin), $HOME stays text.
    assert "<table>" in html and re.search(
        r'<pre class="crystal-code" data-lang="sh"[^>]*><code[^>]*><span style="[^"]*">echo</span> \$HOME', html)
    assert "<img" not in html and 'href="javascript' not in html
    assert not re.search(r"<[a-z][^<>]*\son\w+=", html), "no element has an event handler"
    assert "&lt;img" in html
    # Tool calls and results carry no html at all: the sidebar shows them as text.
    assert "html" not in data["messages"][1]["parts"][1] and "html" not in data["messages"][2]["parts"][0]
