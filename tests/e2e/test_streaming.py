"""A streamed answer as a person sees it in real JupyterLab + Chromium at 1400x900
(TRUST-1), typing the prompt at a person's pace:

- while it streams, the answer is rendered Markdown (a heading, a code span, a code
  block whose fence is still open), not raw ``#``, backticks and fences; light and dark;
- the end of the stream does not make the answer jump: the cell's height right before
  the final output and right after it differ by less than 40 px, and the final answer's
  DOM is the one that streamed; and over six turns no animation frame shows the cell
  without its answer when the streamed output hands over to the final one;
- the notebook follows new text while the person is at its end, stops when they scroll
  up, and follows again once they scroll back down;
- a TRUST-1 payload split across many updates (``<img onerror>``, ``<script>``, a
  ``javascript:`` link) runs nothing while it streams, nor at the end.

The loopback model server holds each reply mid-stream (``hold_after``) while the test
looks. Screenshots go to /work/wt/shots/stream/ (or $CRYSTAL_SHOTS).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import NB, READY, new_crystal_notebook, type_and_run

SHOTS = Path(os.environ.get("CRYSTAL_SHOTS", "/work/wt/shots/stream"))
CHUNK = 4

ANSWER = (
    "# Release plan\n\n"
    "First run `make test` in the checkout, then build the wheel.\n\n"
    "- check the changelog\n- tag the commit\n- push the tag\n\n"
    "```python\n"
    "def build(version):\n"
    "    print('building', version)\n"
    "    return version\n"
    "```\n\n"
    "| step | minutes |\n| --- | --- |\n| test | 4 |\n| build | 2 |\n\n"
    + "\n\n".join(f"Note {n}: the release notes say what changed for people who use it." for n in range(1, 9))
    + "\n\nThat is the whole plan."
)

# Where the page is while the test looks: the answer's cell, and what it shows.
RECORDER = """(nb) => {
  const panel = document.querySelector(nb);
  window.__crystalSamples = [];
  const strip = answer => {
    const copy = answer.cloneNode(true);
    copy.querySelectorAll('.jp-crystal-code-tools').forEach(n => n.remove());
    copy.querySelectorAll('[data-crystal-tools]').forEach(n => n.removeAttribute('data-crystal-tools'));
    return copy.innerHTML;
  };
  const record = () => {
    const streaming = panel.querySelector('.jp-crystal-streaming');
    const cell = streaming ? streaming.closest('.jp-Cell') : window.__crystalCell;
    if (!cell) return;
    window.__crystalCell = cell;
    const answer = cell.querySelector('.crystal-answer');
    window.__crystalSamples.push({
      streaming: !!cell.querySelector('.jp-crystal-streaming'),
      height: cell.getBoundingClientRect().height,
      html: answer ? strip(answer) : null,
    });
  };
  new MutationObserver(record).observe(panel, {childList: true, subtree: true, characterData: true});
}"""
STREAMING = f"{NB} .jp-crystal-streaming"
PWNED = "() => ({pwned: window.__pwned === undefined ? null : window.__pwned, title: document.title})"


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def set_theme(page, theme: str) -> None:
    name = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}[theme]
    page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", name)
    page.wait_for_function("(t) => document.body.dataset.jpThemeName === t", arg=name, timeout=30_000)
    page.wait_for_timeout(500)


def events_until(text: str, marker: str, chunk: int = CHUNK) -> int:
    """Chat Completions events sent once ``text`` is streamed up to ``marker`` (the role
    event, then one event per chunk)."""
    return 1 + (text.index(marker) + len(marker) + chunk - 1) // chunk


def streamed_text(page) -> str:
    return page.locator(STREAMING).inner_text()


def wait_until_streamed(page, words: str) -> None:
    page.wait_for_function("([sel, words]) => { const n = document.querySelector(sel); "
                           "return !!n && n.innerText.includes(words); }", arg=[STREAMING, words], timeout=20_000)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_streamed_markdown_is_rendered_while_it_streams_and_does_not_jump_at_the_end(browser, lab, theme):
    """Rendered while it streams, no jump at the end (TRUST-1: the streamed HTML is the
    kernel's sanitized rendering)."""
    with new_crystal_notebook(browser, lab) as page:
        set_theme(page, theme)
        every_event = 1 + (len(ANSWER) + CHUNK - 1) // CHUNK
        lab.server.add({"text": ANSWER, "chunk": CHUNK, "delay": 0.01,
                        "hold_after": [events_until(ANSWER, "print('building', version)\n"), every_event]})
        page.evaluate(RECORDER, NB)
        type_and_run(page, "Plan the release")
        assert lab.server.wait_held(60)
        # Mid-stream: the fence is still open.
        page.locator(f"{STREAMING} pre.crystal-code").wait_for(timeout=20_000)
        wait_until_streamed(page, "print('building', version)")
        stream = page.locator(STREAMING)
        assert stream.locator("h1").inner_text() == "Release plan"
        assert stream.locator("p code").first.inner_text() == "make test"
        assert stream.locator("li").count() == 3
        assert "def build(version):" in stream.locator("pre.crystal-code").inner_text()
        shown = streamed_text(page)
        assert "```" not in shown and "`" not in shown and "# Release" not in shown and "- check" not in shown, shown
        # The code block has its buttons while it streams, as the final one will.
        assert stream.locator(".jp-crystal-code-tools").count() == 1
        shoot(page, f"mid-stream-{theme}")
        lab.server.release()
        # All the text is out; the kernel's next live update shows the rest, then the end.
        assert lab.server.wait_held(60)
        wait_until_streamed(page, "That is the whole plan.")
        assert page.locator(f"{STREAMING} table td").first.inner_text() == "test"
        lab.server.release()
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        page.wait_for_timeout(300)
        samples = page.evaluate("() => window.__crystalSamples")
        last_streamed = max(i for i, s in enumerate(samples) if s["streaming"])
        before = samples[last_streamed]
        after = next(s for s in samples[last_streamed + 1:] if not s["streaming"] and s["html"])
        assert abs(after["height"] - before["height"]) < 40, (before["height"], after["height"])
        assert after["html"] == before["html"]
        answer = page.locator(f"{NB} .crystal-answer").last
        assert answer.locator("h1").inner_text() == "Release plan"
        assert page.locator(STREAMING).count() == 0
        shoot(page, f"end-{theme}")
        set_theme(page, "light")


def scroller_gap(page) -> float:
    """How far the newest text (the answer's bottom edge) is below the visible part of
    the notebook, in px (negative: it is above the bottom edge, in view)."""
    return page.evaluate("""(nb) => {
      const outer = document.querySelector(nb + ' .jp-WindowedPanel-outer');
      const answers = document.querySelectorAll(nb + ' .crystal-answer');
      const last = answers[answers.length - 1];
      return last.getBoundingClientRect().bottom - outer.getBoundingClientRect().bottom;
    }""", NB)


def scroll_top(page) -> float:
    return page.evaluate("(nb) => document.querySelector(nb + ' .jp-WindowedPanel-outer').scrollTop", NB)


def test_the_notebook_follows_new_text_at_the_end_and_not_after_the_person_scrolls_up(browser, lab):
    """Following the newest text, as chat UIs do."""
    long_answer = "\n\n".join(f"Paragraph {n}: what the build does at this step, in a sentence or two."
                              for n in range(1, 71))
    holds = [events_until(long_answer, "Paragraph 30:", 8), events_until(long_answer, "Paragraph 50:", 8)]
    with new_crystal_notebook(browser, lab) as page:
        lab.server.add({"text": long_answer, "chunk": 8, "delay": 0.005, "hold_after": holds})
        type_and_run(page, "Explain the build")
        assert lab.server.wait_held(60)
        wait_until_streamed(page, "Paragraph 29:")
        page.wait_for_timeout(500)
        # The person was at the end: the newest text is in view, the page scrolled.
        assert scroll_top(page) > 300
        assert -200 < scroller_gap(page) <= 2, scroller_gap(page)
        shoot(page, "follow-at-end")
        # The person scrolls up to read: the page stays where they put it.
        page.mouse.move(700, 450)
        page.mouse.wheel(0, -600)
        page.wait_for_timeout(800)
        top = scroll_top(page)
        lab.server.release()
        assert lab.server.wait_held(60)
        wait_until_streamed(page, "Paragraph 49:")
        page.wait_for_timeout(800)
        assert abs(scroll_top(page) - top) <= 2, (scroll_top(page), top)
        assert scroller_gap(page) > 300
        shoot(page, "follow-stopped-after-scrolling-up")
        # Back to the end: following again, to the last paragraph.
        for _ in range(6):
            page.mouse.wheel(0, 2000)
            page.wait_for_timeout(200)
        page.wait_for_timeout(500)
        lab.server.release()
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        page.locator(f"{NB} .crystal-answer", has_text="Paragraph 70:").wait_for(timeout=20_000)
        page.wait_for_timeout(800)
        assert -300 < scroller_gap(page) <= 2, scroller_gap(page)
        shoot(page, "follow-resumed-at-end")


def test_trust1_a_payload_split_across_streamed_updates_runs_nothing(browser, lab):
    """TRUST-1: the model's raw HTML and a javascript: link, streamed three characters at
    a time (each payload spans many live updates), are shown as text while the answer
    around them renders, and nothing runs: not mid-stream, not at the end."""
    payloads = [
        '<img src=x onerror="window.__pwned=1;document.title=\'PWNED\'">',
        "<script>window.__pwned=2</script>",
        '<a href="javascript:window.__pwned=3" id="evil">click</a>',
        "[a markdown link](javascript:window.__pwned=4)",  # markdown-it keeps it as text
        '<details open ontoggle="window.__pwned=5">x</details>',
    ]
    text = "## Checking the page\n\n" + "\n\n".join(payloads) + "\n\nDone checking `the page`."
    inert = """(nb) => {
      // The answer's output, streaming or final (JupyterLab's own icons are elsewhere).
      const out = Array.from(document.querySelectorAll(nb + ' .crystal-answer'));
      const all = out.flatMap(o => Array.from(o.querySelectorAll('*')));
      return {
        answers: out.length,
        active: all.filter(e => ['IMG', 'SCRIPT', 'IFRAME', 'SVG', 'DETAILS'].includes(e.tagName.toUpperCase()))
          .map(e => e.outerHTML.slice(0, 80)),
        handlers: all.filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
        jsLinks: all.filter(e => (e.getAttribute('href') || '').trim().toLowerCase().startsWith('javascript')).length,
      };
    }"""
    with new_crystal_notebook(browser, lab) as page:
        lab.server.add({"text": text, "chunk": 3, "delay": 0.01,
                        "hold_after": 1 + (text.index("ontoggle") + 3) // 3})
        type_and_run(page, "Check the page")
        assert lab.server.wait_held(60)
        page.locator(f"{STREAMING} h2").wait_for(timeout=20_000)
        page.wait_for_timeout(1500)  # the last update is in, an image error handler would have run
        assert page.evaluate(PWNED)["pwned"] is None and "PWNED" not in page.evaluate(PWNED)["title"]
        assert page.evaluate(inert, NB) == {"answers": 1, "active": [], "handlers": 0, "jsLinks": 0}
        assert page.locator(f"{STREAMING} h2").inner_text() == "Checking the page"
        shown = streamed_text(page)
        assert '<img src=x onerror="window.__pwned=1' in shown and "<script>window.__pwned=2</script>" in shown
        assert "<details open" in shown
        shoot(page, "trust1-mid-stream")
        lab.server.release()
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        page.locator(f"{NB} .crystal-answer", has_text="Done checking").wait_for(timeout=20_000)
        page.locator(f"{NB} .crystal-answer", has_text="a markdown link").click()
        page.wait_for_timeout(1000)
        assert page.evaluate(PWNED)["pwned"] is None and "PWNED" not in page.evaluate(PWNED)["title"]
        assert page.evaluate(inert, NB) == {"answers": 1, "active": [], "handlers": 0, "jsLinks": 0}
        shoot(page, "trust1-end")


# Every animation frame (before it is painted): is the answer of the cell whose prompt is
# `prompt` on screen, and how tall is that cell.
FRAMES = """([nb, prompt]) => {
  const panel = document.querySelector(nb);
  window.__crystalFrames = [];
  const generation = (window.__crystalGeneration = (window.__crystalGeneration || 0) + 1);
  const loop = () => {
    if (generation !== window.__crystalGeneration) return;
    const cell = Array.from(panel.querySelectorAll('.jp-Cell'))
      .find(c => (c.querySelector('.cm-content') || {}).textContent === prompt);
    if (cell) {
      window.__crystalFrames.push({answer: !!cell.querySelector('.crystal-answer'),
                                   height: cell.getBoundingClientRect().height});
    }
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
}"""


def test_the_end_of_a_stream_never_paints_a_frame_without_the_answer(browser, lab):
    """The kernel ends a streamed answer by emptying its output and showing the whole
    text as a new one (for clients that ignore display updates); JupyterLab handles the
    two in separate tasks. Over six turns, no frame is painted between them without the
    answer, and the cell never shrinks (before the hand-over kept the old output on
    screen, a frame without the answer showed in about half the turns)."""
    text = "# Summary\n\n" + "\n\n".join(f"Line {n} of the answer, with a few words." for n in range(12))
    with new_crystal_notebook(browser, lab) as page:
        for turn in range(6):
            prompt = f"Summary {turn}"
            lab.server.add({"text": text, "chunk": 6, "delay": 0.005})
            page.evaluate(FRAMES, [NB, prompt])
            type_and_run(page, prompt)
            page.locator(f"{NB} .jp-Cell", has_text=prompt).locator(".crystal-answer").first.wait_for(timeout=60_000)
            page.wait_for_function(READY, arg="crystal", timeout=60_000)
            page.wait_for_timeout(400)
            frames = page.evaluate("() => window.__crystalFrames")
            first = next(i for i, f in enumerate(frames) if f["answer"])
            shown = frames[first:]
            assert all(f["answer"] for f in shown), (turn, [i for i, f in enumerate(shown) if not f["answer"]])
            heights = [f["height"] for f in shown]
            assert all(b >= a - 1 for a, b in zip(heights, heights[1:])), (turn, heights)
        page.evaluate("() => { window.__crystalGeneration += 1; }")
