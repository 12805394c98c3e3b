"""NB-1 in batch runs: the real ``jupyter nbconvert --execute`` and ``papermill`` run a
Crystal notebook with the person's ``%%python`` cells beside a prompt, as they run a
Python notebook; and no answered cell keeps an empty ``display_data`` (the streaming
placeholder, which nbconvert warned about and papermill's output carried)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat

from tests.jupyter.test_papermill import PAPERMILL, papermill_env

NBCONVERT = str(Path(sys.executable).parent / "jupyter-nbconvert")
ANSWER = "df holds three sales figures that add up to twelve, streamed in small pieces."


def workbench_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    nb.cells = [
        nbformat.v4.new_code_cell("%%python\nimport pandas as pd\ndf = pd.DataFrame({'sales': [3, 4, 5]})\nlen(df)"),
        nbformat.v4.new_code_cell("What is in df?"),
        nbformat.v4.new_code_cell("%%python\nprint('total', df['sales'].sum())"),
    ]
    nbformat.write(nb, path)
    return path


def check_outputs(out: nbformat.NotebookNode) -> None:
    first, prompt, last = out.cells
    results = [o for o in first.outputs if o.output_type == "execute_result"]
    assert [r.data["text/plain"] for r in results] == ["3"] and results[0].execution_count == first.execution_count
    assert [o.text for o in last.outputs if o.output_type == "stream"] == ["total 12\n"]
    assert last.execution_count == first.execution_count + 2
    shown = [o for o in prompt.outputs if o.output_type == "display_data"]
    assert shown and all(o.data for o in shown), [o.get("data") for o in shown]  # none empty
    assert sum(ANSWER in str(o.data.get("text/plain", "")) for o in shown) == 1


def told(server, earlier: int) -> str:
    bodies = server.bodies("chat")[earlier:]
    assert len(bodies) == 1, "one model request: the prompt cell; the %%python cells are never prompts"
    users = json.dumps([m for m in bodies[0]["messages"] if m["role"] == "user"])
    assert "What is in df?" in users and "<person_cells>" in users and "len(df)" in users
    return users


def test_nbconvert_runs_python_cells_and_keeps_no_empty_output(kernel_factory, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workbench_notebook(workspace / "bench.ipynb")
    env = papermill_env(kernel_factory, tmp_path, source)
    server = kernel_factory.server
    earlier = len(server.bodies("chat"))
    server.add({"text": ANSWER, "chunk": 4, "delay": 0.01})
    run = subprocess.run([NBCONVERT, "--to", "notebook", "--execute", "--output", "done.ipynb", str(source)],
                         capture_output=True, text=True, env=env, cwd=workspace, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    check_outputs(nbformat.read(workspace / "done.ipynb", as_version=4))
    told(server, earlier)
    # To HTML: no "Your element with mimetype(s) dict_keys([]) is not able to be represented".
    html = subprocess.run([NBCONVERT, "--to", "html", str(workspace / "done.ipynb")],
                          capture_output=True, text=True, env=env, cwd=workspace, timeout=120)
    assert html.returncode == 0 and "mimetype" not in html.stderr, html.stderr[-2000:]


def test_papermill_runs_python_cells_and_keeps_no_empty_output(kernel_factory, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = workbench_notebook(workspace / "in.ipynb")
    env = papermill_env(kernel_factory, tmp_path, workspace / "out.ipynb")
    server = kernel_factory.server
    earlier = len(server.bodies("chat"))
    server.add({"text": ANSWER, "chunk": 4, "delay": 0.01})
    run = subprocess.run([PAPERMILL, str(source), str(workspace / "out.ipynb"), "-k", "crystal",
                          "--cwd", str(workspace)], capture_output=True, text=True, env=env, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    check_outputs(nbformat.read(workspace / "out.ipynb", as_version=4))
    told(server, earlier)


def test_a_failing_python_cell_stops_papermill_as_in_a_python_notebook(kernel_factory, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("%%python\nrows = []\nrows[2]"), nbformat.v4.new_code_cell("Never asked")]
    nbformat.write(nb, workspace / "in.ipynb")
    env = papermill_env(kernel_factory, tmp_path, workspace / "out.ipynb")
    earlier = len(kernel_factory.server.bodies("chat"))
    run = subprocess.run([PAPERMILL, str(workspace / "in.ipynb"), str(workspace / "out.ipynb"), "-k", "crystal",
                          "--cwd", str(workspace)], capture_output=True, text=True, env=env, timeout=180)
    assert run.returncode != 0
    assert "IndexError: list index out of range" in run.stderr and "rows[2]" in run.stderr
    out = nbformat.read(workspace / "out.ipynb", as_version=4)
    failed = next(c for c in out.cells if c.source.startswith("%%python"))  # papermill adds a note above
    errors = [o for o in failed.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["IndexError"] and len(errors[0].traceback) > 1
    assert len(kernel_factory.server.bodies("chat")) == earlier
