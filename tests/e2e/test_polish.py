"""What a person notices in a Crystal notebook, in a real JupyterLab + Chromium, light
and dark (docs/jupyterlab.md):

- "Insert as Markdown cell" on an answer's (non-Python) code block makes a Markdown cell
  with the fenced code: running it renders it and sends nothing to the model (a Python
  block makes a %%python cell: tests/e2e/test_workbench.py, NB-1).
- Code in answers is highlighted (with the text escaped as before, TRUST-1), Markdown
  tables are left-aligned, a code block keeps its distance from the next paragraph, the
  Thinking card has a border and a background of its own, and ``/logs --follow`` output
  is bounded and scrolls.
- Every text Crystal shows (answers, cards, diffs, forms, warnings, the thinking card,
  tables, code, the status bar item, the sidebar and a transcript) reads at a WCAG
  contrast of at least 4.5:1 against its effective background, in JupyterLab Light and
  Dark, measured from the computed styles.
- The launcher's Crystal notebook tile shows the kernelspec's logo, not a letter.
- The status bar item says the true state after a reload and when no kernel runs.

Screenshots go to /work/wt/shots/polish/ (or $CRYSTAL_SHOTS) and build/screenshots/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import NB, READY, new_crystal_notebook, type_and_run
from tests.e2e.contrast import low_contrast, set_theme

ROOT = Path(__file__).resolve().parents[2]
SHOTS = [Path(os.environ.get("CRYSTAL_SHOTS", "/work/wt/shots/polish")), ROOT / "build" / "screenshots"]
THEMES = ("JupyterLab Light", "JupyterLab Dark")
CELLS = "() => window.jupyterapp.shell.currentWidget.content.model.cells.length"
# Every place Crystal draws text: the notebook's outputs (answers, cards, forms, logs),
# the Copy/Insert bar, the status bar item, the sidebar and a transcript.
CRYSTAL_TEXT = [f"{NB} .jp-OutputArea-output", ".jp-crystal-status", "#crystal-sidebar", ".jp-crystal-transcript"]


def shoot(page, name: str) -> None:
    for folder in SHOTS:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        page.screenshot(path=str(folder / f"{name}.png"))


def theme_slug(theme: str) -> str:
    return theme.split()[-1].lower()


@pytest.fixture(scope="module")
def nb(browser, lab):
    with new_crystal_notebook(browser, lab) as page:
        yield page
        set_theme(page, "JupyterLab Light")


def wait_idle(page) -> None:
    page.wait_for_function(READY, arg="crystal", timeout=90_000)


def chat_requests(lab) -> int:
    return len(lab.server.bodies("chat"))


def test_insert_as_new_cell_makes_a_markdown_cell_the_model_never_receives(nb, lab):
    page = nb
    lab.server.add({"text": "Run this:\n\n```sh\necho $((6 * 7))\n```\n\nThat prints 42."})
    type_and_run(page, "How do I print 42?")
    answer = page.locator(f"{NB} .crystal-answer").last
    answer.get_by_text("That prints 42.").wait_for(timeout=60_000)
    wait_idle(page)
    before = chat_requests(lab)
    cells = page.evaluate(CELLS)
    insert = answer.locator(".jp-crystal-insert")
    assert "Markdown" in insert.inner_text(), "the button says what it makes"
    insert.click()
    page.wait_for_function(f"() => ({CELLS})() === {cells + 1}")
    inserted = page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content;
        const cell = nb.activeCell; return {type: cell.model.type, source: cell.model.sharedModel.getSource(),
        index: nb.activeCellIndex}; }""")
    assert inserted == {"type": "markdown", "source": "```sh\necho $((6 * 7))\n```", "index": 1}, inserted
    # The person runs the new cell, as they would any cell.
    page.keyboard.press("Shift+Enter")
    rendered = page.locator(f"{NB} .jp-MarkdownCell .jp-RenderedMarkdown pre", has_text="echo $((6 * 7))")
    rendered.wait_for()
    page.wait_for_timeout(2000)  # time for a request to the model, if one were sent
    wait_idle(page)
    assert chat_requests(lab) == before, "running the inserted cell sent nothing to the model"
    assert lab.server.pending == 0
    shoot(page, "insert-as-markdown-cell-light")


CODE = 'def total(xs):\n    # add them up\n    label = "<img src=x onerror=window.__pwned=1>"\n    return sum(xs) + 1\n'
ANSWER = ("| service | monthly cost |\n| --- | --- |\n| api | 12 |\n| db | 5 |\n\n"
          f"```python\n{CODE}```\nThe paragraph after the code.")


def test_answer_code_is_highlighted_tables_left_aligned_blocks_spaced_thinking_set_apart(nb, lab):
    page = nb
    lab.server.add({"reasoning": "First I compare the two services by their monthly cost.", "text": ANSWER})
    page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget.content;"
                  " nb.activeCellIndex = nb.widgets.length - 1; }")
    type_and_run(page, "Which service costs more?")
    answer = page.locator(f"{NB} .crystal-answer", has_text="The paragraph after the code.").last
    answer.wait_for(timeout=60_000)
    wait_idle(page)
    code = answer.locator("pre.crystal-code")
    # TRUST-1 holds: the code reads exactly as written, markup in it stays text.
    assert code.locator("code").inner_text().rstrip("\n") == CODE.rstrip("\n")
    assert code.locator("img").count() == 0 and page.evaluate("() => window.__pwned === undefined")
    for theme in THEMES:
        set_theme(page, theme)
        colours = page.evaluate("""(pre) => { const el = [...document.querySelectorAll(pre)].pop();
            const colour = word => { const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
                for (let t = w.nextNode(); t; t = w.nextNode()) {
                    if (t.textContent.includes(word)) return getComputedStyle(t.parentElement).color; }
                return null; };
            return {plain: getComputedStyle(el.querySelector('code')).color, keyword: colour('def'),
                    comment: colour('# add them up'), string: colour('onerror'), builtin: colour('sum')}; }""",
                                f"{NB} .crystal-answer pre.crystal-code")
        plain = colours.pop("plain")
        assert all(c and c != plain for c in colours.values()), (theme, plain, colours)
        assert len(set(colours.values())) >= 3, ("keywords, comments and strings differ", theme, colours)
        # Tables read left to right, as JupyterLab's own Markdown tables do.
        aligns = answer.locator("th, td").evaluate_all("cells => cells.map(c => getComputedStyle(c).textAlign)")
        assert aligns and all(a in ("left", "start") for a in aligns), aligns
        # The paragraph after a code block does not touch it.
        gap = page.evaluate("""(pre) => { const el = [...document.querySelectorAll(pre)].pop();
            return el.nextElementSibling.getBoundingClientRect().top - el.getBoundingClientRect().bottom; }""",
                            f"{NB} .crystal-answer pre.crystal-code")
        assert gap >= 8, gap
        # The Thinking card is set apart: a border and a background of its own.
        thinking = page.evaluate("""(sel) => { const el = [...document.querySelectorAll(sel)].pop();
            const s = getComputedStyle(el); let n = el.parentElement; let around = 'rgba(0, 0, 0, 0)';
            while (n && (around === 'rgba(0, 0, 0, 0)' || around === 'transparent')) {
                around = getComputedStyle(n).backgroundColor; n = n.parentElement; }
            return {border: parseFloat(s.borderLeftWidth), borderColour: s.borderLeftColor,
                    background: s.backgroundColor, around, text: el.innerText}; }""",
                                 f"{NB} details.crystal-thinking")
        assert "monthly cost" in thinking["text"] or thinking["text"].startswith("Thinking"), thinking
        assert thinking["border"] >= 2 and thinking["borderColour"] != thinking["background"], thinking
        assert thinking["background"] not in ("rgba(0, 0, 0, 0)", thinking["around"]), thinking
        answer.scroll_into_view_if_needed()
        shoot(page, f"answer-highlight-table-thinking-{theme_slug(theme)}")
    set_theme(page, "JupyterLab Light")


LOG_BOX = """el => { const out = el.closest('.jp-OutputArea-output'); const pre = el.querySelector('pre');
    const s = getComputedStyle(pre);
    return {height: out.getBoundingClientRect().height, client: pre.clientHeight, scroll: pre.scrollHeight,
            top: pre.scrollTop, overflow: s.overflowY}; }"""


def test_logs_follow_output_is_bounded_scrolls_and_shows_the_newest_line(nb, lab):
    page = nb
    lab.server.add({"tool_calls": [{"name": "bash_start",
                                    "arguments": {"command": "seq 1 400; sleep 6; echo finished"}}]},
                   {"text": "Started the job."})
    type_and_run(page, "Count to 400 in the background")
    page.locator(NB).get_by_text("Started the job.").wait_for(timeout=60_000)
    wait_idle(page)
    type_and_run(page, "/logs j1 --follow")
    view = page.locator(f"{NB} [data-job='j1']").last
    view.locator("pre", has_text="400").wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()
    # Like a terminal's tail: the newest line is in sight.
    page.wait_for_function("() => { const pre = [...document.querySelectorAll('[data-job=\"j1\"] pre')].pop();"
                           " return pre.scrollHeight - pre.scrollTop - pre.clientHeight <= 2; }", timeout=10_000)
    box = view.evaluate(LOG_BOX)
    assert box["height"] <= 450, ("at most half the window", box)
    assert box["scroll"] > box["client"] and box["overflow"] in ("auto", "scroll"), box
    shoot(page, "logs-follow-tail-light")
    # A person who scrolls up to read stays there while the job writes on.
    view.locator("pre").hover()
    page.mouse.wheel(0, -200)
    page.wait_for_timeout(300)
    scrolled = view.evaluate(LOG_BOX)["top"]
    assert scrolled < box["top"] - 100, (scrolled, box)
    page.locator(f"{NB} [data-job='j1'][data-state='exited'] pre", has_text="finished").wait_for(timeout=30_000)
    page.wait_for_timeout(500)
    assert abs(view.evaluate(LOG_BOX)["top"] - scrolled) <= 2
    for theme in THEMES:
        set_theme(page, theme)
        box = view.evaluate(LOG_BOX)
        assert box["height"] <= 450 and box["scroll"] > box["client"], (theme, box)
        shoot(page, f"logs-follow-bounded-{theme_slug(theme)}")
    set_theme(page, "JupyterLab Light")


def measure(page, theme: str, where: str, failures: list[str]) -> int:
    checked, bad = low_contrast(page, CRYSTAL_TEXT)
    failures += [f"{theme} · {where}: {b['ratio']}:1 {b['text']!r} ({b['color']} on {b['background']}) in {b['where']}"
                 for b in bad]
    return checked


def measure_both(page, where: str, failures: list[str]) -> None:
    for theme in THEMES:
        set_theme(page, theme)
        assert measure(page, theme, where, failures) > 0
        shoot(page, f"contrast-{where}-{theme_slug(theme)}")
    set_theme(page, "JupyterLab Light")


def test_every_crystal_text_has_contrast_in_light_and_dark(nb, lab):
    page = nb
    failures: list[str] = []
    lab.server.add(
        {"tool_calls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "alpha\nbeta\n"}},
                        {"name": "bash", "arguments": {"command": "echo done"}},
                        {"name": "read", "arguments": {"path": "missing.txt"}}]},
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "old_string": "beta",
                                                       "new_string": "gamma"}}]},
        {"text": "Tidied. The **notes** now end with `gamma`."},
    )
    type_and_run(page, "Tidy the notes")
    page.locator(NB).get_by_text("Tidied.").wait_for(timeout=60_000)
    wait_idle(page)
    measure_both(page, "cards", failures)
    # Forms: an approval with its diff, one with a warning, a question.
    type_and_run(page, "/approval default")
    wait_idle(page)
    lab.server.add(
        {"tool_calls": [{"name": "edit", "arguments": {"path": "notes.txt", "old_string": "gamma",
                                                       "new_string": "delta"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one\necho two"}}]},
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            {"header": "Service", "question": "Which service should I split out?",
             "options": [{"label": "billing-api", "description": "payments"},
                         {"label": "auth-api", "description": "logins"}]}]}}]},
        {"text": "Done."},
    )
    type_and_run(page, "Change the notes again")
    allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once").last
    allow.wait_for(timeout=60_000)
    measure_both(page, "approval-diff", failures)
    allow.click()
    deny = page.locator(f"{NB} .crystal-form .jupyter-button", has_text="Deny").last
    page.locator(f"{NB} .crystal-form", has_text="echo two").last.wait_for(timeout=60_000)
    measure_both(page, "approval-warning", failures)
    deny.click()
    dismiss = page.locator(f"{NB} .crystal-form .jupyter-button", has_text="Dismiss").last
    dismiss.wait_for(timeout=60_000)
    measure_both(page, "question", failures)
    dismiss.click()
    page.locator(NB).get_by_text("Done.").wait_for(timeout=60_000)
    wait_idle(page)
    # The sidebar, and a session's transcript.
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.locator("#crystal-sidebar .jp-crystal-session").first.wait_for(timeout=30_000)
    page.locator("#crystal-sidebar .jp-crystal-session").first.click()
    page.locator(".jp-crystal-transcript").get_by_text("Tidied.").wait_for(timeout=30_000)
    measure_both(page, "sidebar-transcript", failures)
    page.evaluate("""() => { const main = [...window.jupyterapp.shell.widgets('main')];
        main.find(w => w.node.classList.contains('jp-crystal-transcript')).close();
        window.jupyterapp.shell.activateById(main.find(w => w.content && w.context).id); }""")
    page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()  # closed again
    assert not failures, "\n".join(failures)


def test_launcher_tile_shows_the_kernel_logo(nb, lab):
    page = nb
    page.evaluate("() => window.jupyterapp.commands.execute('launcher:create')")
    tile = page.locator(".jp-Launcher-section", has_text="Notebook").locator(".jp-LauncherCard[title='Crystal']")
    tile.wait_for()
    assert tile.locator(".jp-LauncherCard-noKernelIcon").count() == 0, "not a plain letter"
    logo = tile.locator("img")
    page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=logo.element_handle())
    assert "/kernelspecs/crystal/logo" in (logo.get_attribute("src") or "")
    shoot(page, "launcher-logo-light")
    set_theme(page, "JupyterLab Dark")
    shoot(page, "launcher-logo-dark")
    set_theme(page, "JupyterLab Light")
    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")


STATUS = "() => { const el = document.querySelector('.jp-crystal-status'); return el ? el.innerText : null; }"


def wait_status(page, words: str) -> None:
    """Wait until the status bar item says ``words``; fail saying what it says."""
    try:
        page.wait_for_function(f"(w) => ({STATUS})() && ({STATUS})().includes(w)", arg=words, timeout=30_000)
    except Exception:
        raise AssertionError(f"the status bar item says {page.evaluate(STATUS)!r}, not {words!r}") from None


@pytest.mark.timeout(600)  # three reload-and-wait steps on a shared machine
def test_status_bar_says_the_true_state_after_reload_and_with_no_kernel(nb, lab):
    page = nb
    page.locator(".jp-crystal-status", has_text="default").wait_for()  # /approval default, earlier
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    wait_idle(page)
    wait_status(page, "default")
    assert "starting" not in page.evaluate(STATUS)
    shoot(page, "status-after-reload-light")
    # Reloaded while a turn waits for the person: the kernel answers nothing until the
    # turn ends, and still the item says the session's mode, approval and model (as the
    # session's document last saved them, after its first turn).
    lab.server.add({"text": "Hello."})
    type_and_run(page, "Hi")
    page.locator(NB).get_by_text("Hello.").wait_for(timeout=60_000)
    wait_idle(page)
    lab.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [
        {"header": "Service", "question": "Which service should I split out?",
         "options": [{"label": "billing-api", "description": "payments"},
                     {"label": "auth-api", "description": "logins"}]}]}}]},
                   {"text": "Understood.\n\n```python\nx = 1\n```"})
    page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget.content;"
                  " nb.activeCellIndex = nb.widgets.length - 1; }")
    type_and_run(page, "Split the services")
    page.locator(f"{NB} .crystal-form .jupyter-button", has_text="Dismiss").last.wait_for(timeout=60_000)
    page.reload()
    page.wait_for_function(READY.replace("k.status === 'idle'", "true"), arg="crystal", timeout=90_000)
    dismiss = page.locator(f"{NB} .crystal-form .jupyter-button", has_text="Dismiss").last
    dismiss.wait_for(timeout=60_000)
    wait_status(page, "openai:gpt-4.1")
    assert "starting" not in page.evaluate(STATUS)
    shoot(page, "status-reloaded-mid-turn-light")
    dismiss.click()
    page.locator(NB).get_by_text("Understood.").wait_for(timeout=60_000)
    wait_idle(page)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    wait_status(page, "no kernel")
    assert "starting" not in page.evaluate(STATUS)
    # With no kernel the notebook is still Crystal's (its saved kernelspec): Insert makes
    # a %%python cell (NB-1), never a prompt for the next kernel.
    cells = page.evaluate(CELLS)
    insert = page.locator(f"{NB} .crystal-answer", has_text="Understood.").last.locator(".jp-crystal-insert")
    assert insert.inner_text() == "Insert as %%python cell"
    insert.click()
    page.wait_for_function(f"() => ({CELLS})() === {cells + 1}")
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCell.model.sharedModel"
                         ".getSource()") == "%%python\nx = 1"
    set_theme(page, "JupyterLab Dark")
    shoot(page, "status-no-kernel-dark")
    set_theme(page, "JupyterLab Light")
