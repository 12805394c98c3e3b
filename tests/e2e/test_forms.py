"""Forms at human speed in a real JupyterLab (FORM-1): a person types into the question
form's free-text field and the deny-reason box with a per-key delay, checks and unchecks
boxes, and clicks — in the Crystal kernel and in ``%%crystal`` in a Python notebook.
Each test asserts what the loopback model received in its next request (the tool
result) and what the cell shows. Screenshots go to build/screenshots/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    DELAY,
    NB,
    READY,
    bash_then,
    blank_page,
    make_notebook,
    open_notebook,
    run_cell,
    run_saved_then_reload,
)

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"


@pytest.fixture
def page(browser, lab):
    """Each test opens its own notebook's address (open_notebook): its fresh page does not
    load the lab once before that."""
    with blank_page(browser) as page:
        yield page


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))





def type_into(page, locator, text: str) -> None:
    locator.click()
    page.keyboard.type(text, delay=DELAY)


def tool_results(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def next_request_tool_result(lab) -> str:
    """The tool result in the model's latest request (the one answered with the final
    text the test waited for)."""
    return tool_results(lab.server.bodies("chat")[-1])[-1]


def questions_call() -> dict:
    return {"tool_calls": [{"name": "question", "arguments": {"questions": [
        {"header": "Service", "question": "Which service should I split out?",
         "options": [{"label": "billing-api", "description": "payments"},
                     {"label": "auth-api", "description": "logins"}]},
        {"header": "Checks", "question": "Which checks should run?", "multiple": True,
         "options": [{"label": "lint", "description": "ruff"}, {"label": "tests", "description": "pytest"}]},
    ]}}]}


def answer_questions_like_a_person(page, lab, shot: str) -> str:
    """Type a custom answer, check two boxes, uncheck one, Next, Submit; return the
    tool result the model received next."""
    field = page.locator(f"{NB} .jp-Cell .widget-text input[placeholder*='your own']").first
    field.wait_for(timeout=60_000)
    type_into(page, field, "inventory-api")
    page.locator(f"{NB} .widget-checkbox", has_text="lint").locator("input").click()
    page.locator(f"{NB} .widget-checkbox", has_text="tests").locator("input").click()
    page.wait_for_timeout(300)
    page.locator(f"{NB} .widget-checkbox", has_text="tests").locator("input").click()  # changed my mind
    shoot(page, shot)
    page.locator(f"{NB} .jupyter-button", has_text="Next").click()
    confirm = page.locator(f"{NB} .jp-Cell .widget-html", has_text="Submit these answers?")
    confirm.wait_for()
    # The confirmation step shows what the kernel received, before anything is sent.
    assert "inventory-api" in confirm.inner_text() and "lint" in confirm.inner_text()
    assert "tests" not in confirm.inner_text()
    page.locator(f"{NB} .jupyter-button", has_text="Submit").click()
    page.locator(NB).get_by_text("Split planned.").wait_for(timeout=60_000)
    # VIEW-2: each answer is shown once, in the question's card, not again in a form summary.
    cell = page.locator(f"{NB} .jp-Cell", has_text="Split planned.").last
    cell.locator("[data-tool='question'][data-state='done']").wait_for(timeout=30_000)
    seen = cell.locator(".jp-OutputArea").inner_text()
    assert seen.count("inventory-api") == 1 and seen.count("lint") == 1, seen
    assert seen.count("Which service should I split out?") == 1 and "Answered" not in seen, seen
    assert "tests" not in seen and "ruff" not in seen, "the options that were not chosen are gone with the form"
    return next_request_tool_result(lab)


def deny_with_reason_like_a_person(page, lab, shot: str) -> str:
    reason = page.locator(f"{NB} .jp-Cell .widget-text input[placeholder*='Reason for denying']").first
    reason.wait_for(timeout=60_000)
    type_into(page, reason, "no, keep it")
    shoot(page, shot)
    page.locator(f"{NB} .jupyter-button", has_text="Deny").click()
    page.locator(NB).get_by_text("Kept the build folder.").wait_for(timeout=60_000)
    return next_request_tool_result(lab)


def test_kernel_question_form_receives_typed_text_and_unchecked_box_whole(page, lab):
    """FORM-1 (Q-3, Q-4): the model gets "inventory-api", not "i"."""
    make_notebook(lab, "typing.ipynb", "crystal")
    open_notebook(page, lab, "typing.ipynb", "crystal")
    lab.server.add(questions_call(), {"text": "Split planned."})
    run_cell(page, "Plan the split")
    result = answer_questions_like_a_person(page, lab, "kernel-question-form-typed")
    assert json.loads(result) == [["inventory-api"], ["lint"]]
    shoot(page, "kernel-question-answered-once")
    page.wait_for_function(READY, arg="crystal")


def test_kernel_deny_reason_arrives_whole(page, lab):
    """FORM-1: the deny reason typed at a person's pace reaches the model whole."""
    open_notebook(page, lab, "typing.ipynb", "crystal")
    run_cell(page, "/approval default")
    page.wait_for_function(READY, arg="crystal")
    lab.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
                   {"text": "Kept the build folder."})
    (lab.root / "build").mkdir(exist_ok=True)
    run_cell(page, "Clean up the build")
    result = deny_with_reason_like_a_person(page, lab, "kernel-approval-deny-reason")
    assert "no, keep it" in result, result
    assert (lab.root / "build").is_dir(), "the denied command must not have run"
    cell = page.locator(f"{NB} .jp-Cell", has_text="Kept the build folder.").last
    assert "Denied" in cell.inner_text() and "no, keep it" in cell.inner_text()
    page.wait_for_function(READY, arg="crystal")


def test_magics_front_receives_typed_text_and_deny_reason_whole(page, lab):
    """FORM-1 through ``%%crystal`` in a python3 kernel."""
    make_notebook(lab, "magics.ipynb", "python3")
    open_notebook(page, lab, "magics.ipynb", "python3")
    run_cell(page, "%load_ext crystal_kernel")
    page.wait_for_function(READY, arg="python3")
    lab.server.add(questions_call(), {"text": "Split planned."})
    run_cell(page, "%%crystal\nPlan the split")
    result = answer_questions_like_a_person(page, lab, "magics-question-form-typed")
    assert json.loads(result) == [["inventory-api"], ["lint"]]
    page.wait_for_function(READY, arg="python3")

    lab.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
                   {"text": "Kept the build folder."})
    run_cell(page, "%%crystal --approval default\nClean up the build")
    result = deny_with_reason_like_a_person(page, lab, "magics-approval-deny-reason")
    assert "no, keep it" in result, result
    page.wait_for_function(READY, arg="python3")



def active_index(page) -> int:
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")


def test_after_a_form_click_shift_enter_does_not_rerun_the_running_cell(page, lab):
    """FORM-3: clicking a form button must not leave the running cell
    active, or the next Shift+Enter runs the same prompt again."""
    make_notebook(lab, "focus.ipynb", "crystal")
    open_notebook(page, lab, "focus.ipynb", "crystal")
    run_cell(page, "/approval default")
    page.wait_for_function(READY, arg="crystal")
    lab.server.add(*bash_then("echo focus-check", "Ran the check."))
    before = len(lab.server.bodies("chat"))
    run_cell(page, "Run the focus check")
    form_cell = page.locator(f"{NB} .jp-Cell", has_text="Run the focus check").first
    allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once")
    allow.wait_for(timeout=60_000)
    running = page.evaluate("""() => { const nb = window.jupyterapp.shell.currentWidget.content;
        return nb.widgets.findIndex(c => c.model.sharedModel.getSource() === 'Run the focus check'); }""")
    allow.click()
    page.wait_for_timeout(300)
    assert active_index(page) != running, "the form's cell must not stay active after the click"
    page.keyboard.press("Shift+Enter")
    form_cell.get_by_text("Ran the check.").wait_for(timeout=60_000)
    page.wait_for_function(READY, arg="crystal")
    page.wait_for_timeout(2000)  # a re-run would have asked the model again by now
    assert len(lab.server.bodies("chat")) == before + 2, "the prompt ran once"
    prompts = [m["content"] for b in lab.server.bodies("chat")[before:] for m in b["messages"]
               if m.get("role") == "user" and "focus check" in str(m.get("content"))]
    assert len(prompts) == 2  # the same single prompt, seen by both requests of one turn
    shoot(page, "focus-after-form-click")


def test_reload_while_an_approval_waits_brings_the_form_back_and_the_cell_completes(page, lab):
    """FORM-2: reloading the page (even before the running cell's
    outputs were saved) brings the form back; answering it completes the cell."""
    make_notebook(lab, "reload.ipynb", "crystal")
    open_notebook(page, lab, "reload.ipynb", "crystal")
    run_cell(page, "/approval default")
    page.wait_for_function(READY, arg="crystal")
    lab.server.add(*bash_then("rm -rf build", "Kept the build folder after the reload."))
    run_saved_then_reload(page, "Clean the build after a reload", "Deny")
    cell = page.locator(f"{NB} .jp-Cell", has_text="Clean the build after a reload").first
    reason = cell.locator(".widget-text input[placeholder*='Reason for denying']")
    reason.wait_for(timeout=60_000)
    shoot(page, "after-reload-form-back")
    type_into(page, reason, "not after a reload")
    cell.locator(".jupyter-button", has_text="Deny").click()
    cell.get_by_text("Kept the build folder after the reload.").wait_for(timeout=60_000)
    assert "not after a reload" in next_request_tool_result(lab)
    page.wait_for_function(READY, arg="crystal", timeout=60_000)
    card = cell.locator("[data-tool='bash']").first
    assert card.get_attribute("data-state") == "denied"
    shoot(page, "after-reload-answered")


def test_saved_live_widgets_tell_the_truth_after_a_kernel_restart(page, lab):
    """FORM-2: a notebook saved with a waiting form and a /jobs table with Stop
    buttons, reopened after a kernel restart, shows no "model not found" and no job
    "running" forever."""
    make_notebook(lab, "restart.ipynb", "crystal")
    open_notebook(page, lab, "restart.ipynb", "crystal")
    run_cell(page, "/approval full")  # the job starts without a form
    page.wait_for_function(READY, arg="crystal")
    lab.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": "sleep 600"}}]},
                   {"text": "Started the sleeper."})
    run_cell(page, "Start a sleeper job")
    page.locator(NB).get_by_text("Started the sleeper.").wait_for(timeout=60_000)
    page.wait_for_function(READY, arg="crystal")
    run_cell(page, "/jobs")
    page.locator(f"{NB} .jupyter-button", has_text="Stop").first.wait_for(timeout=60_000)
    page.wait_for_function(READY, arg="crystal")
    run_cell(page, "/approval default")
    page.wait_for_function(READY, arg="crystal")
    # Only the call: the restart ends this turn before it asks again, and a reply left in
    # the queue would answer the next test's first request.
    lab.server.add(bash_then("rm -rf build", "unused")[0])
    run_cell(page, "Clean before the restart")
    page.locator(f"{NB} .jupyter-button", has_text="Deny").wait_for(timeout=60_000)
    page.keyboard.press("Control+s")
    page.wait_for_timeout(1500)
    saved = json.loads((lab.root / "restart.ipynb").read_text())
    assert "application/vnd.jupyter.widget-view+json" in json.dumps(saved), "saved with live widgets"
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    page.wait_for_timeout(1000)
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    page.wait_for_function(READY, arg="crystal", timeout=90_000)
    notebook = page.locator(NB)
    notebook.get_by_text("The kernel stopped before anyone answered.").wait_for(timeout=30_000)
    notebook.get_by_text("stopped with the kernel").first.wait_for(timeout=30_000)
    shoot(page, "after-restart")
    text = notebook.inner_text()
    assert "model not found" not in text and "Error displaying widget" not in text
    assert "waiting for approval" not in text, "the saved card does not wait forever either"
    assert "The kernel stopped before anyone approved this call; it did not run." in text
    assert "running" not in notebook.locator("table", has_text="Background jobs").first.inner_text()
    assert lab.server.pending == 0, "every scripted reply was asked for"


def wait_past_the_headless_grace_then_allow(page, lab, marker: str) -> None:
    """The form is still there after front_ends.GRACE_SECONDS (a page that shows widgets
    is a person who can answer), and answering it then completes the cell."""
    from crystal_kernel.jupyter.front_ends import GRACE_SECONDS

    cell = page.locator(f"{NB} .jp-Cell", has_text=marker).first
    allow = cell.locator(".jupyter-button", has_text="Allow once")
    allow.wait_for(timeout=60_000)
    page.wait_for_timeout(int((GRACE_SECONDS + 4) * 1000))
    assert allow.is_visible(), "the form must still wait for the person"
    assert "no front end" not in cell.inner_text()
    allow.click()
    cell.get_by_text("Echoed after the wait.").wait_for(timeout=60_000)
    assert "waited-for-a-person" in next_request_tool_result(lab)


@pytest.mark.timeout(600)  # two notebooks, each waiting past the grace, on a shared machine
def test_forms_in_jupyterlab_wait_for_the_person_past_the_headless_grace(page, lab):
    """FORM-2: headless runs end a form's wait quickly (front_ends.py); JupyterLab is a front end
    that shows forms, so nothing changes there: in the Crystal kernel (heard from its
    start) and in ``%%crystal``, loaded after the page connected (its %load_ext request carries
    the cell id JupyterLab sends, so a front end counts as heard)."""
    fronts = (("grace.ipynb", "crystal", "/approval default", "Echo after a wait"),
              ("grace-magics.ipynb", "python3", "%load_ext crystal_kernel",
               "%%crystal --approval default\nEcho in Python after a wait"))
    for n, (name, kernel, setup, prompt) in enumerate(fronts):
        make_notebook(lab, name, kernel)
        if n == 0:
            open_notebook(page, lab, name, kernel)
        else:  # the second notebook in the same page, as a person opens one (one page load less)
            page.evaluate("(path) => { void window.jupyterapp.commands.execute('docmanager:open', {path}); }", name)
            page.wait_for_function("(p) => window.jupyterapp.shell.currentWidget.context.path === p", arg=name)
            page.wait_for_function(READY, arg=kernel, timeout=90_000)
        run_cell(page, setup)
        page.wait_for_function(READY, arg=kernel)
        lab.server.add(*bash_then("echo waited-for-a-person", "Echoed after the wait."))
        run_cell(page, prompt)
        wait_past_the_headless_grace_then_allow(page, lab, prompt.splitlines()[-1])
        shoot(page, f"form-waits-past-the-headless-grace-{kernel}")
        page.wait_for_function(READY, arg=kernel)


def reload_unsaved_and_answer(page, lab, name: str, prompt: str, shot: str):
    """Run ``prompt`` (a question) in the never-saved notebook ``name``, reload the page
    while the form waits, find the cell back with its outputs and the form, answer it and
    see the cell complete; returns the cell."""
    lab.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [
        {"header": "Service", "question": "Which service should I split out?",
         "options": [{"label": "billing-api", "description": "payments"},
                     {"label": "auth-api", "description": "logins"}]}]}}]},
        {"text": "Recovered after the reload."})
    run_cell(page, prompt)
    page.locator(f"{NB} .jupyter-button", has_text="billing-api").wait_for(timeout=60_000)
    assert json.loads((lab.root / name).read_text())["cells"] == [], "never saved"
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    page.wait_for_function(READY.replace("k.status === 'idle'", "true"), arg="crystal", timeout=90_000)
    cell = page.locator(f"{NB} .jp-Cell", has_text=prompt).first
    option = cell.locator(".jupyter-button", has_text="billing-api")
    option.wait_for(timeout=60_000)
    # The cell came back with what it showed before the reload: the status line and the card.
    assert "Crystal · work" in cell.inner_text() and "Which service should I split out?" in cell.inner_text()
    shoot(page, f"{shot}-cell-back")
    option.click()
    cell.get_by_text("Recovered after the reload.").wait_for(timeout=60_000)
    assert json.loads(next_request_tool_result(lab)) == [["billing-api"]]
    cell.locator("[data-tool='question'][data-state='done']").wait_for(timeout=30_000)
    assert page.locator(NB).get_by_text(prompt).count() == 1, "the cell exists once"
    page.wait_for_function(READY, arg="crystal", timeout=60_000)
    shoot(page, f"{shot}-answered")
    return cell


@pytest.mark.timeout(600)
def test_reload_of_a_never_saved_notebook_brings_the_running_cell_back(page, lab):
    """FORM-2: the running cell was never saved (the file has no cells); after a reload the
    page gets the cell back from the kernel, with its outputs and the waiting form;
    answering it completes the cell."""
    make_notebook(lab, "unsaved.ipynb", "crystal")
    open_notebook(page, lab, "unsaved.ipynb", "crystal")
    reload_unsaved_and_answer(page, lab, "unsaved.ipynb", "Ask me, then survive a reload", "unsaved-reload")


STREAM_WORDS = 3000


def streamed_answer() -> str:
    head = "Start of the streamed answer.\n\n"
    body = "".join(("\n\n" if i and i % 100 == 0 else "") + " word" for i in range(STREAM_WORDS))
    return head + body + "\n\nEnd of the **streamed** answer."


def test_reload_while_an_answer_streams_shows_the_whole_text_so_far_then_the_rendered_answer(page, lab):
    """FORM-2 and TRUST-1: while a long answer streams, the cell shows its text flowing
    (appended, as plain text); a page reloaded mid-stream shows the whole text so far
    again (not only what arrived after the reload), the text keeps flowing, and the end
    of the turn replaces it with the rendered Markdown."""
    make_notebook(lab, "stream-reload.ipynb", "crystal")
    open_notebook(page, lab, "stream-reload.ipynb", "crystal")
    text = streamed_answer()
    # ~3,000 events 30 ms apart: the answer would stream for 90 s, longer than a
    # reload takes on a loaded machine; once the test has seen it flow after the reload,
    # the server sends the rest at once (LLMServer.hurry).
    lab.server.add({"text": text, "chunk": 5, "delay": 0.03})
    editor = page.locator(f"{NB} .jp-Cell .cm-content").last
    editor.click()
    page.keyboard.type("Stream a long answer through a reload", delay=DELAY)
    page.keyboard.press("Control+s")  # the cell is saved; its outputs will not be
    page.wait_for_timeout(1000)
    page.keyboard.press("Shift+Enter")
    streaming = page.locator(f"{NB} .jp-Cell .jp-crystal-streaming").first
    streaming.wait_for(timeout=60_000)
    page.wait_for_function("() => { const e = document.querySelector('.jp-crystal-streaming');"
                           " return !!e && e.textContent.length > 2000; }", timeout=60_000)
    before = len(streaming.text_content() or "")
    shoot(page, "stream-before-reload")
    page.on("dialog", lambda dialog: dialog.accept())
    page.reload()
    page.wait_for_function(READY.replace("k.status === 'idle'", "true"), arg="crystal", timeout=90_000)
    cell = page.locator(f"{NB} .jp-Cell", has_text="Stream a long answer through a reload").first
    again = cell.locator(".jp-crystal-streaming")
    try:
        again.wait_for(timeout=60_000)
        # The whole text so far comes back, from its start (pieces that arrive before the
        # kernel has been asked show after a "…" until then): more than before the reload.
        page.wait_for_function("() => [...document.querySelectorAll('.jp-crystal-streaming')].some("
                               "e => e.textContent.startsWith('Start of the streamed answer.'))", timeout=60_000)
        seen = again.text_content() or ""
        assert len(seen) >= before, (len(seen), before)
        shoot(page, "stream-after-reload")
        # It keeps flowing after the reload.
        page.wait_for_function("(n) => [...document.querySelectorAll('.jp-crystal-streaming')].some("
                               "e => e.textContent.length > n)", arg=len(seen), timeout=60_000)
        lab.server.hurry()
        answer = cell.locator(".crystal-answer strong", has_text="streamed")
        answer.wait_for(timeout=180_000)
    except Exception:
        shoot(page, "FAILED-stream-reload")
        raise
    assert cell.locator(".jp-crystal-streaming").count() == 0
    shown = cell.locator(".crystal-answer").first.inner_text()
    assert shown.split() == text.replace("**", "").split()
    assert "Stream a long answer through a reload" in json.dumps(lab.server.bodies("chat")[-1]["messages"])
    shoot(page, "stream-after-reload-rendered")
