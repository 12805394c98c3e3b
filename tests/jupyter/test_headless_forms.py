"""Headless runs that need a person (FORM-2, SPEC §12 personTimeoutSeconds; front_ends.py): a
notebook executed by ``jupyter nbconvert --execute`` (nbclient, no ``--unattended``)
whose cell needs an approval or asks a question does not wait an hour in silence. No
front end that shows forms is there, so the wait ends within front_ends.GRACE_SECONDS
with a clear denial or dismissal the model reads, and the kernel's log says what
waited and how to run unattended. A front end that shows widgets still gets the whole
wait (the browser side: tests/e2e/test_forms.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import nbformat

from crystal_kernel.jupyter.driver import click
from crystal_kernel.jupyter.front_ends import GRACE_SECONDS
from crystal_kernel.jupyter.tours import write_kernelspec

JUPYTER = Path(sys.executable).parent / "jupyter"
NO_FRONT_END = "Nobody can answer: no front end that shows forms is connected to the kernel"


def tool_results(body):
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def nbconvert_execute(kernel_factory, tmp_path, kernel: str, cells: list[str]):
    """Run ``jupyter nbconvert --to notebook --execute`` on a new notebook of ``cells``;
    returns (process, seconds, executed notebook, workspace)."""
    home = kernel_factory.make_home(tmp_path)
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "build").mkdir()
    kernels = write_kernelspec(tmp_path / "jupyter" / "kernels")
    language = "python" if kernel == "python3" else "markdown"
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": kernel, "display_name": kernel,
                                                           "language": language}})
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    path = workspace / "batch.ipynb"
    nbformat.write(nb, path)
    env = kernel_factory.kernel_env(home, kernel_factory.server, str(path))
    env["JUPYTER_PATH"] = str(kernels.parent)
    env.pop("JPY_SESSION_NAME", None)
    started = time.monotonic()
    proc = subprocess.run([str(JUPYTER), "nbconvert", "--to", "notebook", "--execute", str(path),
                           "--output", "executed.ipynb", "--ExecutePreprocessor.timeout=600"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    executed = workspace / "executed.ipynb"
    return proc, seconds, (nbformat.read(executed, as_version=4) if executed.exists() else None), workspace


def cell_text(cell) -> str:
    return "\n".join(str(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in cell.outputs)


def test_nbconvert_execute_ends_an_approval_wait_quickly_and_logs_why(kernel_factory, tmp_path):
    kernel_factory.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]},
                              {"text": "Nobody approved, so the build folder stays."})
    proc, seconds, nb, workspace = nbconvert_execute(kernel_factory, tmp_path, "crystal", ["Clean the build"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Not personTimeoutSeconds (3600 s): the grace, a kernel start and two model replies.
    assert seconds < GRACE_SECONDS + 120, seconds
    assert "nobody can answer an approval for bash rm -rf build" in proc.stderr, proc.stderr[-3000:]
    assert "--unattended" in proc.stderr and "Denied." in proc.stderr
    # The line logged when the form starts says what really happens: 10 s for a front end,
    # not an hour (it then ends 10 s later, as it said).
    waiting = next(line for line in proc.stderr.splitlines() if "Crystal is waiting" in line)
    assert f"if none shows up within {GRACE_SECONDS:g} s, the form ends as denied" in waiting, waiting
    result = tool_results(kernel_factory.server.bodies("chat")[-1])[-1]
    assert NO_FRONT_END in result
    # Nobody was there: the denial says so and is not put on the person.
    assert "No person is present to approve; denied." in result and "by the person" not in result, result
    assert (workspace / "build").is_dir(), "the denied command did not run"
    shown = cell_text(nb.cells[0])
    assert "Approval for bash rm -rf build: no decision. Nobody can answer: no front end" in shown, shown
    assert "Nobody approved, so the build folder stays." in shown


def test_nbconvert_execute_of_a_magics_question_is_dismissed_quickly(kernel_factory, tmp_path):
    """``%%crystal`` is loaded after the front end connected; the ``%load_ext`` request
    of nbclient carries no cell id, so no front end counts as heard."""
    question = {"header": "Target", "question": "Which folder?", "multiple": False, "custom": True,
                "options": [{"label": "build", "description": "the build output"}]}
    kernel_factory.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [question]}}]},
                              {"text": "No answer; I will not guess."})
    proc, seconds, nb, _ = nbconvert_execute(kernel_factory, tmp_path, "python3",
                                             ["%load_ext crystal_kernel", "%%crystal\nClean something"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert seconds < GRACE_SECONDS + 120, seconds
    assert "nobody can answer questions: Target" in proc.stderr and "Dismissed." in proc.stderr, proc.stderr[-3000:]
    # Nothing is sent to a comm target nbclient does not know (it would log "No handler
    # found for comm target ..." for it).
    assert "No handler found" not in proc.stderr, proc.stderr[-3000:]
    result = tool_results(kernel_factory.server.bodies("chat")[-1])[-1]
    assert result.startswith(f"Error: {NO_FRONT_END}"), result
    shown = cell_text(nb.cells[1])
    assert "Target: Which folder?" in shown and NO_FRONT_END in shown, shown  # said once, in the card
    assert "No answer; I will not guess." in shown


def test_a_front_end_that_shows_widgets_keeps_the_form_waiting(kernel_factory, tmp_path):
    """The same kernel with a front end that spoke comms (as JupyterLab does on
    connecting): the form still waits past the grace, and the click counts."""
    k = kernel_factory.start()
    k.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo still-waiting"}}]},
                 {"text": "Ran it."})
    waited = {"until": time.monotonic() + GRACE_SECONDS + 3}

    def late_click(msg, driver):
        if time.monotonic() >= waited["until"] and driver._try(click("Allow once")):
            waited["until"] = float("inf")

    run = k.run("Echo", on_message=late_click, timeout=120)
    assert run.status == "ok" and run.seconds > GRACE_SECONDS + 3
    assert "still-waiting" in tool_results(k.last_body())[-1]
    assert run.outputs()[-1]["text/plain"] == "Ran it."


def test_a_client_that_never_speaks_comms_gets_the_quick_end(kernel_factory, tmp_path):
    """KernelDriver(widgets=False) behaves like nbclient: the approval is denied after the
    grace with the reason the model reads."""
    k = kernel_factory.start(widgets=False)
    k.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "touch never"}}]}, {"text": "Stopped."})
    run = k.run("Touch it", timeout=120)
    assert run.status == "ok" and GRACE_SECONDS - 1 < run.seconds < GRACE_SECONDS + 30, run.seconds
    assert NO_FRONT_END in tool_results(k.last_body())[-1]
    assert not (k.workspace / "never").exists()
    assert "\n".join(run.texts()).count("Nobody can answer") == 1, run.texts()  # said once


def test_an_interactive_wait_logs_no_warning_about_headless_runs(kernel_factory, tmp_path):
    """A person at a front end that shows widgets (the driver, as JupyterLab) answers an
    approval: the kernel's log warns about nothing — no "headless", no --unattended, no
    waiting line at WARNING level (it is an INFO line); the warning stays for a run with
    no front end (the tests above)."""
    log = tmp_path / "kernel.log"
    with open(log, "w") as stderr:
        kernel = kernel_factory.start(stderr=stderr)
        kernel_factory.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
                                  {"text": "Ran it."})
        run = kernel.run("Say hi in bash.", actions=[click("Allow once")])
        assert run.status == "ok"
        assert tool_results(kernel_factory.server.bodies("chat")[-1])[-1].startswith("hi")  # allowed: it ran
    text = log.read_text()
    warnings = [line for line in text.splitlines() if "WARNING" in line and "without encryption" not in line]
    assert warnings == [], warnings
    assert "headless" not in text and "--unattended" not in text and NO_FRONT_END not in text
