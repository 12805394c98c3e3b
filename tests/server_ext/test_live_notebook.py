"""SPEC §12 notebook tools: ``POST crystal/api/notebook-edit`` without real-time
collaboration says so (the tool then writes the file) and never touches the file; the
live path is driven in the browser (tests/e2e/test_live_notebook_edit.py)."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook


def test_without_collaboration_the_edit_is_not_live_and_nothing_changes(api, jp_root_dir):
    nb = new_notebook()
    nb.cells = [new_code_cell("1/0")]
    path = jp_root_dir / "a.ipynb"
    nbformat.write(nb, str(path))
    before = path.read_text()
    status, body = api("POST", "notebook-edit", body={
        "path": str(path), "action": "replace", "index": 1, "source": "1/2"})
    assert status == 200
    assert body == {"live": False, "reason": "real-time collaboration (jupyter-collaboration) is not running"}
    assert path.read_text() == before


def test_bad_requests_are_one_line_errors(api, jp_root_dir, tmp_path):
    status, body = api("POST", "notebook-edit", body={"action": "delete"})
    assert status == 400 and body == {"error": "'path' must name a notebook."}
    status, body = api("POST", "notebook-edit", body={"path": str(tmp_path.parent / "x.ipynb"), "action": "delete"})
    assert status == 400 and body == {"error": "That path is outside the server's root folder."}
    (jp_root_dir / "n.txt").write_text("x")
    status, body = api("POST", "notebook-edit", body={"path": "n.txt", "action": "delete"})
    assert status == 400 and body == {"error": "'n.txt' is not a .ipynb notebook."}
