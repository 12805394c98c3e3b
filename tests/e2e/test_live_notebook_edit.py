"""SPEC §12 notebook tools, live: the person has a Python notebook open in JupyterLab
with real-time collaboration (jupyter-collaboration) and has typed into one cell; the
agent, asked from a %%crystal cell of that same notebook, fixes another cell with
notebook_edit. The fix appears in the open notebook at once, the person's typing is
still there, and both reach the file."""

from __future__ import annotations

import json
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.e2e.conftest import ARTIFACTS, ensure_built, running_lab

PYTHON_READY = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.name === 'python3' && k.connectionStatus === 'connected' && k.status === 'idle';
}"""

SOURCES = "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => c.getSource())"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """This module's lab runs with real-time collaboration on."""
    ensure_built()
    with running_lab(tmp_path_factory.mktemp("lab-rtc"), collaborative=True) as started:
        yield started


def settle(page) -> None:
    """Wait until the shared document has loaded. On a busy machine JupyterLab may ask
    "The document is taking some time to load"; a person would keep waiting."""
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.context.ready; }")
    waiting = page.locator(".jp-Dialog button", has_text="Continue waiting")
    if waiting.count():
        waiting.first.click()
        page.locator(".jp-Dialog").wait_for(state="detached")


def cell_editor(page, index: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".cm-content")


def write_share_notebook(lab, name: str) -> str:
    """A Python notebook ``name`` in the lab's root whose %%crystal cell asks to fix the
    share cell (id ``share``) next to a notes cell (id ``notes``); the model is scripted
    to fix it with notebook_edit. Returns the fixed source."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [new_code_cell("%load_ext crystal_kernel"),
                new_code_cell("share = (revenue_by_region / revenue_by_region.sum()).round(3)"),
                new_code_cell("# notes:"),
                new_code_cell("%%crystal --approval full\nFix the share cell: the totals are in `totals`.")]
    nb.cells[1].id, nb.cells[2].id = "share", "notes"
    nbformat.write(nb, str(lab.root / name))
    fixed = "share = (totals / totals.sum()).round(3)"
    lab.server.add(
        {"tool_calls": [{"name": "notebook_edit", "arguments": {
            "path": name, "action": "replace", "cell_id": "share", "source": fixed}}]},
        {"text": "Fixed the share cell."},
    )
    return fixed


# A lab with collaboration, a Python kernel and a turn: slow on a busy 2-core machine.
@pytest.mark.timeout(600)
def test_agent_edit_appears_live_and_keeps_the_persons_unsaved_typing(page, lab):
    fixed = write_share_notebook(lab, "analysis.ipynb")
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open', {path: 'analysis.ipynb'})")
    page.wait_for_function(PYTHON_READY, timeout=90_000)
    settle(page)
    # Collaboration is really on: the notebook's model is backed by the shared document.
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.collaborative") is True

    # The person types into the notes cell, slowly, as a person does.
    cell_editor(page, 2).click()
    page.keyboard.press("End")
    page.keyboard.type(" check Q2 before sharing", delay=60)
    page.wait_for_function(f"() => ({SOURCES})()[2] === '# notes: check Q2 before sharing'")

    # Run the first cell (load the magics) and the %%crystal cell, as a person would.
    settle(page)
    cell_editor(page, 0).click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(PYTHON_READY)
    cell_editor(page, 3).click()
    page.keyboard.press("Shift+Enter")
    page.get_by_text("Fixed the share cell.").wait_for(timeout=90_000)

    # The fix is in the open notebook, in the cell's editor on screen, without a reload.
    page.wait_for_function(f"() => ({SOURCES})()[1] === {json.dumps(fixed)}")
    assert cell_editor(page, 1).inner_text() == fixed
    # The person's typing is still there.
    assert page.evaluate(SOURCES)[2] == "# notes: check Q2 before sharing"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "live-notebook-edit.png"))

    # The model was told the edit went into the open notebook, with the cell's diff.
    result = [m for m in lab.server.bodies("chat")[-1]["messages"] if m.get("role") == "tool"][-1]["content"]
    assert result.startswith("Edited analysis.ipynb in the open notebook (live): Replaced the source of cell 2 (id share).")
    assert "-share = (revenue_by_region" in result and f"+{fixed}" in result

    # The collaboration extension saves the shared document: both changes reach the file.
    deadline = time.monotonic() + 30
    while True:
        on_disk = nbformat.read(str(lab.root / "analysis.ipynb"), as_version=4)
        sources = [c.source for c in on_disk.cells]
        if sources[1] == fixed and sources[2] == "# notes: check Q2 before sharing":
            break
        assert time.monotonic() < deadline, sources
        time.sleep(0.5)
    nbformat.validate(on_disk)
