"""What a person sees of Crystal's cards in real JupyterLab + Chromium, typed at a
person's pace (SPEC §13 fronts, VIEW-2): the workspace-trust card once, readable,
naming what trusting runs, and saying "Trusted" after the click (TRUST-2); a long
``read`` result as a preview with the rest one click away; the ``python`` tool's output
once; the ``notebook_edit`` header as a sentence. Screenshots go to /work/wt/shots/small7/
(and tests/e2e/artifacts/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, NB, READY, new_crystal_notebook, type_and_run

SHOTS = Path("/work/wt/shots/small7")


def shoot(page, locator, name: str) -> None:
    for folder in (SHOTS, ARTIFACTS):
        folder.mkdir(parents=True, exist_ok=True)
        (locator or page).screenshot(path=str(folder / f"{name}.png"))


def make_workspace(root: Path) -> Path:
    ws = root / "cards"
    tools = ws / ".crystal" / "tools" / "greeter"
    tools.mkdir(parents=True)
    (tools / "greet.py").write_text("import sys\nprint('hello', sys.argv[1:])\n")
    (tools / "tools.json").write_text(json.dumps({"command": [Path(sys.executable).name, "greet.py"], "tools": [
        {"name": "greet", "description": "Say hello.", "command": ["--loud"]}]}))
    (ws / "notes.txt").write_text("\n".join(f"line {i:03d}: the quick brown fox" for i in range(1, 201)) + "\n")
    return ws


def run_and_wait(page, text: str) -> None:
    type_and_run(page, text)
    page.wait_for_timeout(300)
    page.wait_for_function(READY, arg="crystal", timeout=60_000)


@pytest.mark.timeout(600)  # the lab's start, four cells typed at a person's pace, a turn of three calls
def test_trust_card_read_preview_and_python_output_read_well(browser, lab):
    ws = make_workspace(lab.root)
    with new_crystal_notebook(browser, lab) as page:
        run_and_wait(page, "/approval full")
        run_and_wait(page, "/cd cards")
        card = page.locator(f"{NB} .crystal-trust").last
        card.wait_for(timeout=30_000)
        text = card.inner_text()
        # Once, readable, by its workspace path, naming the command trusting lets run.
        said = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')]
            .filter(n => n.innerText.includes('tools.json')).length""")
        assert said == 1, said
        assert "`" not in text and str(ws) not in text, text
        assert "exec tool set 'greeter' .crystal/tools/greeter/tools.json is not trusted yet" in text, text
        assert "Trusting it lets Crystal:" in text and "greet.py --loud in greeter/ (tool greet)" in text, text
        card.scroll_into_view_if_needed()
        shoot(page, page.locator(f"{NB} .jp-Cell").nth(1), "trust-card-before-click")

        page.locator(f"{NB} .jupyter-button", has_text="Trust").last.click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.crystal-trust')].some(n => n.innerText.startsWith('Trusted:'))",
            timeout=30_000)
        text = card.inner_text()
        assert text.startswith("Trusted: this workspace's exec tool set 'greeter' .crystal/tools/greeter/tools.json.")
        assert "not trusted" not in text
        page.locator(f"{NB} .jupyter-button", has_text="Trusted").wait_for()
        shoot(page, page.locator(f"{NB} .jp-Cell").nth(1), "trust-card-after-click")

        lab.server.add(
            {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
            {"tool_calls": [{"name": "python", "arguments": {"code": "print('hello', 'from', 'python')\n21*2"}}]},
            {"tool_calls": [{"name": "notebook_edit", "arguments": {
                "path": "scratch.ipynb", "action": "insert", "index": 1, "cell_type": "markdown",
                "source": "# Notes"}}]},
            {"text": "Read the notes and ran the code."})
        (ws / "scratch.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        page.locator(f"{NB} .jp-Cell .cm-content").last.click()  # the Trust click selected the /cd cell
        type_and_run(page, "Read notes.txt, run a little python, start a scratch notebook.")
        # SANDBOX-1: the python call runs unsandboxed in the kernel, so `full` asks for it too.
        allow = page.locator(f"{NB} .jupyter-button", has_text="Allow once").last
        allow.wait_for(timeout=60_000)
        allow.click()
        cell = page.locator(f"{NB} .jp-Cell").nth(2)
        cell.get_by_text("Read the notes and ran the code.").wait_for(timeout=60_000)

        read = cell.locator('.crystal-card[data-tool="read"]')
        more = read.locator("details.crystal-more")
        assert read.get_by_text("line 012", exact=False).first.is_visible()
        assert not read.get_by_text("line 200", exact=False).is_visible()
        assert more.locator("summary").inner_text().startswith("Show the other ")
        edit = cell.locator('.crystal-card[data-tool="notebook_edit"]')
        assert "scratch.ipynb: insert markdown cell #1" in edit.inner_text()
        assert "{" not in edit.locator("div").first.inner_text()
        outputs = cell.locator(".jp-OutputArea").inner_text()
        assert outputs.count("hello from python") == 1, outputs
        assert "42" in cell.locator('.crystal-card[data-tool="python"]').inner_text()
        shoot(page, cell, "cards-read-preview-python-once")

        more.locator("summary").click()
        read.get_by_text("line 200", exact=False).wait_for()
        shoot(page, read, "read-card-expanded")
