"""SPEC §12 notebook tools: in the Crystal kernel the model is told which notebook it is in (from
JPY_SESSION_NAME) and reads and edits it with the notebook tools."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def test_the_model_knows_its_notebook_and_edits_it_as_cells(kernel):
    kernel.reset(approval="edit")
    nb = new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal"}})
    nb.cells = [new_markdown_cell("Summarise the sales data"), new_code_cell("")]
    path = kernel.workspace / "analysis.ipynb"
    nbformat.write(nb, str(path))
    kernel.server.add(
        {"tool_calls": [{"name": "read", "arguments": {"path": "analysis.ipynb"}}]},
        {"tool_calls": [{"name": "notebook_edit", "arguments": {
            "path": "analysis.ipynb", "action": "insert", "source": "## Findings", "cell_type": "markdown"}}]},
        {"text": "Added a Findings heading."},
    )
    # The model server is shared by the module's tests: only this turn's requests count.
    before = len(kernel.server.bodies("chat"))
    run = kernel.run("Add a findings heading to this notebook")
    assert run.status == "ok"
    bodies = kernel.server.bodies("chat")[before:]
    system = bodies[0]["messages"][0]["content"]
    assert "This notebook (the user's, in Jupyter): analysis.ipynb" in system
    tools = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert tools.index("notebook_edit") == tools.index("bash_stop") + 1 and "notebook_run" in tools
    read_result = [m for m in bodies[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert read_result.startswith("analysis.ipynb: notebook, 2 cells, kernel crystal.")
    assert f"## cell 1 · markdown · id {nb.cells[0].id}\nSummarise the sales data" in read_result
    got = nbformat.read(str(path), as_version=4)
    nbformat.validate(got)
    assert [c.source for c in got.cells] == ["Summarise the sales data", "", "## Findings"]
