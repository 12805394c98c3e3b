"""NB-1: the person's own ``%%python`` cells in a Crystal notebook, on the real kernel
under jupyter_client with the loopback model server. A ``%%python`` cell runs as IPython
in the namespace the agent's ``python`` tool uses, shows ordinary outputs, never reaches
the model as a prompt, and the next turn is told (once, bounded) which such cells ran
and how they ended."""

from __future__ import annotations

import json
import queue
import time

from crystal_kernel.jupyter.driver import click
from crystal_kernel.jupyter.person_cells import MAX_CELLS, MAX_SOURCE_CHARS, PersonCells


def iopub_of(kc, msg_id: str, timeout: float = 60.0) -> list[dict]:
    """The iopub messages of one request, up to its idle status."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        got.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return got
    raise TimeoutError("the cell did not finish")


def reply_of(kc, msg_id: str) -> dict:
    while True:
        msg = kc.get_shell_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg["content"]


def user_texts(body: dict) -> str:
    """The user messages of the request's newest turn (after the last assistant message):
    the kernel is shared with other tests, so older turns are other tests' prompts."""
    messages = body["messages"]
    last_answer = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return json.dumps([m for m in messages[last_answer + 1:] if m["role"] == "user"])


def test_a_python_cell_shares_the_namespace_with_the_agent_and_the_next_turn_is_told(kernel):
    """NB-1: `df` made by the person's %%python cell; no model call for it; its outputs are
    a Python cell's (execute_result with its count, an error with its traceback); the next
    prompt's request carries the ran-cells note once; the model's python tool sees `df`."""
    kc = kernel.driver.kc
    # The kernel is shared with other tests: a turn first, so that %%python cells they ran
    # are told now and the note below names only this test's.
    kernel.server.add({"text": "ok"})
    assert kernel.run("Start.").status == "ok"
    before = len(kernel.server.bodies("chat"))

    msg_id = kc.execute("%%python\nimport pandas as pd\ndf = pd.DataFrame({'sales': [3, 4, 5]})\ndf['sales'].sum()")
    msgs = iopub_of(kc, msg_id)
    reply = reply_of(kc, msg_id)
    assert reply["status"] == "ok"
    results = [m["content"] for m in msgs if m["msg_type"] == "execute_result"]
    assert [r["data"]["text/plain"] for r in results] == ["np.int64(12)"] or \
        [r["data"]["text/plain"] for r in results] == ["12"], results
    assert results[0]["execution_count"] == reply["execution_count"]

    msg_id = kc.execute("%%python\nprint('rows:', len(df))\ndf.missing_column")
    msgs = iopub_of(kc, msg_id)
    reply = reply_of(kc, msg_id)
    assert reply["status"] == "error" and reply["ename"] == "AttributeError"
    assert "rows: 3" in "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) > 1  # IPython's traceback, not one line
    assert "line 3" in "\n".join(errors[0]["traceback"])  # the cell's own line numbers
    failed_count = reply["execution_count"]
    assert len(kernel.server.bodies("chat")) == before  # neither cell reached the model

    kernel.server.add(
        {"tool_calls": [{"name": "python", "arguments": {"code": "print('total', df['sales'].sum())"}}]},
        {"tool_calls": [{"name": "cell_output", "arguments": {}}]},
        {"text": "df has one column, sales, summing to 12."},
    )
    run = kernel.run("What is in df?", actions=[click("Allow once")])  # the python tool asks (SANDBOX-1)
    assert run.status == "ok", run.texts()
    bodies = kernel.server.bodies("chat")[before:]
    assert len(bodies) == 3
    first = user_texts(bodies[0])
    assert "What is in df?" in first and "<person_cells>" in first
    assert "df = pd.DataFrame({'sales': [3, 4, 5]})" in first
    assert "ended: ok" in first
    assert f"In [{failed_count}] ended: AttributeError: 'DataFrame' object has no attribute 'missing_column'" in first
    assert "%%python" not in first  # the marker line is the kernel's business
    tool_result = [m for m in bodies[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "total 12" in tool_result
    # cell_output {}: the person's failed cell is newer than Out[1], so its traceback.
    last_output = [m for m in bodies[2]["messages"] if m["role"] == "tool"][-1]["content"]
    assert last_output.startswith("The last error:") and "missing_column" in last_output, last_output
    assert any("The agent is told about the 2 %%python cells" in t for t in run.texts())

    # Told once: the next turn carries no note.
    kernel.server.add({"text": "Still 12."})
    assert kernel.run("And now?").status == "ok"
    assert "<person_cells>" not in json.dumps(kernel.last_body()["messages"][-1])


def test_a_python_cell_is_interrupted_like_a_python_cell(kernel):
    """NB-1: the stop button (interrupt_request, message mode) raises KeyboardInterrupt in
    the person's running code; the kernel lives on with its namespace."""
    kc = kernel.driver.kc
    kernel.run("%%python\nkept = 'still here'")
    msg_id = kc.execute("%%python\nimport time\nprint('sleeping', flush=True)\ntime.sleep(60)")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the code is running once it printed
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    started = time.monotonic()
    kernel.km.interrupt_kernel()
    msgs = iopub_of(kc, msg_id)
    reply = reply_of(kc, msg_id)
    assert time.monotonic() - started < 30
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert [m["content"]["ename"] for m in msgs if m["msg_type"] == "error"] == ["KeyboardInterrupt"]
    run = kernel.run("%%python\nprint(kept)")
    assert run.status == "ok" and "still here" in run.streams


def test_a_bad_marker_line_is_one_line_and_runs_nothing(kernel):
    before = len(kernel.server.bodies("chat"))
    run = kernel.run("%%python --bg\nnever = 1")
    assert run.status == "error"
    assert run.reply["content"]["evalue"].startswith("'%%python' marks a cell as your Python")
    assert len(kernel.server.bodies("chat")) == before
    check = kernel.run("%%python\nprint('never' in globals())")
    assert "False" in check.streams


def test_the_note_is_bounded():
    """At most MAX_CELLS cells (the latest), each source cut at MAX_SOURCE_CHARS."""
    cells = PersonCells()
    for n in range(1, 15):
        cells.add(n, "x = 1\n" + "y" * (MAX_SOURCE_CHARS + 500 if n == 14 else 1), "ok")
    note = cells.take_note()
    assert note is not None
    assert "In [4]" not in note and "In [5] ended: ok" in note and "In [14] ended: ok" in note
    assert note.count("ended:") == MAX_CELLS and "(4 earlier cells are not listed.)" in note
    kept = MAX_SOURCE_CHARS - len("x = 1\n")
    assert "y" * kept in note and "y" * (kept + 1) not in note
    assert "(506 more characters)" in note
    assert cells.take_note() is None


def test_a_restart_starts_the_person_over_as_in_python(kernel_factory):
    """NB-1: after a kernel restart the namespace is empty and the next turn is told only
    of the %%python cells run since the restart."""
    k = kernel_factory.start()
    assert k.run("%%python\nbefore_restart = 1").status == "ok"
    k.km.restart_kernel(now=False)  # what the notebook's restart button does
    k.driver.kc.wait_for_ready(timeout=60)
    run = k.run("%%python\nprint(before_restart)")
    assert run.status == "error" and run.reply["content"]["ename"] == "NameError"
    k.server.add({"text": "It is gone after the restart."})
    assert k.run("Where is before_restart?").status == "ok"
    note = user_texts(k.last_body())
    assert "print(before_restart)" in note and "NameError: name 'before_restart' is not defined" in note
    assert "before_restart = 1" not in note


def test_a_python_cell_completes_and_inspects_as_python(kernel):
    """NB-1: Tab and Shift+Tab in a %%python cell are IPython's (a prompt cell completes
    /commands and @paths instead)."""
    kc = kernel.driver.kc
    kernel.run("%%python\nrevenue_by_region = {'north': 3}")
    code = "%%python\nrevenue_by"
    msg_id = kc.complete(code, len(code))
    reply = reply_of(kc, msg_id)
    assert "revenue_by_region" in reply["matches"]
    assert code[reply["cursor_start"]:reply["cursor_end"]] == "revenue_by"
    code = "%%python\nlen("
    msg_id = kc.inspect(code, len(code) - 1)
    reply = reply_of(kc, msg_id)
    assert reply["found"] and "Return the number of items" in reply["data"]["text/plain"]
