"""NB-3, "Fix with Crystal", from the kernel's side (jupyter/fix_cell.py), under
jupyter_client: the lab extension's ``fix`` request on the ``crystal.sidebar`` comm runs a
turn in the notebook's own session, the model gets the cell, its traceback and the
variables it names, and the reply is the corrected cell — in the Crystal kernel (a
``%%python`` cell) and in a Python kernel with ``%load_ext crystal_kernel``."""

from __future__ import annotations

import json
import time

from tests.jupyter.test_sidebar_comm import ask, open_sidebar
from tests.magics.conftest import start_python_kernel

FAILING = "%%python\nprices = {'apple': 3, 'pear': 4}\ntotal = prices['apple'] + prices['banana']\nprint('total', total)"
FIXED_BODY = "prices = {'apple': 3, 'pear': 4}\ntotal = prices['apple'] + prices['pear']\nprint('total', total)"
ANSWER = f"There is no 'banana' in prices; the other fruit is 'pear'.\n\n```python\n{FIXED_BODY}\n```\n"


def traceback_of(run) -> list[str]:
    errors = [m["content"] for m in run.messages if m["msg_type"] == "error"]
    assert errors, run.texts()
    return errors[-1]["traceback"]


def fix_request(kernel, source: str, traceback: object, timeout: float = 60) -> dict:
    comm = open_sidebar(kernel)
    (reply,) = ask(kernel, comm, {"op": "fix", "args": {"source": source, "traceback": traceback}}, timeout=timeout)
    return reply


def user_text(body: dict) -> str:
    return json.dumps([m for m in body["messages"] if m["role"] == "user"][-1], ensure_ascii=False)


def test_nb3_fix_of_a_python_cell_in_the_crystal_kernel_returns_the_corrected_cell(kernel):
    """NB-3: the model gets the cell (without the ``%%python`` marker), the traceback
    without colour codes and the variables it names; the reply is the whole corrected cell
    with its marker, and the corrected cell runs."""
    asked = len(kernel.server.bodies("chat"))
    run = kernel.run(FAILING)
    assert run.status == "error" and run.reply["content"]["ename"] == "KeyError"
    traceback = traceback_of(run)
    assert any("\x1b[" in line for line in traceback)  # ipykernel colours it: the fix must not pass that on
    assert len(kernel.server.bodies("chat")) == asked  # a %%python cell asks no model
    kernel.server.add({"text": ANSWER})

    reply = fix_request(kernel, FAILING, traceback)

    assert reply["ok"], reply
    assert reply["data"]["source"] == "%%python\n" + FIXED_BODY
    assert reply["data"]["explanation"] == "There is no 'banana' in prices; the other fruit is 'pear'."
    session = kernel.driver.kc.kernel_info(reply=True)["content"]["crystal"]["session"]
    assert reply["data"]["session"] == session  # the notebook's own session
    (body,) = kernel.server.bodies("chat")[asked:]  # one request: the fix turn
    sent = user_text(body)
    assert "Fix with Crystal" in sent and "prices['banana']" in sent
    assert "KeyError: 'banana'" in sent and "\\u001b[" not in sent and "\x1b[" not in sent
    assert "prices: dict = {'apple': 3, 'pear': 4}" in sent
    assert "<cell>\\n```python\\nprices = {" in sent  # the cell's code, its marker line left out
    fixed = kernel.run(reply["data"]["source"])
    assert fixed.status == "ok" and "total 7" in fixed.streams


def test_nb3_a_bad_fix_request_is_one_line_and_asks_no_model(kernel):
    """NB-3: no source, or an answer without a corrected cell: one English line."""
    asked = len(kernel.server.bodies("chat"))
    reply = fix_request(kernel, "", [])
    assert reply == {"id": reply["id"], "ok": False, "status": 400,
                     "error": "'source' is required: the failing cell's code, as text."}
    assert len(kernel.server.bodies("chat")) == asked
    kernel.server.add({"text": "I cannot tell what is wrong."})
    reply = fix_request(kernel, "%%python\n1/0", "ZeroDivisionError: division by zero")
    assert not reply["ok"]
    assert reply["error"] == ("Crystal's answer has no corrected cell (a ```python block): "
                              "I cannot tell what is wrong.")


def test_nb3_fix_in_a_python_kernel_with_the_magics(llm_server, tmp_path):
    """NB-3 in a Python notebook: with ``%load_ext crystal_kernel`` the Fix request reaches
    the magics' session; the cell has no marker and gets none."""
    kernel = start_python_kernel(tmp_path, llm_server)
    try:
        llm_server.clear()
        source = "prices = {'apple': 3, 'pear': 4}\ntotal = prices['apple'] + prices['banana']"
        run = kernel.run(source)
        assert run.status == "error"
        llm_server.add({"text": f"Use 'pear'.\n```py\n{FIXED_BODY}\n```"})
        reply = fix_request(kernel, source, traceback_of(run))
        assert reply["ok"], reply
        assert reply["data"]["source"] == FIXED_BODY
        sent = user_text(llm_server.bodies("chat")[-1])
        assert "KeyError: 'banana'" in sent and "prices: dict = {'apple': 3, 'pear': 4}" in sent
        assert kernel.run(reply["data"]["source"]).streams == "total 7\n"
    finally:
        kernel.stop()


def test_nb3_closing_the_comm_stops_the_fix_turn(kernel):
    """NB-3: the Fix bar's Stop closes the comm; the turn ends (the model's connection is
    dropped) and the session takes the next fix at once."""
    kernel.server.add({"hang": 15})
    comm = open_sidebar(kernel)
    kernel.driver.send_comm(comm, {"id": 1, "op": "fix", "args": {"source": "1/0", "traceback": "ZeroDivisionError"}})
    deadline = time.monotonic() + 15
    while not any("1/0" in user_text(b) for b in kernel.server.bodies("chat")[-1:]):
        assert time.monotonic() < deadline, "the fix never reached the model"
        time.sleep(0.1)
    disconnects = kernel.server.disconnects
    kernel.driver.kc.shell_channel.send(kernel.driver.kc.session.msg("comm_close", {"comm_id": comm, "data": {}}))
    assert kernel.server.wait_for_disconnect(disconnects + 1, timeout=10), "the fix turn went on after Stop"
    kernel.server.add({"text": f"```python\n{FIXED_BODY}\n```"})
    reply = fix_request(kernel, FAILING, "KeyError: 'banana'", timeout=20)
    assert reply["ok"], reply  # not "Crystal is answering another cell"
