"""SPEC §12 notebook tools: notebook_edit. Every result is validated with nbformat; the file
is compared byte for byte with what nbformat itself writes for the expected notebook, so
nothing but the edited cells changed; unknown metadata survives."""

from __future__ import annotations

import copy
import difflib
import json

import nbformat
import pytest

from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.core.messages import ToolCallPart
from crystal_kernel.host.approval_flow import decide
from crystal_kernel.tools.catalog import CatalogOptions, builtin_names, load_builtin
from tests.tools.conftest import call
from tests.tools.nbfixtures import analysis_notebook, write


def valid(text: str) -> nbformat.NotebookNode:
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    return nb


@pytest.fixture
def notebook(workspace):
    nb = analysis_notebook()
    original = write(workspace / "a.ipynb", nb)
    return workspace / "a.ipynb", nb, original


async def test_replace_by_id_changes_only_that_cell(notebook, ctx):
    path, nb, original = notebook
    result = await call("notebook_edit", ctx, path="a.ipynb", action="replace", cell_id=nb.cells[2].id,
                        source="total = sum(rows)\ntotal / len(rows)")
    assert result.ok, result.text
    assert result.text.startswith(f"Edited a.ipynb: Replaced the source of cell 3 (id {nb.cells[2].id}).")
    assert f"--- a/a.ipynb cell 3 (id {nb.cells[2].id})" in result.text
    assert "-1/0" in result.text and "+total = sum(rows)" in result.text
    text = path.read_text()
    expected = copy.deepcopy(nb)
    expected.cells[2].source = "total = sum(rows)\ntotal / len(rows)"
    assert text == nbformat.writes(expected) + "\n"
    changed = [line for line in difflib.ndiff(original.splitlines(), text.splitlines()) if line[:1] in "+-"]
    assert changed == ['-     "1/0"', '+     "total = sum(rows)\\n",', '+     "total / len(rows)"']
    got = valid(text)
    assert got.metadata.custom_tool == {"keep": [1, 2]} and got.cells[1].metadata.vendor == {"x": "y"}


async def test_insert_delete_move_set_type_clear_outputs_stay_valid_nbformat(notebook, ctx):
    path, nb, _ = notebook
    ins = await call("notebook_edit", ctx, path="a.ipynb", action="insert", index=2, source="import math",
                     cell_type="code")
    assert ins.ok, ins.text
    got = valid(path.read_text())
    new = got.cells[1]
    assert new.source == "import math" and new.cell_type == "code" and new.outputs == []
    assert len(new.id) == 8 and new.id not in {c.id for c in nb.cells}
    assert f"Inserted cell 2 (id {new.id}), code." in ins.text and "+import math" in ins.text

    after = await call("notebook_edit", ctx, path="a.ipynb", action="insert", cell_id=nb.cells[0].id,
                       source="Notes", cell_type="markdown")
    assert after.ok and valid(path.read_text()).cells[1].source == "Notes"

    end = await call("notebook_edit", ctx, path="a.ipynb", action="insert", source="print('end')")
    assert end.ok and valid(path.read_text()).cells[-1].source == "print('end')"

    moved = await call("notebook_edit", ctx, path="a.ipynb", action="move", cell_id=nb.cells[4].id, index=1)
    assert moved.ok, moved.text
    got = valid(path.read_text())
    assert got.cells[0].id == nb.cells[4].id

    typed = await call("notebook_edit", ctx, path="a.ipynb", action="set_type", cell_id=nb.cells[1].id,
                       cell_type="markdown")
    assert typed.ok and "code → markdown (1 outputs dropped)" in typed.text
    cell = next(c for c in valid(path.read_text()).cells if c.id == nb.cells[1].id)
    assert cell.cell_type == "markdown" and "outputs" not in cell and cell.metadata.vendor == {"x": "y"}
    back = await call("notebook_edit", ctx, path="a.ipynb", action="set_type", cell_id=nb.cells[1].id,
                      cell_type="code")
    assert back.ok
    cell = next(c for c in valid(path.read_text()).cells if c.id == nb.cells[1].id)
    assert cell.cell_type == "code" and cell.outputs == [] and cell.execution_count is None

    one = await call("notebook_edit", ctx, path="a.ipynb", action="clear_outputs", cell_id=nb.cells[2].id)
    assert one.ok
    got = valid(path.read_text())
    assert next(c for c in got.cells if c.id == nb.cells[2].id).outputs == []
    assert next(c for c in got.cells if c.id == nb.cells[4].id).outputs != []
    every = await call("notebook_edit", ctx, path="a.ipynb", action="clear_outputs")
    assert every.ok
    got = valid(path.read_text())
    assert all(c.outputs == [] and c.execution_count is None for c in got.cells if c.cell_type == "code")

    gone = await call("notebook_edit", ctx, path="a.ipynb", action="delete", index=1)
    assert gone.ok and f"Deleted cell 1 (id {nb.cells[4].id}), code." in gone.text
    got = valid(path.read_text())
    assert nb.cells[4].id not in [c.id for c in got.cells]
    assert got.metadata.custom_tool == {"keep": [1, 2]}


async def test_bad_calls_change_nothing(notebook, ctx):
    path, nb, original = notebook
    cases = [
        (dict(action="replace", cell_id="nope", source="x"), "No cell has id 'nope'."),
        (dict(action="replace", index=9, source="x"), "index 9 is out of range: the notebook has 5 cells"),
        (dict(action="replace", cell_id=nb.cells[1].id), "replace needs source"),
        (dict(action="insert"), "insert needs source"),
        (dict(action="move", index=1), "move needs cell_id"),
        (dict(action="set_type", cell_id=nb.cells[1].id), "set_type needs cell_type"),
        (dict(action="delete"), "Name the cell with cell_id"),
    ]
    for arguments, message in cases:
        result = await call("notebook_edit", ctx, path="a.ipynb", **arguments)
        assert not result.ok and message in result.text, (arguments, result.text)
        assert path.read_text() == original
    other = await call("notebook_edit", ctx, path="../outside.ipynb", action="delete", index=1)
    assert not other.ok and "outside the workspace" in other.text
    (path.parent / "notes.txt").write_text("x")
    text = await call("notebook_edit", ctx, path="notes.txt", action="delete", index=1)
    assert not text.ok and "use edit for other files" in text.text


async def test_layout_of_a_hand_written_file_is_kept(workspace, ctx):
    nb = analysis_notebook()
    data = json.loads(nbformat.writes(nb))
    text = json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    (workspace / "b.ipynb").write_text(text)
    result = await call("notebook_edit", ctx, path="b.ipynb", action="replace", index=1, source="# Título")
    assert result.ok
    new = (workspace / "b.ipynb").read_text()
    data["cells"][0]["source"] = ["# Título"]
    assert new == json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    valid(new)


async def test_notebook_without_cell_ids_is_edited_by_index(workspace, ctx):
    nb = nbformat.v4.new_notebook()
    nb.nbformat_minor = 4
    nb.cells = [nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_code_cell("b = 2")]
    data = json.loads(nbformat.writes(nb))
    for cell in data["cells"]:
        cell.pop("id", None)
    (workspace / "old.ipynb").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    result = await call("notebook_edit", ctx, path="old.ipynb", action="insert", index=2, source="c = 3")
    assert result.ok, result.text
    got = json.loads((workspace / "old.ipynb").read_text())
    assert [c["source"] for c in got["cells"]] == [["a = 1"], ["c = 3"], ["b = 2"]]
    assert all("id" not in c for c in got["cells"])
    valid((workspace / "old.ipynb").read_text())


def test_plan_has_neither_notebook_edit_nor_run_but_work_has_both():
    plan = builtin_names(CatalogOptions(mode="plan", skills_available=True))
    work = builtin_names(CatalogOptions(mode="work", skills_available=True))
    assert "notebook_edit" not in plan and "notebook_run" not in plan and "read" in plan
    assert work[work.index("bash_stop") + 1:work.index("bash_stop") + 3] == ["notebook_edit", "notebook_run"]


class AskingPerson:
    person_present = True

    def __init__(self):
        self.requests = []

    async def ask_approval(self, request):
        self.requests.append(request)
        return PersonDecision(outcome="deny", reason="not now")


async def test_approval_is_a_workspace_write_showing_the_per_cell_diff(notebook, session, ctx):
    path, nb, original = notebook
    tool = load_builtin("notebook_edit")
    arguments = {"path": "a.ipynb", "action": "replace", "cell_id": nb.cells[2].id, "source": "1/2"}
    c = tool.classify(tool.parse(arguments), ctx)
    assert (str(c.risk), str(c.authority)) == ("write", "workspace")
    person = AskingPerson()
    session.approval = "default"
    decision = await decide(session, person, ToolCallPart(id="c1", name="notebook_edit", arguments=arguments), c,
                            lambda event: None)
    assert not decision.allowed
    (request,) = person.requests
    assert request.risk == "write" and request.authority == "workspace"
    assert request.preview.startswith(f"Replaced the source of cell 3 (id {nb.cells[2].id}).")
    assert "-1/0\n+1/2" in request.preview
    assert path.read_text() == original  # a preview writes nothing
    run = load_builtin("notebook_run")
    assert str(run.classify(run.parse({"path": "a.ipynb"}), ctx).risk) == "execute"
