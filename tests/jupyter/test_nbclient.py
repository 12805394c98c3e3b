"""A Crystal notebook executed end to end by nbclient, with the widget answers a person
would give supplied over comm messages; the saved notebook reads well without a kernel."""

from __future__ import annotations

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from tests.jupyter.conftest import ipc_kernel_manager


class AnsweringClient(NotebookClient):
    """nbclient playing the person: clicks the Buttons named in ``answers`` as they open."""

    answers: list[str] = []

    def on_comm_open_jupyter_widget(self, msg):
        state = msg["content"]["data"]["state"]
        if state.get("_model_name") == "ButtonModel" and self.answers and state.get("description") == self.answers[0]:
            self.answers.pop(0)
            reply = self.kc.session.msg("comm_msg", {"comm_id": msg["content"]["comm_id"],
                                                     "data": {"method": "custom", "content": {"event": "click"}}})
            self.kc.shell_channel.send(reply)
        return super().on_comm_open_jupyter_widget(msg)


def outputs_text(cell) -> str:
    parts = []
    for out in cell.outputs:
        data = out.get("data", {})
        parts.append(str(data.get("text/plain", out.get("text", ""))))
    return "\n".join(parts)


def test_notebook_runs_end_to_end_with_widget_answers(kernel_factory, tmp_path):
    home = kernel_factory.make_home(tmp_path)
    workspace = tmp_path / "project"
    workspace.mkdir()
    kernels = kernel_factory.write_spec(tmp_path)
    notebook_path = workspace / "tour.ipynb"
    env = kernel_factory.kernel_env(home, kernel_factory.server, str(notebook_path))
    server = kernel_factory.server
    server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [{
            "header": "Greeting", "question": "How should I greet?",
            "options": [{"label": "Hello", "description": "plain"}, {"label": "Ahoy", "description": "nautical"}]}]}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo Ahoy > greeting.txt && cat greeting.txt"}}]},
        {"text": "I wrote **greeting.txt**."},
    )
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("/approval default"),
                nbformat.v4.new_code_cell("Greet the user in a file."),
                nbformat.v4.new_code_cell("/todos")]
    # cleanup_kc: nbclient leaves alone a kernel manager it was given, so the kernel would
    # outlive the test (a child process of pytest later tests see); it shuts it down now.
    km = ipc_kernel_manager(tmp_path, "crystal", [kernels], AsyncKernelManager)
    client = AnsweringClient(nb, km=km, timeout=60, resources={"metadata": {"path": str(workspace)}})
    client.answers = ["Ahoy", "Allow once"]
    client.execute(env=env, cleanup_kc=True)
    nbformat.write(nb, notebook_path)

    assert client.answers == []
    assert (workspace / "greeting.txt").read_text() == "Ahoy\n"
    saved = nbformat.read(notebook_path, as_version=4)
    turn = outputs_text(saved.cells[1])
    assert turn.startswith("Crystal · work · approval default · openai:gpt-4.1")
    assert "Greeting: How should I greet? → Ahoy" in turn and "Answered" not in turn
    assert "Allowed once: bash echo Ahoy > greeting.txt" in turn
    assert "I wrote **greeting.txt**." in turn
    # The saved cards carry HTML with a text fallback; no widget is needed to read them.
    html = [o["data"]["text/html"] for o in saved.cells[1].outputs if "text/html" in o.get("data", {})]
    assert any('data-tool="bash"' in h and 'data-state="done"' in h for h in html)
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in saved.cells[1].outputs)
    assert outputs_text(saved.cells[2]) == "No todos."


def test_failed_cell_under_nbclient_shows_ename_and_evalue(kernel_factory, tmp_path):
    """A newcomer's batch run: `jupyter nbconvert --execute` and papermill stop at a
    failed Crystal cell and print the error reply's traceback; it names the error."""
    from nbclient.exceptions import CellExecutionError

    home = kernel_factory.make_home(tmp_path)
    workspace = tmp_path / "project"
    workspace.mkdir()
    kernels = kernel_factory.write_spec(tmp_path)
    env = kernel_factory.kernel_env(home, kernel_factory.server, str(workspace / "fails.ipynb"))
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("/mode sideways"), nbformat.v4.new_code_cell("/todos")]
    km = ipc_kernel_manager(tmp_path, "crystal", [kernels], AsyncKernelManager)
    client = NotebookClient(nb, km=km, timeout=60, resources={"metadata": {"path": str(workspace)}})
    try:
        client.execute(env=env, cleanup_kc=True)
    except CellExecutionError as exc:
        message = str(exc)
    else:
        raise AssertionError("the failed cell did not stop the run")
    assert "UserError: Unknown mode 'sideways'; use plan or work." in message
    # papermill reports a failed cell from its error output: the same words.
    errors = [o for o in nb.cells[0].outputs if o["output_type"] == "error"]
    assert [(o["ename"], o["evalue"], o["traceback"]) for o in errors] == [
        ("UserError", "Unknown mode 'sideways'; use plan or work.",
         ["UserError: Unknown mode 'sideways'; use plan or work."])]
    assert nb.cells[1].outputs == []  # the run stopped there


def test_a_batch_run_that_needs_approval_says_in_the_log_what_it_waits_for(kernel_factory, tmp_path):
    """nbclient that answers no widget (what nbconvert and papermill do): the kernel's log
    names the call that waits and how to run without waiting; the form's timeout ends it."""
    home = kernel_factory.make_home(tmp_path)
    workspace = tmp_path / "project"
    workspace.mkdir()
    kernels = kernel_factory.write_spec(tmp_path, ["--ask-timeout", "2"])
    env = kernel_factory.kernel_env(home, kernel_factory.server, str(workspace / "batch.ipynb"))
    kernel_factory.server.add({"tool_calls": [{"name": "bash", "arguments": {"command": "touch made-by-agent.txt"}}]},
                              {"text": "It was denied."})
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "crystal", "display_name": "Crystal",
                                                           "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("Make the file.")]
    log = tmp_path / "kernel.log"
    km = ipc_kernel_manager(tmp_path, "crystal", [kernels], AsyncKernelManager)
    client = NotebookClient(nb, km=km, timeout=60, resources={"metadata": {"path": str(workspace)}})
    with open(log, "w") as stderr:
        client.execute(env=env, stderr=stderr, cleanup_kc=True)
    text = log.read_text()
    # The waiting line says what really happens (FORM-2): no front end heard, so the form
    # ends after the 2 s timeout (the grace is never longer than the timeout).
    waiting = next(line for line in text.splitlines() if "Crystal is waiting" in line)
    assert "Crystal is waiting for a person to answer an approval for bash touch made-by-agent.txt. " in waiting
    assert "if none shows up within 2 s, the form ends as denied" in waiting, waiting
    assert "For a headless run use --unattended." in waiting, waiting
    assert not (workspace / "made-by-agent.txt").exists()
