"""The Crystal sidebar names each session by its notebook and topic — while topic naming
has not named it (it is off here), its first prompt, shortened and made safe — never by
a bare id, and says whether the session's last prompt was answered (SPEC §13 "Notebook
identity"). Real JupyterLab + Chromium, typed at a person's pace."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import NB, READY, new_crystal_notebook, type_and_run

SHOTS = Path("/work/wt/shots/small7")


def open_sessions(page):
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.locator("#crystal-sidebar .jp-crystal-refresh").click()
    row = page.locator("#crystal-sidebar .jp-crystal-session").first
    row.wait_for()
    return row


def test_sidebar_names_sessions_by_notebook_and_first_prompt_and_says_if_answered(browser, lab):
    with new_crystal_notebook(browser, lab) as page:
        lab.server.add({"text": "Noted: zebra."})
        type_and_run(page, "Remember the word zebra.")
        page.locator(NB).get_by_text("Noted: zebra.").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        session_id = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.getMetadata('crystal').session_id")

        row = open_sessions(page)
        page.wait_for_function(
            "() => (document.querySelector('#crystal-sidebar .jp-crystal-session') || {}).innerText"
            "?.includes('answered')", timeout=30_000)
        text = row.inner_text()
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        assert lines[0] == "“Remember the word zebra.”", lines
        assert lines[1].endswith(".ipynb"), lines  # the notebook, as the page named it
        assert session_id not in text  # the id is in the tooltip, not the label
        assert row.get_attribute("title") == f"Open session {session_id}"
        assert lines[-1].endswith("· answered") and "not answered" not in text, lines

        # The next prompt's request fails: the session's last prompt is not answered.
        lab.server.add({"status": 400, "message": "This model does not take that request."})
        page.keyboard.press("Escape")
        page.locator(f"{NB} .jp-Cell").last.click()
        type_and_run(page, "And now?")
        page.locator(NB).get_by_text("This model does not take that request.").first.wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        row = open_sessions(page)
        page.wait_for_function(
            "() => (document.querySelector('#crystal-sidebar .jp-crystal-session') || {}).innerText"
            "?.includes('not answered')", timeout=30_000)
        assert row.locator(".jp-crystal-unanswered").inner_text().strip() == "not answered"
        assert row.locator(".jp-crystal-row-title").inner_text() == "“Remember the word zebra.”"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#crystal-sidebar").screenshot(path=str(SHOTS / "sidebar-sessions-named-and-answered.png"))
        page.screenshot(path=str(SHOTS / "sidebar-sessions-page.png"))
