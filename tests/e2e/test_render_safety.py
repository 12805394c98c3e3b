"""What a person sees of model text in a real JupyterLab (Chromium):

- TRUST-1: a turn whose answer (and tool call, and tool output) carries XSS payloads runs
  no script — the payloads would set ``window.__pwned`` or the page title — while a
  table, a code block and a safe link still render; the sidebar's transcript of that
  session renders its Markdown, sanitized, and runs nothing either.
- ``$`` is literal in commands and amounts; only clear math is typeset.
- Code blocks get Copy and "Insert as new cell" buttons that work (clipboard and a new
  cell), also after the saved notebook is reopened.
- Prompt cells wrap long lines; ``%%crystal`` cells in a Python notebook are edited as
  Markdown.
- JupyterLab Dark: a tool card's result box has readable contrast.

Screenshots of each state go to build/screenshots/ (gitignored).
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
KERNEL_READY = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.name === 'crystal' && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def run_cell(page, text: str) -> None:
    """Type into the active cell as a person would (per-key delay) and run it."""
    page.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content").click()
    page.keyboard.type(text, delay=60)
    page.keyboard.press("Shift+Enter")


def open_sidebar(page) -> None:
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.wait_for_selector("#crystal-sidebar .jp-crystal-section-jobs")


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))

PAYLOADS = [
    '<img src=x onerror="window.__pwned=1;document.title=\'PWNED\'">',
    "<script>window.__pwned=2</script>",
    '<svg onload="window.__pwned=3"></svg>',
    '<iframe src="javascript:parent.__pwned=4"></iframe>',
    '<a href="javascript:window.__pwned=5" id="evil-html-link">html link</a>',
    "[markdown link](javascript:window.__pwned=6)",
    '<details open ontoggle="window.__pwned=7">x</details>',
    "![beacon](javascript:window.__pwned=8)",
]
ANSWER = (
    "Here is the summary.\n\n"
    "| name | cost |\n| --- | --- |\n| api | $12k |\n| db | $5k |\n\n"
    "```python\nprint('hello from the answer')\n```\n\n"
    "Set $VAR and $HOME/bin; the area is $x^2$ here. See [the docs](https://example.org/docs).\n\n"
    + "\n\n".join(PAYLOADS)
)
PWNED = "() => ({pwned: window.__pwned === undefined ? null : window.__pwned, title: document.title})"


def contrast(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two ``rgb(...)`` colours."""

    def lum(css: str) -> float:
        r, g, b = (int(x) / 255 for x in re.findall(r"[\d.]+", css)[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted([lum(fg), lum(bg)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture(scope="module")
def nb(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.url.rstrip("/"))
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.locator(".jp-LauncherCard", has_text="New Crystal Notebook").click(timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    yield page
    context.close()


def test_trust1_payload_answer_runs_no_script_and_markdown_renders(nb, lab):
    page = nb
    title = page.title()
    lab.server.add(
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo '<img src=x onerror=window.__pwned=9>' $(echo hi) $HOME"}},
                        {"name": "list", "arguments": {"path": "."}}]},
        {"text": ANSWER},
    )
    run_cell(page, "Summarise the costs")
    answer = page.locator(".crystal-answer").last
    answer.get_by_text("Here is the summary.").wait_for()
    page.wait_for_function(KERNEL_READY)
    page.wait_for_timeout(1500)  # time for an onerror/onload to fire, if anything let it
    assert page.evaluate(PWNED) == {"pwned": None, "title": page.title()} and page.title() == title
    # The payloads are visible as text, not elements.
    assert answer.locator("img, script, svg, iframe, [onerror], [onload], [ontoggle]").count() == 0
    assert "<img src=x onerror=" in answer.inner_text()
    for link in answer.locator("a").all():
        assert not (link.get_attribute("href") or "").lower().startswith("javascript")
    # Clicking what used to be a javascript: link runs nothing either.
    answer.get_by_text("markdown link").click()
    page.wait_for_timeout(300)
    assert page.evaluate(PWNED)["pwned"] is None
    # Markdown still renders: a table, a code block, a safe link.
    assert answer.locator("table td").all_inner_texts()[:4] == ["api", "$12k", "db", "$5k"]
    assert "print('hello from the answer')" in answer.locator("pre.crystal-code").inner_text()
    assert answer.locator('a[href="https://example.org/docs"]').count() == 1
    # $ is literal in amounts and variables; $x^2$ alone is typeset.
    page.wait_for_function("() => document.querySelector('.crystal-answer mjx-container')")
    assert answer.locator("mjx-container").count() == 1
    assert "Set $VAR and $HOME/bin" in answer.inner_text()
    # The bash card shows its command as written: no math in cards.
    card = page.locator('.crystal-card[data-tool="bash"]').last
    assert "$(echo hi) $HOME" in card.inner_text()
    assert card.locator("mjx-container, img").count() == 0
    # The model's next request holds the raw answer (rendering changed nothing it sees).
    shoot(page, "sanitized-payload-answer")


def test_code_block_copy_and_insert_as_new_cell(nb, lab):
    page = nb
    answer = page.locator(".crystal-answer").last
    tools = answer.locator(".jp-crystal-code-tools")
    tools.wait_for()
    tools.locator(".jp-crystal-copy").click()
    page.wait_for_function("() => document.querySelector('.jp-crystal-copy').textContent === 'Copied'")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.strip() == "print('hello from the answer')"
    cells_before = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.length")
    tools.locator(".jp-crystal-insert").click()
    page.wait_for_function(f"() => window.jupyterapp.shell.currentWidget.content.model.cells.length === {cells_before + 1}")
    source = page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content;
        return nb.activeCell.model.sharedModel.getSource(); }""")
    # A Crystal notebook's code cells are prompts: a Python block comes as a %%python cell,
    # the person's own Python (NB-1; tests/e2e/test_workbench.py runs one and checks the
    # model gets nothing).
    assert source == "%%python\nprint('hello from the answer')"
    index = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")
    assert index == 1, "inserted right below the answer's cell"
    shoot(page, "code-block-inserted")
    # Put the notebook back as it was for the next tests.
    page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget.content; "
                  "nb.model.sharedModel.deleteCell(nb.activeCellIndex); }")


def test_prompt_cells_wrap_long_lines(nb, lab):
    page = nb
    page.evaluate("() => { const nb = window.jupyterapp.shell.currentWidget.content;"
                  " nb.activeCellIndex = nb.widgets.length - 1; }")
    editor = page.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content")
    editor.click()
    page.keyboard.type("please " * 60, delay=2)
    wrapped = page.evaluate("""() => { const c = document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active');
        const scroller = c.querySelector('.cm-scroller'); const content = c.querySelector('.cm-content');
        return {wrapping: content.classList.contains('cm-lineWrapping'),
                overflow: scroller.scrollWidth - scroller.clientWidth,
                height: content.getBoundingClientRect().height}; }""")
    assert wrapped["wrapping"] and wrapped["overflow"] <= 1, wrapped
    assert wrapped["height"] > 40, "the long line wraps onto several visual lines"
    shoot(page, "prompt-cell-wraps")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")


def test_dark_theme_result_box_has_contrast(nb, lab):
    page = nb
    box = '.crystal-card[data-tool="list"] pre'
    colours = f"""() => {{ const el = [...document.querySelectorAll('{box}')].pop(); const s = getComputedStyle(el);
        return [s.color, s.backgroundColor]; }}"""
    fg, bg = page.evaluate(colours)
    assert contrast(fg, bg) >= 4.5, (fg, bg)
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function(f"(bg) => ({colours})()[1] !== bg", arg=bg)
    page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
    dark_fg, dark_bg = page.evaluate(colours)
    assert sum(int(x) for x in re.findall(r"\d+", dark_bg)[:3]) < 300, dark_bg
    assert contrast(dark_fg, dark_bg) >= 4.5, (dark_fg, dark_bg)
    # The card's other text (title, state) also reads on the output's dark background.
    title = page.evaluate("""() => { const el = [...document.querySelectorAll('.crystal-card[data-tool="list"]')].pop();
        let bg = 'rgba(0, 0, 0, 0)'; let n = el;
        while (n && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) { bg = getComputedStyle(n).backgroundColor; n = n.parentElement; }
        return [getComputedStyle(el).color, bg]; }""")
    assert contrast(*title) >= 4.5, title
    page.locator('.crystal-card[data-tool="list"]').last.scroll_into_view_if_needed()
    shoot(page, "dark-theme-card")
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_function(f"(bg) => ({colours})()[1] === bg", arg=bg)


def test_trust1_sidebar_transcript_is_sanitized_markdown(nb, lab):
    page = nb
    open_sidebar(page)
    page.locator("#crystal-sidebar .jp-crystal-refresh").click()
    session = page.locator(".jp-crystal-session").first
    # The session says which notebook it belongs to.
    session.locator(".jp-crystal-session-notebook", has_text="Untitled.ipynb").wait_for()
    session.click()
    view = page.locator(".jp-crystal-transcript")
    view.get_by_text("Here is the summary.").wait_for()
    page.wait_for_timeout(1000)
    assert page.evaluate(PWNED)["pwned"] is None
    assert view.locator("table td").count() >= 4 and view.locator("pre.crystal-code").count() == 1
    assert view.locator("img, script, svg, iframe, [onerror], [onload], [ontoggle]").count() == 0
    assert "<img src=x onerror=" in view.inner_text()
    shoot(page, "sidebar-transcript-sanitized")
    page.evaluate("""() => { const main = [...window.jupyterapp.shell.widgets('main')];
        main.find(w => w.node.classList.contains('jp-crystal-transcript')).close();
        window.jupyterapp.shell.activateById(main.find(w => w.content && w.context).id); }""")


def test_saved_notebook_reopened_keeps_rendering_and_buttons(nb, lab):
    page = nb
    page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content"
                           " && window.jupyterapp.shell.currentWidget.context.path.endsWith('.ipynb')")
    # context.save(): the File menu's save would first offer to rename "Untitled".
    page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    path = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
    saved = json.loads((lab.root / path).read_text())
    outputs = [o for c in saved["cells"] for o in c.get("outputs", [])]
    assert not any("text/markdown" in o.get("data", {}) for o in outputs)
    # nbformat stores multi-line strings as lists of lines.
    assert any("crystal-answer" in "".join(o.get("data", {}).get("text/html", "")) for o in outputs)
    # Reopened without the kernel that made it: close, shut every kernel down, reload.
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.close(); }")
    for kernel in lab.api("GET", "api/kernels"):
        request = urllib.request.Request(f"{lab.url}api/kernels/{kernel['id']}", method="DELETE",
                                         headers={"Authorization": f"token {lab.token}"})
        urllib.request.urlopen(request, timeout=10).close()
    page.reload()
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=60_000)
    page.evaluate(f"""async () => {{ await window.jupyterapp.restored;
        await window.jupyterapp.commands.execute('docmanager:open', {{path: {json.dumps(path)}}}); return true; }}""")
    answer = page.locator(".crystal-answer").last
    try:
        answer.get_by_text("Here is the summary.").wait_for()
        answer.locator(".jp-crystal-code-tools .jp-crystal-copy").wait_for()
    except Exception:
        shoot(page, "FAILED-reopened-notebook")
        raise
    page.wait_for_timeout(1000)
    assert page.evaluate(PWNED)["pwned"] is None
    assert answer.locator("table td").count() == 4
    shoot(page, "reopened-notebook")


def test_static_html_export_is_readable_and_inert(nb, lab, browser, tmp_path):
    """The saved notebook exported with nbconvert (what GitHub-like viewers show)."""
    import nbformat
    from nbconvert import HTMLExporter

    path = lab.root / "Untitled.ipynb"
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    html_file = tmp_path / "export.html"
    html_file.write_text(body)
    context = browser.new_context(viewport={"width": 1200, "height": 900}, offline=True)
    page = context.new_page()
    page.goto(html_file.as_uri())
    page.get_by_text("Here is the summary.").wait_for()
    page.wait_for_timeout(1000)
    assert page.evaluate(PWNED)["pwned"] is None
    assert page.locator(".crystal-answer table td").count() == 4
    assert "print('hello from the answer')" in page.locator(".crystal-answer pre").inner_text()
    assert "$(echo hi) $HOME" in page.locator('.crystal-card[data-tool="bash"]').inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "static-export.png"))
    context.close()


def test_magic_cells_are_markdown_and_wrap_in_a_python_notebook(browser, lab):
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                     "source": "%%crystal\nPlease look at " + "the data frame " * 30},
                    {"cell_type": "code", "execution_count": None, "id": "c2", "metadata": {}, "outputs": [],
                     "source": "import math\nprint(math.pi)"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (lab.root / "magic.ipynb").write_text(json.dumps(nb))
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{lab.url}lab/tree/magic.ipynb?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.content "
                           "&& window.jupyterapp.shell.currentWidget.content.widgets.length === 2", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.widgets[0].model.mimeType === 'text/markdown'")
    state = page.evaluate("""() => { const cells = window.jupyterapp.shell.currentWidget.content.widgets;
        return cells.map(c => ({mime: c.model.mimeType,
            wrap: !!c.node.querySelector('.cm-content.cm-lineWrapping')})); }""")
    assert state[0] == {"mime": "text/markdown", "wrap": True}
    assert state[1]["mime"] != "text/markdown" and not state[1]["wrap"], "plain Python cells stay Python"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "magic-cell-markdown.png"))
    context.close()
