"""A client that ignores display updates: jupyter-mcp-server's execute
tools keep only ``display_data`` and ``execute_result`` and saved "Inner C", the first
streamed piece of the answer. Here a raw jupyter_client reader does the same against the
real kernel; it must end with the whole answer and no cut piece of it."""

from __future__ import annotations

import time

import pytest

ANSWER = ("Inner Content arrives in many small pieces, and a reader that never applies "
          "update_display_data still ends with every word of it, down to the last one.")


def kept_outputs(kc, msg_id: str, timeout: float = 60.0) -> list[dict]:
    """Run-to-idle iopub of one request: the data of each display_data and
    execute_result, in order; update_display_data is ignored."""
    kept: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=deadline - time.monotonic())
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] in ("display_data", "execute_result"):
            kept.append(msg["content"]["data"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return kept
    raise TimeoutError("the cell did not finish")


@pytest.mark.parametrize("front", ["plain", "lab extension connected"])
def test_a_reader_that_ignores_display_updates_keeps_the_whole_answer(kernel_factory, front):
    k = kernel_factory.start()
    if front != "plain":
        # JupyterLab with Crystal's extension has the notebook open too: answers stream
        # as deltas, which only the extension renders.
        k.driver.open_comm("crystal.live", {"streamDeltas": True})
        k.driver.drain(1.0)
    k.server.add({"text": ANSWER, "chunk": 3, "delay": 0.01})
    kc = k.driver.kc
    msg_id = kc.execute("Tell me about the content.")
    kept = kept_outputs(kc, msg_id)
    plains = [str(data.get("text/plain", "")) for data in kept]
    assert plains[-1] == ANSWER, plains
    assert "Inner Content arrives" in kept[-1]["text/html"] and "down to the last one." in kept[-1]["text/html"]
    # Nothing it kept is a piece of the answer: the streamed display reached it empty.
    assert [p for p in plains if p and p != ANSWER and ANSWER.startswith(p)] == [], plains
    assert sum(ANSWER in p for p in plains) == 1, plains
    kc.get_shell_msg(timeout=10)  # the execute reply
