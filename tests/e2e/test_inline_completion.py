"""NB-2 in a real JupyterLab (Chromium), typing at a person's pace: inline completions.

A person in a Python notebook (Crystal's magics loaded) types the start of a line; after
a pause Crystal's ghost text streams in, Tab accepts it, and the cell holds the line.
What the model received (the text before and after the cursor, the cells above, the
kernel's variables) is read from the loopback model server's log. The lab is this
module's own: the server extension makes the model request, so the lab's environment
(not only its kernels') must name this module's model server. Light and dark
screenshots go to tests/e2e/artifacts/completion-*.png."""

from __future__ import annotations

import json

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.e2e.conftest import (
    DELAY,
    NB,
    blank_page,
    ensure_built,
    make_notebook,
    open_notebook,
    run_cell,
    running_lab,
    shots_in_both_themes,
)

FIRST_CELL = "%load_ext crystal_kernel\nrates = {'EUR': 1.1, 'GBP': 1.3}"
COMPLETION = "sum(rates.values())"
SOURCE = "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.sharedModel.getSource()"


# What the model server answers a completion request with (a test may change it).
REPLY = {"text": COMPLETION, "chunk": 4, "delay": 0.15}


def completions_only(body: dict, path: str) -> dict | None:
    """The completion requests get REPLY; nothing else is scripted here."""
    system = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    if "You complete code" in system:
        reply = dict(REPLY)
        # ``hold_when``: a request whose user message holds this text waits, after its
        # first event, until the test releases it (an answer slow to start).
        hold_when = reply.pop("hold_when", None)
        if hold_when and hold_when in str(body["messages"][-1].get("content")):
            reply["hold_after"] = 1
        return reply
    return None


@pytest.fixture(scope="module")
def completion_lab(tmp_path_factory):
    ensure_built()
    with LLMServer(router=completions_only, max_hang=20) as server, \
            running_lab(tmp_path_factory.mktemp("completion-lab"), server=server) as lab:
        # The labs of the browser tests have completions off (conftest.write_home): on here.
        config = json.loads((lab.home / "config.json").read_text())
        (lab.home / "config.json").write_text(json.dumps({**config, "inlineCompletion": "on"}))
        yield lab


def completion_requests(server) -> list[str]:
    """The user messages of the completion requests the model server received."""
    found = []
    for body in server.bodies("chat"):
        messages = body.get("messages", [])
        if any("You complete code" in str(m.get("content")) for m in messages if m.get("role") == "system"):
            found.append(str(messages[-1]["content"]))
    return found


def shots(page, name: str) -> None:
    page.wait_for_timeout(600)  # the ghost text's "uncover" animation ends (the picture only)
    shots_in_both_themes(page, f"completion-{name}")


def test_nb2_ghost_text_streams_and_tab_accepts_it(browser, completion_lab):
    """NB-2: typing ``total = `` in a Python cell brings Crystal's ghost text, streamed in
    pieces; Tab puts it in the cell; the model got the prefix, the cell above and the
    kernel's variables, and no request while the person was still typing."""
    lab, server = completion_lab, completion_lab.server
    make_notebook(lab, "sales.ipynb", "python3")
    with blank_page(browser) as page:
        open_notebook(page, lab, "sales.ipynb", "python3")
        run_cell(page, FIRST_CELL)
        first = page.locator(f"{NB} .jp-CodeCell").first
        first.locator(".jp-InputArea-prompt", has_text="[1]").wait_for(timeout=60_000)

        before = len(completion_requests(server))
        cell = page.locator(f"{NB} .jp-CodeCell").nth(1)
        cell.locator(".cm-content").click()
        page.keyboard.type("total = ", delay=DELAY)
        ghost = cell.locator(".jp-GhostText")
        ghost.wait_for(timeout=30_000)
        # Streamed: the ghost text grows to the whole completion.
        page.wait_for_function(
            "(text) => [...document.querySelectorAll('.jp-GhostText')].some(g => g.textContent === text)",
            arg=COMPLETION, timeout=30_000)
        shots(page, "1-ghost")
        page.keyboard.press("Tab")
        page.wait_for_function(f"() => ({SOURCE})(1) === 'total = {COMPLETION}'", timeout=10_000)
        assert cell.locator(".jp-GhostText").count() == 0
        shots(page, "2-accepted")

        sent = completion_requests(server)[before:]
        # The one for the pause after "total = " (accepting may ask for what comes next).
        asked = [s for s in sent if s.endswith("total = <cursor/>") or "total = <cursor/>\n" in s]
        assert len(asked) == 1, sent
        # Typed at a person's pace, the keystrokes before the pause were not each sent on.
        assert not [s for s in sent if "<cursor/>" in s and "total = <cursor/>" not in s
                    and "total = " + COMPLETION not in s], sent
        last = asked[0]
        assert last.endswith("total = <cursor/>")  # the prefix, the cursor at its end, no suffix
        assert "rates = {'EUR': 1.1, 'GBP': 1.3}" in last  # the cell above
        assert "rates: dict = {'EUR': 1.1, 'GBP': 1.3}" in last  # the kernel's variables


def test_nb2_the_next_keystroke_cancels_the_model_request(browser, completion_lab):
    """NB-2: while the answer still streams (the model server holds it after its first
    piece), the person types on: the ghost text goes, and the request to the model server
    is closed (the server extension cancelled it), not left to run."""
    lab, server = completion_lab, completion_lab.server
    REPLY.clear()
    REPLY.update({"text": "np.arange(10)", "chunk": 2, "hang": 15, "hang_after": 2})
    try:
        make_notebook(lab, "typing.ipynb", "python3")
        with blank_page(browser) as page:
            open_notebook(page, lab, "typing.ipynb", "python3")
            page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)
            cell = page.locator(f"{NB} .jp-CodeCell").first
            cell.locator(".cm-content").click()
            before = server.disconnects
            page.keyboard.type("xs = ", delay=DELAY)
            # The first piece shows; the rest is held by the model server.
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-GhostText')].some(g => g.textContent.startsWith('np'))",
                timeout=30_000)
            REPLY.clear()
            REPLY.update({"text": "0", "chunk": 4})  # what the next request gets
            page.keyboard.type("1", delay=DELAY)
            assert server.wait_for_disconnect(before + 1, timeout=15), "the model request went on"
            # The old suggestion is gone; the new one (after the pause) is for "xs = 1".
            page.wait_for_function(
                "() => { const g = [...document.querySelectorAll('.jp-GhostText')];"
                " return g.length === 1 && g[0].textContent === '0'; }", timeout=20_000)
            assert page.evaluate(f"() => ({SOURCE})(0)") == "xs = 1"
    finally:
        REPLY.clear()
        REPLY.update({"text": COMPLETION, "chunk": 4, "delay": 0.15})


def test_nb2_completions_in_a_python_file_in_the_editor(browser, completion_lab):
    """NB-2: the same in a .py file opened in JupyterLab's file editor (no kernel, no cells
    above): the model gets the file's text around the cursor and its name. The model is
    slow to start (6 s before its first piece, past JupyterLab's default 5 s wait for a
    provider, which a busy machine once needed): the ghost text still comes."""
    lab, server = completion_lab, completion_lab.server
    lab.api("PUT", "api/contents/helpers.py", {"type": "file", "format": "text", "content": "import math\n\n"})
    REPLY.clear()
    REPLY.update({"text": "x * 2", "chunk": 2, "delay": 0.1, "hold_when": "return <cursor/>"})
    try:
        with blank_page(browser) as page:
            page.goto(f"{lab.url}lab/tree/helpers.py?reset&token={lab.token}")
            editor = page.locator(".jp-FileEditor .cm-content")
            editor.wait_for(timeout=60_000)
            editor.click()
            page.keyboard.press("Control+End")
            before = len(completion_requests(server))
            page.keyboard.type("def double(x):", delay=DELAY)
            page.keyboard.press("Enter")
            page.keyboard.type("return ", delay=DELAY)
            assert server.wait_held(timeout=30), "no completion request after 'return '"
            page.wait_for_timeout(6_000)
            server.release()
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-GhostText')].some(g => g.textContent === 'x * 2')",
                timeout=30_000)
            page.keyboard.press("Tab")
            text = "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.getSource()"
            page.wait_for_function(f"() => ({text})().endsWith('return x * 2')", timeout=10_000)
            asked = [s for s in completion_requests(server)[before:] if "return <cursor/>" in s]
            assert asked and "File: helpers.py" in asked[-1] and "import math" in asked[-1]
            assert "cells above" not in asked[-1]
    finally:
        REPLY.clear()
        REPLY.update({"text": COMPLETION, "chunk": 4, "delay": 0.15})


def test_nb2_in_a_crystal_notebook_a_python_cell_gets_the_kernels_variables(browser, completion_lab):
    """NB-2 in a Crystal notebook: the person's %%python cell (NB-1) made a variable; in the
    next %%python cell the ghost text comes, Tab accepts it, and the model was asked for
    Python with the Crystal kernel's variables and the cell above."""
    lab, server = completion_lab, completion_lab.server
    make_notebook(lab, "crystal.ipynb", "crystal")
    REPLY.clear()
    REPLY.update({"text": "len(prices)", "chunk": 3, "delay": 0.1})
    try:
        with blank_page(browser) as page:
            open_notebook(page, lab, "crystal.ipynb", "crystal")
            run_cell(page, "%%python\nprices = [3, 4, 5]")
            first = page.locator(f"{NB} .jp-CodeCell").first
            first.locator(".jp-InputArea-prompt", has_text="[1]").wait_for(timeout=60_000)
            cell = page.locator(f"{NB} .jp-CodeCell").nth(1)
            cell.locator(".cm-content").click()
            page.keyboard.type("%%python", delay=DELAY)
            page.keyboard.press("Enter")
            page.keyboard.press("Home")
            before = len(completion_requests(server))
            page.keyboard.type("count = ", delay=DELAY)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-GhostText')].some(g => g.textContent === 'len(prices)')",
                timeout=30_000)
            shots(page, "3-crystal-notebook")
            page.keyboard.press("Tab")
            page.wait_for_function(f"() => ({SOURCE})(1) === '%%python\\ncount = len(prices)'", timeout=10_000)
            asked = [s for s in completion_requests(server)[before:] if s.endswith("count = <cursor/>")]
            assert len(asked) == 1, completion_requests(server)[before:]
            assert "Complete this python code" in asked[0]
            assert "prices: list = [3, 4, 5]" in asked[0]  # the Crystal kernel's variables
            assert "%%python\nprices = [3, 4, 5]" in asked[0]  # the cell above
    finally:
        REPLY.clear()
        REPLY.update({"text": COMPLETION, "chunk": 4, "delay": 0.15})


def test_nb2_inline_completion_off_asks_no_model(browser, completion_lab):
    """NB-2: with ``"inlineCompletion": "off"`` in the person's config.json (read at every
    request: no restart), typing and pausing shows no ghost text and the model server
    receives nothing."""
    lab, server = completion_lab, completion_lab.server
    path = lab.home / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "inlineCompletion": "off"}))
    try:
        make_notebook(lab, "quiet.ipynb", "python3")
        with blank_page(browser) as page:
            open_notebook(page, lab, "quiet.ipynb", "python3")
            page.locator(f"{NB} .jp-Spinner").wait_for(state="hidden", timeout=60_000)
            before = len(server.requests)
            page.locator(f"{NB} .jp-CodeCell .cm-content").first.click()
            with page.expect_response(lambda r: "/crystal/api/completion" in r.url, timeout=30_000) as asked:
                page.keyboard.type("answer = ", delay=DELAY)
            assert "inlineCompletion" in asked.value.json()["off"]
            assert page.locator(".jp-GhostText").count() == 0
            assert server.requests[before:] == []
    finally:
        path.write_text(json.dumps({**config, "inlineCompletion": "on"}))
