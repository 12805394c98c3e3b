"""The Crystal lab extension in a real browser against a real ``jupyter lab``: the
launcher entry, the status bar of a Crystal notebook, a turn that asks a question
(answered by clicking) and starts a background job, that job in the sidebar with its
live log and Stop, the session and its transcript, and a prompt set enabled from the
sidebar (PS-5) — each checked on screen and on disk."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

KERNEL_READY = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.name === 'crystal' && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def run_cell(page, text: str) -> None:
    """Type into the active cell's editor and run it (Shift+Enter), as a person would."""
    editor = page.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content")
    editor.click()
    page.keyboard.type(text)
    page.keyboard.press("Shift+Enter")


def open_sidebar(page) -> None:
    """Click the Crystal tab in the left bar, unless the sidebar is already showing."""
    if not page.locator("#crystal-sidebar").is_visible():
        page.locator('.lm-TabBar-tab[data-id="crystal-sidebar"]').click()
    page.wait_for_selector("#crystal-sidebar .jp-crystal-section-jobs")


@pytest.fixture(scope="module")
def notebook_page(browser, lab):
    """One Crystal notebook created from the launcher, shared by the tests in order."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    card = page.locator(".jp-LauncherCard", has_text="New Crystal Notebook")
    card.wait_for(timeout=60_000)
    yield page, card
    context.close()


def test_launcher_entry_opens_a_notebook_with_the_crystal_kernel(notebook_page, lab):
    page, card = notebook_page
    assert card.is_visible()
    card.click()
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    name = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.name")
    assert name == "crystal"


def test_status_bar_shows_mode_and_follows_slash_commands(notebook_page, lab):
    page, _ = notebook_page
    status = page.locator(".jp-crystal-status")
    status.wait_for()
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-mode')?.textContent === 'work'")
    assert "full" in status.inner_text() and "openai:gpt-4.1" in status.inner_text()
    run_cell(page, "/mode plan")
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-mode')?.textContent === 'plan'")
    run_cell(page, "/mode work")
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-mode')?.textContent === 'work'")
    page.wait_for_function(KERNEL_READY)


def test_turn_with_question_then_job_in_sidebar_with_log_and_stop(notebook_page, lab, request):
    page, _ = notebook_page
    lab.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [{
            "header": "Ticker", "question": "Start the ticker job?",
            "options": [{"label": "Yes", "description": "start it"}, {"label": "No", "description": "skip"}]}]}}]},
        {"tool_calls": [{"name": "bash_start", "arguments": {
            "command": "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done"}}]},
        {"text": "Started the ticker as job j1."},
    )
    run_cell(page, "Please start the ticker")
    yes = page.locator(".jupyter-button", has_text="Yes")
    yes.wait_for()
    shoot(page, "question-form")
    yes.click()
    page.get_by_text("Started the ticker as job j1.").wait_for()
    page.wait_for_function(KERNEL_READY)
    # The model got the answer the click gave.
    results = [m for m in lab.server.bodies("chat")[-2]["messages"] if m.get("role") == "tool"]
    assert "Yes" in results[-1]["content"]

    open_sidebar(page)
    job = page.locator('.jp-crystal-job[data-id="j1"]')
    job.wait_for()
    assert job.get_attribute("data-state") == "running"
    job.locator(".jp-crystal-log-toggle").click()
    page.wait_for_function(
        "() => /tick \\d+/.test(document.querySelector('.jp-crystal-job[data-id=\"j1\"] .jp-crystal-log')?.textContent || '')")
    first = job.locator(".jp-crystal-log").inner_text()
    # The tail is live: new ticks arrive by offset polling.
    page.wait_for_function(
        "(n) => { const t = document.querySelector('.jp-crystal-job[data-id=\"j1\"] .jp-crystal-log')?.textContent || '';"
        " const m = t.match(/tick (\\d+)/g); return m && parseInt(m[m.length-1].split(' ')[1]) > n; }",
        arg=max(int(x) for x in re.findall(r"tick (\d+)", first)))
    shoot(page, "job-running-log")
    job.locator(".jp-crystal-stop").click()
    page.wait_for_function(
        "() => { const j = document.querySelector('.jp-crystal-job[data-id=\"j1\"]'); return j && j.dataset.state !== 'running'; }")
    shoot(page, "job-stopped")
    session_dir = next((lab.root / ".crystal" / "data" / "jobs").iterdir())
    status = json.loads((session_dir / "j1.json").read_text())
    assert status["state"] != "running"


def test_sidebar_lists_the_session_and_shows_its_transcript(notebook_page, lab):
    page, _ = notebook_page
    open_sidebar(page)
    page.locator("#crystal-sidebar .jp-crystal-refresh").click()
    session = page.locator(".jp-crystal-session").first
    session.wait_for()
    session.click()
    view = page.locator(".jp-crystal-transcript")
    # The message (the heading also names the session by this first prompt).
    view.locator(".jp-crystal-messages").get_by_text("Please start the ticker").wait_for()
    view.get_by_text("Started the ticker as job j1.").wait_for()
    assert "bash_start" in view.inner_text()
    shoot(page, "transcript")


def test_enabling_a_prompt_set_in_the_sidebar_writes_the_manifest(notebook_page, lab):
    page, _ = notebook_page
    folder = lab.home / "promptsets" / "terse"
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps({"name": "Terse answers", "keep": "me"}))
    (folder / "work.md").write_text("Answer tersely.\n")
    open_sidebar(page)
    page.locator("#crystal-sidebar .jp-crystal-refresh").click()
    row = page.locator('.jp-crystal-promptset[data-name="terse"]')
    row.locator(".jp-crystal-enable").click()
    page.wait_for_selector('.jp-crystal-promptset.jp-mod-selected[data-name="terse"]')
    assert json.loads((folder / "prompt.json").read_text()) == {"name": "Terse answers", "keep": "me", "enabled": True}
    assert "enabled" in page.locator(".jp-crystal-line").inner_text()
    # The notebook's status bar asks the kernel again and shows the new set.
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-promptset')?.textContent === 'terse'")
    shoot(page, "promptset-enabled")
    page.locator('.jp-crystal-promptset[data-name="default"] .jp-crystal-enable').click()
    page.wait_for_selector('.jp-crystal-promptset.jp-mod-selected[data-name="default"]')
    assert json.loads((folder / "prompt.json").read_text())["enabled"] is False
    page.wait_for_function("() => document.querySelector('.jp-crystal-status-promptset')?.textContent === 'default'")


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_sidebar_follows_the_dark_theme(notebook_page, lab):
    page, _ = notebook_page
    open_sidebar(page)
    background = "() => getComputedStyle(document.querySelector('#crystal-sidebar')).backgroundColor"
    light = page.evaluate(background)
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function(f"(light) => ({background})() !== light", arg=light)
    page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
    dark = page.evaluate(background)
    # Dark theme: the sidebar's own background turned dark (theme variables, no fixed colours).
    channels = [int(x) for x in re.findall(r"\d+", dark)[:3]]
    assert sum(channels) < 200, dark
    shoot(page, "sidebar-dark")
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    page.wait_for_function(f"(dark) => ({background})() !== dark", arg=dark)
