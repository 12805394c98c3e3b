"""Forms at human speed in a real JupyterLab (FORM-1): a person types into the question
form's free-text field and the deny-reason box with a per-key delay, checks and unchecks
boxes, and clicks — in the Crystal kernel and in ``%%crystal`` in a Python notebook.
Each test asserts what the loopback model received in its next request (the tool
result) and what the cell shows. Screenshots go to build/screenshots/."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "screenshots"
DELAY = 60  # ms between keys, a person's pace
NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on screen (others may be open in tabs)

READY = """(name) => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.name === name && k.connectionStatus === 'connected' && k.status === 'idle';
}"""


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def make_notebook(lab, name: str, kernel: str) -> None:
    language = "python" if kernel == "python3" else "markdown"
    lab.api("PUT", f"api/contents/{name}", {"type": "notebook", "format": "json", "content": {
        "cells": [], "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": language}}}})


def open_notebook(page, lab, name: str, kernel: str) -> None:
    page.goto(f"{lab.url}lab/tree/{name}?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.wait_for_function(READY, arg=kernel, timeout=90_000)


def run_cell(page, text: str) -> None:
    """Type a new cell at the end (lines joined with Enter) and run it with Shift+Enter."""
    editor = page.locator(f"{NB} .jp-Cell .cm-content").last
    editor.click()
    for i, line in enumerate(text.split("\n")):
        if i:
            page.keyboard.press("Enter")
            page.keyboard.press("Home")  # no auto-indent carried over
        page.keyboard.type(line)
    page.keyboard.press("Shift+Enter")


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
    page.locator(NB).get_by_text("Split out inventory-api.").wait_for(timeout=60_000)
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
    lab.server.add(questions_call(), {"text": "Split out inventory-api."})
    run_cell(page, "Plan the split")
    result = answer_questions_like_a_person(page, lab, "kernel-question-form-typed")
    assert json.loads(result) == [["inventory-api"], ["lint"]]
    summary = page.locator(f"{NB} .jp-Cell .jp-OutputArea", has_text="Answered").first
    assert "inventory-api" in summary.inner_text()
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
    """The same at human speed through ``%%crystal`` in a python3 kernel."""
    make_notebook(lab, "magics.ipynb", "python3")
    open_notebook(page, lab, "magics.ipynb", "python3")
    run_cell(page, "%load_ext crystal_kernel")
    page.wait_for_function(READY, arg="python3")
    lab.server.add(questions_call(), {"text": "Split out inventory-api."})
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
