"""NB-1 in a real JupyterLab (Chromium), typing at a person's pace: the notebook as a
workbench. A person runs their own ``%%python`` cell (it makes ``df``; the model is not
asked), asks the agent about ``df`` (the model's request says which cells the person ran;
the agent's ``python`` tool sees the same ``df``), inserts the Python code block of the
answer with "Insert" (a runnable ``%%python`` cell, not a Markdown one) and runs it. Light
and dark screenshots of each step go to tests/e2e/artifacts/workbench-*.png."""

from __future__ import annotations

import json

from tests.e2e.conftest import (
    NB,
    READY,
    new_crystal_notebook,
    shots_in_both_themes,
    type_in_last_cell,
)

CELLS = "() => window.jupyterapp.shell.currentWidget.content.model.cells.length"
ACTIVE = "() => { const c = window.jupyterapp.shell.currentWidget.content.activeCell.model; " \
         "return {type: c.type, source: c.sharedModel.getSource(), mime: c.mimeType}; }"
ANSWER = ("df has three regions; sales add up to 12. To double them:\n\n"
          "```python\ndoubled = df.assign(sales=df['sales'] * 2)\nprint('doubled total', doubled['sales'].sum())\n```\n\n"
          "Run it below.")


type_cell = type_in_last_cell


def shots(page, name: str) -> None:
    shots_in_both_themes(page, f"workbench-{name}")


def idle(page) -> None:
    page.wait_for_timeout(300)
    page.wait_for_function(READY, arg="crystal", timeout=90_000)


def test_a_person_runs_python_asks_about_it_inserts_the_answer_and_runs_it(browser, lab):
    server = lab.server
    with new_crystal_notebook(browser, lab) as page:
        # 1. The person's own Python: a table, an execution count, no model request.
        type_cell(page, "%%python\nimport pandas as pd\n"
                        "df = pd.DataFrame({'region': ['north', 'south', 'east'], 'sales': [3, 4, 5]})\ndf")
        first = page.locator(f"{NB} .jp-CodeCell").first
        first.locator(".jp-OutputArea table", has_text="north").wait_for(timeout=60_000)
        idle(page)
        assert first.locator(".jp-InputPrompt").inner_text().strip() == "[1]:"
        assert server.bodies("chat") == [], "a %%python cell reached the model"
        shots(page, "1-python-cell")

        # 2. Ask about df: the request names the cell; the python tool sees the same df.
        server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print(df['sales'].sum())"}}]},
                   {"text": ANSWER})
        type_cell(page, "What is in df?")
        allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once").last
        allow.wait_for(timeout=60_000)
        allow.click()
        answer = page.locator(f"{NB} .crystal-answer", has_text="Run it below.").last
        answer.wait_for(timeout=60_000)
        idle(page)
        bodies = server.bodies("chat")
        assert len(bodies) == 2, len(bodies)
        users = json.dumps([m for m in bodies[0]["messages"] if m["role"] == "user"])
        assert "What is in df?" in users and "<person_cells>" in users and "In [1] ended: ok" in users, users
        assert "df = pd.DataFrame(" in users
        tool = [m for m in bodies[1]["messages"] if m["role"] == "tool"][-1]["content"]
        assert "12" in tool, tool
        notes = page.locator(f"{NB} .jp-CodeCell").nth(1).inner_text()
        assert "The agent is told about the 1 %%python cell you ran since the last turn." in notes
        shots(page, "2-asked")

        # 3. Insert the answer's Python block: a runnable %%python cell below the answer.
        cells = page.evaluate(CELLS)
        insert = answer.locator(".jp-crystal-insert")
        assert insert.inner_text() == "Insert as %%python cell"
        insert.click()
        page.wait_for_function(f"() => ({CELLS})() === {cells + 1}")
        active = page.evaluate(ACTIVE)
        assert active["type"] == "code" and active["mime"] == "text/x-ipython", active
        assert active["source"] == ("%%python\ndoubled = df.assign(sales=df['sales'] * 2)\n"
                                    "print('doubled total', doubled['sales'].sum())"), active
        shots(page, "3-inserted")

        # 4. Run it: Python output, and still nothing sent to the model.
        page.keyboard.press("Shift+Enter")
        inserted = page.locator(f"{NB} .jp-CodeCell").nth(2)
        inserted.locator(".jp-OutputArea", has_text="doubled total 24").wait_for(timeout=60_000)
        idle(page)
        assert inserted.locator(".jp-InputPrompt").inner_text().strip() == "[3]:"
        assert len(server.bodies("chat")) == 2, "the inserted cell reached the model"
        shots(page, "4-ran-inserted")
