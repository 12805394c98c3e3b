"""NB-3: a prompt cell run while a Fix with Crystal turn runs in the same session waits
its turn, as a second cell waits for the first, and says so in one English line; it
never fails with "A turn is already running". The real kernel under jupyter_client."""

from __future__ import annotations

from crystal_kernel.jupyter.fix_cell import WAITED, WAITING
from tests.jupyter.test_sidebar_comm import open_sidebar

FIXED = "```python\nprint(1 + 1)\n```\nIt divided by zero; now it adds."


def test_nb3_a_prompt_cell_during_a_fix_waits_for_it_then_answers(kernel):
    kernel.server.add({"text": FIXED, "hold_after": 1}, {"text": "The total is 7."})
    comm = open_sidebar(kernel)
    kernel.driver.send_comm(comm, {"id": 9001, "op": "fix", "args": {"source": "1/0", "traceback": "ZeroDivisionError"}})
    assert kernel.server.wait_held(20), "the fix never reached the model"
    fix_replies: list[dict] = []
    waited: list[str] = []

    def watch(msg, driver):
        if msg is None:
            return
        content = msg["content"]
        if msg["msg_type"] == "comm_msg" and content.get("data", {}).get("id") == 9001:
            fix_replies.append(content["data"])
        text = str(content.get("data", {}).get("text/plain", "")) if msg["msg_type"] == "display_data" else ""
        if WAITING in text:
            waited.append(text)
            kernel.server.release()  # the fix's model answers now; the cell waited for it

    run = kernel.run("What is the total now?", on_message=watch, timeout=90)
    assert run.status == "ok", run.texts()
    assert waited, "the cell did not say why it waited"
    texts = run.texts()
    assert not any("Internal error" in t or "already running" in t for t in texts), texts
    assert f"Note: {WAITED}" in texts, texts
    assert texts[-1] == "The total is 7."
    assert fix_replies and fix_replies[0]["ok"] and fix_replies[0]["data"]["source"] == "print(1 + 1)"
    # The cell's own turn asked the model after the fix: its prompt, not the fix's.
    assert "What is the total now?" in str(kernel.last_body()["messages"][-1])
