"""A streamed answer in a real JupyterLab (Chromium) shows once: the
kernel streams it into one display, then shows the whole answer as its own output and
empties the streamed one, so that clients that ignore display updates keep the whole
answer (tests/jupyter/test_display_updates_ignored.py). JupyterLab, which applies every
update, must neither lose it nor show it twice, on screen or in the saved notebook."""

from __future__ import annotations

import json

from tests.e2e.conftest import NB, READY, new_crystal_notebook, type_and_run

ANSWER = ("Inner Content arrives in many small pieces, and JupyterLab shows every word of it "
          "exactly once, down to the last one.")


def test_a_streamed_answer_shows_once_on_screen_and_in_the_saved_notebook(browser, lab):
    lab.server.add({"text": ANSWER, "chunk": 3, "delay": 0.02})
    with new_crystal_notebook(browser, lab) as page:
        type_and_run(page, "Tell me about the content.")
        cell = page.locator(f"{NB} .jp-CodeCell").first
        cell.locator(".jp-OutputArea", has_text="down to the last one.").wait_for(timeout=60_000)
        page.wait_for_function(READY, arg="crystal", timeout=60_000)
        page.wait_for_timeout(1000)  # any late message has arrived
        shown = cell.locator(".jp-OutputArea").inner_text()
        assert shown.count("Inner Content arrives") == 1, shown
        assert cell.locator(".crystal-answer").count() == 1
        # What saving writes: the notebook model as JSON.
        saved = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.toJSON()")
    outputs = saved["cells"][0]["outputs"]
    texts = [json.dumps(o.get("data", {})) for o in outputs]
    assert sum("Inner Content arrives" in t for t in texts) == 1, texts
