"""NB-3 in a real JupyterLab (Chromium), typing at a person's pace: "Fix with Crystal".

A person's cell fails; they press Fix with Crystal under the error, see the proposed
change as a diff of the cell, apply it, run the cell again and it works. In a Crystal
notebook on a ``%%python`` cell (the notebook's own session gets the fix turn); in a
Python notebook with no Crystal loaded, the bar says so and "Load Crystal and fix" loads
the ``%crystal`` magics and asks. What the model received is asserted. Light and dark
screenshots of each step go to tests/e2e/artifacts/fix-*.png."""

from __future__ import annotations

import json
import time

from tests.e2e.conftest import (
    NB,
    READY,
    make_notebook,
    new_crystal_notebook,
    open_notebook,
    shots_in_both_themes,
    type_in_last_cell,
)

FAILING = "prices = {'apple': 3, 'pear': 4}\ntotal = prices['apple'] + prices['banana']\nprint('total', total)"
FIXED = "prices = {'apple': 3, 'pear': 4}\ntotal = prices['apple'] + prices['pear']\nprint('total', total)"
ANSWER = f"There is no 'banana' in prices; the other fruit is 'pear'.\n\n```python\n{FIXED}\n```\n"
SOURCE = "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.getSource()"


def shots(page, name: str) -> None:
    shots_in_both_themes(page, f"fix-{name}")


def sent_to_model(server, before: int) -> str:
    bodies = server.bodies("chat")[before:]
    assert len(bodies) == 1, f"{len(bodies)} model requests for one fix"
    users = [m for m in bodies[0]["messages"] if m["role"] == "user"]
    return json.dumps(users[-1], ensure_ascii=False)


def fix_and_apply(page, cell, before: str, after: str) -> None:
    """The diff shows the changed line; Apply puts the proposed source in the cell."""
    diff = cell.locator(".jp-crystal-fix-diff")
    diff.wait_for(timeout=90_000)
    assert diff.locator(".jp-crystal-fix-removed").all_inner_texts() == ["- total = prices['apple'] + prices['banana']"]
    assert diff.locator(".jp-crystal-fix-added").all_inner_texts() == ["+ total = prices['apple'] + prices['pear']"]
    explanation = cell.locator(".jp-crystal-fix-explanation").inner_text()
    assert explanation == "There is no 'banana' in prices; the other fruit is 'pear'."


def wait_until(check, message: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


def run_again(page, cell) -> None:
    """Click into the cell's editor and run it with Shift+Enter, as a person would."""
    cell.locator(".cm-content").click()
    page.keyboard.press("End")
    page.keyboard.press("Shift+Enter")


def test_fix_a_failing_python_cell_in_a_crystal_notebook(browser, lab):
    """NB-3: a %%python cell fails with a KeyError; Fix sends the cell, its traceback and
    the variable it names to the notebook's session; the diff is applied and the cell runs."""
    server = lab.server
    with new_crystal_notebook(browser, lab) as page:
        type_in_last_cell(page, "%%python\n" + FAILING)
        cell = page.locator(f"{NB} .jp-CodeCell").first
        cell.locator(".jp-OutputArea", has_text="KeyError").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        fix = cell.locator(".jp-crystal-fix-button")
        assert fix.inner_text() == "Fix with Crystal"
        before = len(server.bodies("chat"))
        assert before == 0, "a %%python cell reached the model"
        shots(page, "1-failed")

        server.add({"text": ANSWER})
        fix.click()
        fix_and_apply(page, cell, FAILING, FIXED)
        sent = sent_to_model(server, before)
        assert "Fix with Crystal" in sent and "prices['banana']" in sent, sent
        assert "KeyError: 'banana'" in sent and "prices: dict = {'apple': 3, 'pear': 4}" in sent, sent
        assert "\\u001b[" not in sent
        shots(page, "2-proposed")

        cell.locator(".jp-crystal-fix-apply").click()
        page.wait_for_function(f"() => ({SOURCE})(0) === {json.dumps('%%python' + chr(10) + FIXED)}")
        assert cell.locator(".jp-crystal-fix-status").inner_text() == "Applied: run the cell to try it."
        assert cell.locator(".jp-crystal-fix-diff").count() == 0
        shots(page, "3-applied")

        run_again(page, cell)
        cell.locator(".jp-OutputArea", has_text="total 7").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=90_000)
        assert cell.locator(".jp-crystal-fix-button").count() == 0  # no error, no Fix
        assert len(server.bodies("chat")) == before + 1, "running the fixed cell reached the model"
        shots(page, "4-ran")


def test_fix_in_a_python_notebook_loads_crystal_first(browser, lab):
    """NB-3 in a Python notebook with no Crystal session: the bar says so, "Load Crystal
    and fix" loads the magics in the kernel and the fix arrives; Dismiss leaves the cell,
    Stop ends a second fix's turn, a third is applied and the cell runs."""
    server = lab.server
    make_notebook(lab, "plain.ipynb", "python3")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        open_notebook(page, lab, "plain.ipynb", "python3")
        type_in_last_cell(page, FAILING)
        cell = page.locator(f"{NB} .jp-CodeCell").first
        cell.locator(".jp-OutputArea", has_text="KeyError").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="python3", timeout=90_000)
        before = len(server.bodies("chat"))
        cell.locator(".jp-crystal-fix-button").click()
        load = cell.locator(".jp-crystal-button", has_text="Load Crystal and fix")
        load.wait_for(timeout=60_000)
        status = cell.locator(".jp-crystal-fix-status").inner_text()
        assert status.startswith("This notebook\u2019s kernel has no Crystal session."), status
        assert "%load_ext crystal_kernel" in status
        assert len(server.bodies("chat")) == before
        shots(page, "5-python-no-session")

        server.add({"text": ANSWER})
        load.click()
        fix_and_apply(page, cell, FAILING, FIXED)
        sent = sent_to_model(server, before)
        assert "KeyError: 'banana'" in sent and "prices: dict = {'apple': 3, 'pear': 4}" in sent, sent
        shots(page, "6-python-proposed")
        cell.locator(".jp-crystal-fix-dismiss").click()
        assert cell.locator(".jp-crystal-fix-diff").count() == 0
        assert page.evaluate(SOURCE, 0) == FAILING

        # Stop while Crystal works: the turn ends in the kernel (its model request is dropped).
        server.add({"hang": 15})
        disconnects = server.disconnects
        cell.locator(".jp-crystal-fix-button").click()  # the magics are loaded now: straight to the fix
        wait_until(lambda: len(server.bodies("chat")) == before + 2, "the second fix never reached the model")
        cell.locator(".jp-crystal-fix-stop").wait_for()
        assert cell.locator(".jp-crystal-fix-status").inner_text() == "Crystal is looking at the error…"
        shots(page, "7-python-working")
        cell.locator(".jp-crystal-fix-stop").click()
        assert cell.locator(".jp-crystal-fix-status").inner_text() == "Stopped: the cell is as it was."
        assert server.wait_for_disconnect(disconnects + 1, timeout=15), "the fix turn went on after Stop"
        assert page.evaluate(SOURCE, 0) == FAILING

        server.add({"text": ANSWER})
        cell.locator(".jp-crystal-fix-button").click()
        fix_and_apply(page, cell, FAILING, FIXED)
        cell.locator(".jp-crystal-fix-apply").click()
        page.wait_for_function(f"() => ({SOURCE})(0) === {json.dumps(FIXED)}")
        run_again(page, cell)
        cell.locator(".jp-OutputArea", has_text="total 7").wait_for(timeout=60_000)
        assert len(server.bodies("chat")) == before + 3
        shots(page, "8-python-ran")
    finally:
        context.close()
