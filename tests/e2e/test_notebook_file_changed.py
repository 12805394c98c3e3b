"""SPEC §12 notebook tools without real-time collaboration: notebook_edit writes the
file while the person has the notebook open with unsaved typing. Nothing is lost
silently: the person's view keeps their typing, the file keeps the agent's fix, and the
person's next save meets JupyterLab's "File Changed" dialog."""

from __future__ import annotations

import nbformat
import pytest

from tests.e2e.test_live_notebook_edit import PYTHON_READY, SOURCES, cell_editor, write_share_notebook


@pytest.mark.timeout(600)
def test_file_write_under_an_open_notebook_asks_before_the_persons_save(page, lab):
    fixed = write_share_notebook(lab, "plain.ipynb")
    path = lab.root / "plain.ipynb"
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open', {path: 'plain.ipynb'})")
    page.wait_for_function(PYTHON_READY, timeout=90_000)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.collaborative") is False

    cell_editor(page, 2).click()
    page.keyboard.press("End")
    page.keyboard.type(" check Q2 before sharing", delay=60)
    cell_editor(page, 0).click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(PYTHON_READY)
    cell_editor(page, 3).click()
    page.keyboard.press("Shift+Enter")
    page.get_by_text("Fixed the share cell.").wait_for(timeout=90_000)

    # The agent's fix is in the file; the model was told it was written to the file.
    on_disk = nbformat.read(str(path), as_version=4)
    assert on_disk.cells[1].source == fixed and on_disk.cells[2].source == "# notes:"
    result = [m for m in lab.server.bodies("chat")[-1]["messages"] if m.get("role") == "tool"][-1]["content"]
    assert result.startswith("Edited plain.ipynb: Replaced the source of cell 2 (id share).")
    # The person's open copy still has their typing (and the old cell).
    sources = page.evaluate(SOURCES)
    assert sources[2] == "# notes: check Q2 before sharing" and sources[1].startswith("share = (revenue_by_region")

    # Saving does not silently overwrite the agent's change: JupyterLab asks first.
    cell_editor(page, 2).click()
    page.keyboard.press("Control+s")
    dialog = page.locator(".jp-Dialog", has_text="File Changed")
    dialog.wait_for(timeout=30_000)
    assert "has changed on disk" in dialog.inner_text()
    assert nbformat.read(str(path), as_version=4).cells[1].source == fixed
    dialog.locator("button", has_text="Cancel").click()
