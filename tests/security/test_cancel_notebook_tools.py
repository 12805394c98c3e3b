"""ROBUST-3 for the notebook tools, which run inside a real Crystal kernel under
jupyter_client: ``python`` running blocking code, and ``variables`` / ``cell_output``
stuck in a value's ``__repr__`` (the namespace's code, which the model itself can have
defined). The stop button ends the turn within 2 s, the tool's card says it was
interrupted, and the next cell works.
"""

from __future__ import annotations

import time

import pytest

from crystal_kernel.jupyter.driver import click
from crystal_kernel.testing.llm_server import LLMServer
from tests.jupyter.conftest import start_kernel

SLOW_REPR = """
import time
REPR_ARMED = False
class Slow:
    def __repr__(self):
        if REPR_ARMED:
            open(MARK, 'w').close()
            time.sleep(60)
        return 'slow'
slow = Slow()
Out[99] = slow
"""


@pytest.fixture(scope="module")
def nb_kernel(tmp_path_factory):
    with LLMServer(max_hang=20) as server:
        kernel = start_kernel(tmp_path_factory.mktemp("cancel-nb"), server)
        try:
            yield kernel
        finally:
            kernel.stop()


def stop_when_marked(kernel, mark):
    sent: dict[str, float] = {}

    def hook(msg, driver):
        if "at" not in sent and mark.exists():
            sent["at"] = time.monotonic()
            kernel.km.interrupt_kernel()

    return hook, sent


@pytest.mark.parametrize("tool,arguments", [
    ("python", {"code": "import time\nopen(MARK, 'w').close()\ntime.sleep(60)"}),
    ("variables", {}),
    ("cell_output", {"n": 99}),
])
def test_stop_button_ends_a_turn_stuck_in_a_notebook_tool_within_2_seconds(nb_kernel, tool, arguments):
    kernel = nb_kernel
    mark = kernel.workspace / f"{tool}.started"
    kernel.reset(approval="full")
    # The model's own code: the mark, and a value whose repr blocks once armed.
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": f"MARK = {str(mark)!r}\n" + SLOW_REPR}}]},
                      {"tool_calls": [{"name": "python", "arguments": {"code": "REPR_ARMED = True"}}]},
                      {"text": "Ready."})
    # SANDBOX-1: each python call is asked, `full` included (it runs unsandboxed in the kernel).
    assert kernel.run("Get ready", actions=[click("Allow once"), click("Allow once")]).status == "ok"
    kernel.server.add({"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": "never sent"})
    asked = len(kernel.server.bodies("chat"))
    hook, sent = stop_when_marked(kernel, mark)
    run = kernel.run(f"Use {tool}", on_message=hook, timeout=60,
                     actions=[click("Allow once")] if tool == "python" else [])
    replied = time.monotonic()
    assert "at" in sent, f"{tool} never reached the blocking code"
    assert run.reply["content"].get("ename") == "KeyboardInterrupt", run.texts()
    assert replied - sent["at"] < 2.0, f"{tool}: the turn ended {replied - sent['at']:.1f} s after the stop"
    card = run.find(f"[{tool}]")
    assert "KeyboardInterrupt" in card["text/plain"] or "Interrupted" in card["text/plain"] \
        or 'data-state="cancelled"' in card["text/html"], card["text/plain"]
    # ROBUST-3: the stopped turn asks the model nothing more ("never sent" stays queued).
    assert len(kernel.server.bodies("chat")) == asked + 1, kernel.server.bodies("chat")[asked:]
    kernel.server.clear()
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "REPR_ARMED = False"}}]},
                      {"text": "Back."})
    assert kernel.run("Still alive?", actions=[click("Allow once")]).status == "ok"
