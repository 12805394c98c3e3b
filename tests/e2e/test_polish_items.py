"""The smaller workbench items a person noticed (docs/jupyterlab.md), each in a real
JupyterLab + Chromium, light and dark where it is visual:

- The question card says it waits for the person's answer while the form is open, not
  "running…" (SPEC §3, the question tool: the person's turn, not a tool at work).
- A ``bash_start`` card shows its command once (in its title) and says in the person's
  words that the job started and where its log is, not the text meant for the model.
- The sidebar's job log follows new output (its newest line in view) unless the person
  scrolled up to read, like the ``/logs --follow`` box.
- A session has one name in the sidebar, on its job rows and on its transcript's tab and
  heading: its topic, else its first prompt (quoted), else a short id.
- The status bar item names what each value is ("approval full", "prompts default"), so
  two values that read "default" are told apart.

Screenshots go to tests/e2e/artifacts/polish-items-*.png.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import NB, READY, new_crystal_notebook, shots_in_both_themes, type_and_run
from tests.e2e.contrast import low_contrast, set_theme

THEMES = ("JupyterLab Light", "JupyterLab Dark")
# A job that writes a line every tenth of a second for a minute: more than the sidebar's
# log box holds, still growing while the test reads it.
TICKS = "for i in $(seq 1 600); do echo polish-tick $i; sleep 0.1; done"
BOX = ".jp-crystal-job[data-id='j1'][data-session='{sid}'] .jp-crystal-log"
# How far the log box is from its bottom (px), and the last line it holds.
PLACE = """(sel) => { const b = document.querySelector(sel); if (!b) return null;
  const lines = b.textContent.trim().split('\\n');
  return {gap: b.scrollHeight - b.scrollTop - b.clientHeight, top: b.scrollTop,
          tall: b.scrollHeight > b.clientHeight + 20, last: lines[lines.length - 1]}; }"""


@pytest.fixture(scope="module")
def nb(browser, lab):
    with new_crystal_notebook(browser, lab) as page:
        yield page
        set_theme(page, "JupyterLab Light")


def shots(page, name: str) -> None:
    shots_in_both_themes(page, f"polish-items-{name}")


def test_question_card_says_it_waits_for_the_persons_answer(nb, lab):
    page = nb
    lab.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [
        {"header": "Service", "question": "Which service should I split out?",
         "options": [{"label": "billing-api", "description": "payments"},
                     {"label": "auth-api", "description": "logins"}]}]}}]},
                   {"text": "Splitting billing-api."})
    type_and_run(page, "Which service?")
    card = page.locator(f"{NB} .crystal-card[data-tool='question']").last
    card.wait_for(timeout=60_000)
    page.locator(f"{NB} .jupyter-button", has_text="Dismiss").last.wait_for(timeout=60_000)
    text = card.inner_text()
    assert "waiting for your answer" in text and "running" not in text, text
    for theme in THEMES:
        set_theme(page, theme)
        checked, bad = low_contrast(page, [f"{NB} .crystal-card[data-tool='question']"])
        assert checked and not bad, (theme, bad)
    shots(page, "question-waiting")
    page.locator(f"{NB} .jupyter-button", has_text="Dismiss").last.click()
    page.locator(f"{NB} .crystal-answer", has_text="Splitting billing-api.").wait_for(timeout=60_000)
    page.wait_for_function(READY, arg="crystal", timeout=90_000)
    assert "waiting for your answer" not in card.inner_text()


def test_status_bar_names_the_approval_mode_and_the_prompt_set(nb, lab):
    page = nb
    status = page.locator(".jp-crystal-status")
    page.wait_for_function("() => !!document.querySelector('.jp-crystal-status-promptset')", timeout=60_000)
    approval = page.locator(".jp-crystal-status-approval").inner_text()
    prompts = page.locator(".jp-crystal-status-promptset").inner_text()
    text = " ".join(status.inner_text().split())
    assert f"approval {approval}" in text and f"prompts {prompts}" in text, text
    for theme in THEMES:
        set_theme(page, theme)
        checked, bad = low_contrast(page, [".jp-crystal-status"])
        assert checked and not bad, (theme, bad)
    shots(page, "status-bar")


def test_bash_start_card_shows_the_command_once_and_speaks_to_the_person(nb, lab):
    page = nb
    command = TICKS
    lab.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": command}}]},
                   {"text": "It runs in the background."})
    type_and_run(page, "Start the slow job.")  # approval "full" in the test lab: no form
    page.locator(f"{NB} .crystal-answer", has_text="It runs in the background.").wait_for(timeout=60_000)
    page.wait_for_function(READY, arg="crystal", timeout=90_000)
    card = page.locator(f"{NB} .crystal-card[data-tool='bash_start']").last
    text = card.inner_text()
    assert text.count(command) == 1, text
    # Text meant for the model (which tool to call next, its JSON) is not the person's.
    assert "bash_status" not in text and "{" not in text, text
    assert "Started background job j" in text and "/logs j" in text, text
    for theme in THEMES:
        set_theme(page, theme)
        checked, bad = low_contrast(page, [f"{NB} .crystal-card[data-tool='bash_start']"])
        assert checked and not bad, (theme, bad)
    shots(page, "bash-start")


def test_sidebar_job_log_follows_new_output_unless_scrolled_up(nb, lab):
    page = nb
    sid = page.evaluate("() => window.jupyterapp.shell.currentWidget.model.getMetadata('crystal').session_id")
    box = BOX.format(sid=sid)
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    job = page.locator(f"#crystal-sidebar .jp-crystal-job[data-id='j1'][data-session='{sid}']")
    job.wait_for(timeout=30_000)
    job.locator(".jp-crystal-log-toggle").click()
    # Taller than its box, then through more than one refresh of the jobs list (which
    # re-draws the rows): the box shows the newest line each time, like /logs --follow.
    page.wait_for_function(f"() => ({PLACE})({box!r})?.tall", timeout=60_000)
    for _ in range(3):
        before = page.evaluate(PLACE, box)["last"]
        page.wait_for_function(f"(b) => {{ const p = ({PLACE})({box!r}); return p && p.last !== b; }}",
                               arg=before, timeout=30_000)
        page.wait_for_timeout(2_500)
        place = page.evaluate(PLACE, box)
        assert place["gap"] <= 8, place
    shots(page, "job-log-following")
    # Scrolled up to read: it stays there while the job writes on.
    page.evaluate(f"() => {{ document.querySelector({box!r}).scrollTop = 0; }}")
    page.wait_for_timeout(4_000)
    place = page.evaluate(PLACE, box)
    assert place["top"] <= 2 and place["gap"] > 8, place
    type_and_run(page, "/stop j1")
    page.wait_for_function(READY, arg="crystal", timeout=90_000)


def test_a_session_has_one_name_in_the_sidebar_its_jobs_and_its_transcript(nb, lab):
    page = nb
    sid = page.evaluate("() => window.jupyterapp.shell.currentWidget.model.getMetadata('crystal').session_id")
    name = "“Which service?”"  # no topic in the test lab (topicNaming off): the first prompt
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.locator("#crystal-sidebar .jp-crystal-refresh").click()
    row = page.locator(f"#crystal-sidebar .jp-crystal-session[data-id='{sid}']")
    row.wait_for(timeout=30_000)
    assert row.locator(".jp-crystal-row-title").inner_text() == name
    job = page.locator(f"#crystal-sidebar .jp-crystal-job[data-id='j1'][data-session='{sid}']")
    job.wait_for(timeout=30_000)
    assert job.locator(".jp-crystal-job-session").inner_text().startswith(f"j1 of {name}")
    row.click()
    view = page.locator(f"#crystal-transcript-{sid}")
    view.locator(".jp-crystal-transcript-header h2").wait_for(timeout=30_000)
    assert view.locator(".jp-crystal-transcript-header h2").inner_text() == name
    # The tab's label (what the tab shows), from the shell's own widget.
    widget = f"Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.id === 'crystal-transcript-{sid}')"
    assert page.evaluate(f"() => {widget}.title.label") == name
    assert page.locator(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel", has_text=name).count() == 1
    shots(page, "one-name")
    page.evaluate(f"() => {widget}.close()")
