"""papermill parameterises and runs a Crystal notebook (docs/kernel.md):
the real `papermill` command, the real Crystal kernel, the loopback model server, which
records what the model received."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import tomllib

from crystal_kernel.jupyter.driver import click

ROOT = Path(__file__).resolve().parents[2]
PAPERMILL = str(Path(sys.executable).parent / "papermill")


def engine_entry_points(folder: Path) -> Path:
    """A dist-info folder declaring the ``papermill.engine`` entry points of this
    checkout's pyproject.toml, for the papermill child's PYTHONPATH: the shared
    environment's installed metadata may predate them (``make install`` writes the
    same ones)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["papermill.engine"]
    dist = folder / "crystal_kernel_checkout-0.dist-info"
    dist.mkdir(parents=True)
    lines = ["[papermill.engine]", *(f"{name} = {target}" for name, target in declared.items())]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: crystal-kernel-checkout\nVersion: 0\n")
    return folder


def crystal_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    defaults = nbformat.v4.new_code_cell('/parameter target "README.md"\n/parameter count 1')
    defaults.metadata["tags"] = ["parameters"]
    nb.cells = [defaults, nbformat.v4.new_code_cell("Summarise {target} in {count} sentences; keep {other} as is.")]
    nbformat.write(nb, path)
    return path


def papermill_env(kernel_factory, tmp_path: Path, notebook: Path) -> dict[str, str]:
    home = kernel_factory.make_home(tmp_path)
    kernels = kernel_factory.write_spec(tmp_path)  # tmp_path/kernels/crystal
    env = kernel_factory.kernel_env(home, kernel_factory.server, str(notebook))
    paths = [str(engine_entry_points(tmp_path / "entry")), env.get("PYTHONPATH", "")]
    env.update({"JUPYTER_PATH": str(kernels.parent), "PYTHONPATH": ":".join(p for p in paths if p)})
    return env


def test_papermill_parameters_reach_the_prompts_and_never_the_model_as_a_prompt(kernel_factory, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    source = crystal_notebook(workspace / "in.ipynb")
    env = papermill_env(kernel_factory, tmp_path, workspace / "out.ipynb")
    server = kernel_factory.server  # shared by the folder: count only this test's requests
    earlier = len(server.bodies("chat"))
    server.add({"text": "A summary in three sentences."})
    run = subprocess.run([PAPERMILL, str(source), str(workspace / "out.ipynb"), "-k", "crystal",
                          "-p", "target", "notes.md", "-p", "count", "3", "--cwd", str(workspace)],
                         capture_output=True, text=True, env=env, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    # The injected cell is /parameter lines after the author's defaults, the values as JSON.
    out = nbformat.read(workspace / "out.ipynb", as_version=4)
    injected = out.cells[1]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert injected.source == '/parameter target "notes.md"\n/parameter count 3\n'
    # One model request: the prompt cell with the values in, the parameter cells nowhere.
    bodies = server.bodies("chat")[earlier:]
    assert len(bodies) == 1, bodies
    users = [m for m in bodies[0]["messages"] if m["role"] == "user"]
    sent = json.dumps(bodies[0]["messages"])
    assert "Summarise notes.md in 3 sentences; keep {other} as is." in json.dumps(users[-1])
    assert "/parameter" not in sent and "README.md" not in sent and "target" not in sent
    answer = "".join(str(o.get("data", {}).get("text/plain", "")) for o in out.cells[2].outputs)
    assert "A summary in three sentences." in answer


def test_papermill_help_notebook_lists_the_crystal_parameters(kernel_factory, tmp_path):
    notebook = crystal_notebook(tmp_path / "in.ipynb")
    env = papermill_env(kernel_factory, tmp_path, notebook)
    shown = subprocess.run([PAPERMILL, "--help-notebook", str(notebook)], capture_output=True, text=True,
                           env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "target: str (default \"README.md\")" in shown.stdout, shown.stdout
    assert "count: int (default 1)" in shown.stdout, shown.stdout


def test_parameter_cells_by_hand_list_refuse_and_interpolate(kernel_factory):
    """`/parameter` typed in a cell: listed, shown, a bad name refused with one line and
    nothing set, the value also a variable of the python tool's namespace."""
    kernel = kernel_factory.start()
    assert kernel.run("/parameter").texts()[0].startswith("No parameters are set.")
    bad = kernel.run('/parameter ok 1\n/parameter 2nd "x"')
    assert bad.status == "error" and bad.texts() == [
        "UserError: '2nd' is not a parameter name: use letters, digits and _, starting with a letter, "
        "at most 64 characters."]
    assert kernel.run("/parameter").texts()[0].startswith("No parameters are set.")  # nothing was set
    assert kernel.run('/parameter files ["a.md", "b.md"]\n/parameter target notes.md').status == "ok"
    assert kernel.run("/parameter").texts() == ['files = ["a.md", "b.md"]\ntarget = "notes.md"']
    assert kernel.run("/parameter target").texts() == ['target = "notes.md"']
    kernel.server.add({"text": "Fine."})
    assert kernel.run("Compare {target} with {files}; {{target}} stays.").status == "ok"
    prompt = kernel.last_body()["messages"][-1]
    assert "Compare notes.md with ['a.md', 'b.md']; {{target}} stays." in json.dumps(prompt)
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print(target.upper())"}}]},
                      {"text": "Done."})
    kernel.run("/approval full")
    kernel.run("Shout the target.", actions=[click("Allow once")])  # asked in full too (SANDBOX-1)
    assert "NOTES.MD" in json.dumps(kernel.last_body()["messages"][-1])
