"""Questions and approvals answered with a browser's comm messages inside a
``%%crystal`` cell, interrupts (the stop button is SIGINT for a stock kernelspec), the
synchronous ``x = %crystal`` form, and ``/logs --follow``."""

from __future__ import annotations

import json
import re
import time

from crystal_kernel.jupyter.driver import KeyByKey, click, type_text
from tests.cpu_wait import runqueue_wait
from tests.magics.conftest import start_python_kernel
from tests.magics.test_magic_turns import tool_results


def question(header, text, options):
    return {"header": header, "question": text, "multiple": False, "custom": True,
            "options": [{"label": o, "description": f"about {o}"} for o in options]}


def bash_call(command):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_question_form_answered_by_comm_messages(kernel):
    kernel.server.add({"tool_calls": [{"name": "question", "arguments": {"questions": [
        question("Format", "Which file format?", ["csv", "parquet"])]}}]}, {"text": "Parquet it is."})
    run = kernel.run("%%crystal\nSave the data", actions=[click("parquet")])
    assert run.status == "ok"
    assert json.loads(tool_results(kernel.last_body())[-1]) == [["parquet"]]
    # The card shows the answer once; the form leaves no second summary.
    assert run.find("[question]")["text/plain"].endswith("Which file format? → parquet")
    assert sum(t.count("parquet") for t in run.texts()) == 1, run.texts()
    assert not any("widget-view+json" in str(d) for d in run.outputs())
    assert run.outputs()[-1]["text/plain"] == "Parquet it is."


def test_approval_buttons_in_a_line_magic(kernel):
    kernel.server.add(bash_call("echo approved-here"), {"text": "ran"})
    run = kernel.run("%crystal run the echo", actions=[click("Allow once")])
    assert run.status == "ok"
    assert "approved-here" in tool_results(kernel.last_body())[-1]
    assert run.find("Allowed once: bash echo approved-here")
    kernel.server.add(bash_call("rm -rf data"), {"text": "Kept it."})
    run = kernel.run("%%crystal\nclean", actions=[type_text("Reason", "keep data"), click("Deny")])
    assert "keep data" in tool_results(kernel.last_body())[-1]
    assert 'data-state="denied"' in run.find("[bash] rm -rf data")["text/html"]


def interrupt_when(predicate, quiet_too=False):
    """An on_message hook that interrupts the kernel (SIGINT) once ``predicate(msg)``
    (also asked on quiet polls, with msg None, when ``quiet_too``).

    ``hook.state["sent"]`` is when the interrupt was sent: the tests time the turn's end
    from there, not from the cell's start, since the cell's start, its model request and
    its tool's start are what a loaded machine slows (a bound from the start failed under
    load; tests/cpu_wait.py). Each bound is well below the hang the interrupt cuts short."""
    state = {"sent": None}

    def hook(msg, driver):
        if (msg is not None or quiet_too) and state["sent"] is None and predicate(msg):
            state["sent"] = time.monotonic()
            kernel_manager = hook.km
            kernel_manager.interrupt_kernel()
    hook.state = state
    return hook


def test_interrupt_ends_a_hanging_turn_and_the_next_cell_works(kernel):
    kernel.server.add({"text": "partial answer then", "chunk": 4, "hang": 15, "hang_after": 3})
    # A streamed answer's display_data is empty; its text comes as display updates
    # (live_outputs.LiveDisplay): the Stop lands while the answer streams, before the hang.
    hook = interrupt_when(lambda m: m["msg_type"] in ("display_data", "update_display_data")
                          and "crystal-answer" in m["content"]["data"].get("text/html", ""))
    hook.km = kernel.km
    run = kernel.run("%%crystal\nWrite slowly", on_message=hook, timeout=30)
    assert time.monotonic() - hook.state["sent"] < 10, "the turn ends soon after the interrupt"
    assert run.status == "error" and run.reply["content"]["ename"] == "TurnInterrupted"
    assert run.find("Interrupted. The partial answer is kept")
    error = [m["content"] for m in run.messages if m["msg_type"] == "error"][-1]
    assert error["traceback"] == ["KeyboardInterrupt: The turn was interrupted."], "one line, no traceback"
    interrupted_texts = run.texts()
    kernel.server.add({"text": "Back."})
    run = kernel.run("%crystal continue")
    assert run.status == "ok" and run.outputs()[-1]["text/plain"] == "Back."
    previous = [m for m in kernel.last_body()["messages"] if m["role"] == "assistant"][-1]["content"]
    # As far as the answer had come when the Stop landed (a chunk arriving in that same
    # moment is dropped with the turn, never shown): at least the first chunk, shown.
    assert previous and "partial answer then".startswith(previous), previous
    assert any(previous in text for text in interrupted_texts), "the partial answer is kept as it was shown"


def test_interrupt_stops_blocking_code_in_the_python_tool(kernel):
    kernel.reset(approval="full")
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {
        "code": "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"}}]}, {"text": "never"})
    asked = kernel.requests()
    hook = interrupt_when(lambda m: m["msg_type"] == "stream" and "sleeping" in m["content"]["text"])
    hook.km = kernel.km
    # SANDBOX-1: the python tool runs unsandboxed in the kernel, so `full` asks for it too.
    run = kernel.run("%%crystal\nSleep a minute", on_message=hook, timeout=30, actions=[click("Allow once")])
    assert time.monotonic() - hook.state["sent"] < 15, "the turn ends soon after the interrupt"
    assert run.status == "error" and run.reply["content"]["ename"] == "TurnInterrupted"
    # The code got the KeyboardInterrupt, as in a normal cell; the call and the turn
    # ended as cancelled, and the model was not asked again ("never" stays queued).
    assert "KeyboardInterrupt" in run.streams
    assert 'data-state="cancelled"' in run.find("[python]")["text/html"]
    assert kernel.requests() == asked + 1
    kernel.server.clear()
    kernel.server.add({"text": "Awake."})
    assert kernel.run("%crystal wake up").status == "ok"


def test_stop_ends_the_turn_when_code_in_it_absorbs_the_first_cancel(kernel):
    """ROBUST-3: a person's Stop ends the turn whatever the turn was doing — also when
    something it awaits absorbs the first cancel (asyncio.wait_for before Python 3.12
    does, when the Stop lands as the awaited step finishes; here the model's own async
    code catches it and sleeps on). The Stop stands until the turn has ended."""
    kernel.reset(approval="full")
    code = ("import asyncio\nprint('sleeping', flush=True)\ntry:\n    await asyncio.sleep(30)\n"
            "except asyncio.CancelledError:\n    print('kept going', flush=True)\n    await asyncio.sleep(30)")
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": code}}]}, {"text": "never"})
    kernel_pid, asked = kernel.km.provisioner.pid, kernel.requests()

    def off_cpu() -> float:  # the kernel's and this process's threads, ready but off the CPU
        return runqueue_wait(kernel_pid) + runqueue_wait()

    sent: dict[str, float] = {}

    def hook(msg, driver):
        if "at" not in sent and msg is not None and msg["msg_type"] == "stream" and "sleeping" in msg["content"]["text"]:
            sent["at"], sent["waited"] = time.monotonic(), off_cpu()
            kernel.km.interrupt_kernel()

    # SANDBOX-1: the python tool runs unsandboxed in the kernel, so `full` asks for it too.
    run = kernel.run("%%crystal\nSleep on", on_message=hook, timeout=60, actions=[click("Allow once")])
    elapsed, waited = time.monotonic() - sent["at"], off_cpu() - sent["waited"]
    assert "kept going" in "".join(run.streams), "the model's code absorbed the first cancel"
    assert run.status == "error" and run.reply["content"]["ename"] == "TurnInterrupted"
    # Within a second of the Stop standing again, on the kernel's and the client's own
    # time (tests/cpu_wait.py: the wall time less what the loaded machine kept them off
    # a CPU); the hard cap is well below the 30 s the code would sleep on.
    assert elapsed - waited < 3.0, (elapsed, waited)
    assert elapsed < 12, elapsed
    assert kernel.requests() == asked + 1, "the turn did not go on to ask the model again"
    kernel.server.add({"text": "Awake."})
    assert kernel.run("%crystal wake up").status == "ok"


def test_sync_form_returns_the_final_text_without_widgets(kernel):
    kernel.server.add(bash_call("echo needs-approval"), {"text": "I could not run it. The answer is 7."})
    run = kernel.run("answer = %crystal What is the answer?\nprint(repr(answer))")
    assert run.status == "ok"
    assert run.streams.strip() == "'I could not run it. The answer is 7.'"
    assert any(t.startswith("Note: Synchronous call (x = %crystal …)") for t in run.texts())
    assert "denied" in tool_results(kernel.last_body())[-1].lower()
    assert not any(w.get("description") == "Allow once" and cid not in kernel.driver.closed
                   for cid, w in kernel.driver.widgets.items()), "no approval form in the synchronous form"
    tools = {t["function"]["name"] for t in kernel.last_body()["tools"]}
    assert "question" not in tools, "questions are unavailable in the synchronous form"
    # After a synchronous turn the async form still works on the same session.
    kernel.server.add({"text": "Same session."})
    run = kernel.run("%crystal and now?")
    assert run.status == "ok"
    assert "question" in {t["function"]["name"] for t in kernel.last_body()["tools"]}
    assert "The answer is 7." in json.dumps(kernel.last_body()["messages"])


def test_sync_form_in_a_function_and_its_interrupt(kernel):
    kernel.server.add({"text": "from a function"})
    run = kernel.run("def ask(q):\n    said = %crystal {q}\n    return said\nprint(ask('hi'))")
    assert run.status == "error", "{q} names the notebook's variables, not a function's locals"
    assert "UsageError: {q} in the prompt names no variable" in run.streams
    run = kernel.run("def ask():\n    said = %crystal say it\n    return said\nprint(ask().upper())")
    assert run.status == "ok" and run.streams.strip() == "FROM A FUNCTION"
    kernel.server.add({"text": "slow", "hang": 15, "hang_after": 1})
    before = kernel.requests()
    hook = interrupt_when(lambda m: kernel.requests() > before, quiet_too=True)
    hook.km = kernel.km
    run = kernel.run("x = %crystal go slowly", on_message=hook, timeout=30)
    assert time.monotonic() - hook.state["sent"] < 10, "the turn ends soon after the interrupt"
    assert run.status == "error" and run.reply["content"]["ename"] == "TurnInterrupted"
    kernel.server.add({"text": "fine"})
    run = kernel.run("%crystal fine?")
    assert run.status == "ok", (run.texts(), run.streams)


def test_logs_follow_is_a_live_view(kernel):
    kernel.reset(approval="full")
    # The job waits for a file the test writes once the view is up (at most 20 s).
    command = ("echo line1; echo line2; for i in $(seq 200); do [ -f go1 ] && break; sleep 0.1; done; "
               "echo line3; echo line4")
    kernel.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": command}}]},
                      {"text": "Started."})
    kernel.run("%%crystal\nStart the job")
    job_id = re.search(r"Started background job (\S+) ", tool_results(kernel.last_body())[-1]).group(1)
    # On a loaded machine the job's first lines may not be captured yet: wait for the
    # mirrored log file to hold them, so the view's first state is known.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        logs = list((kernel.workspace / ".crystal" / "data" / "jobs").rglob(f"{job_id}.log"))
        if logs and "line2" in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.05)
    run = kernel.run(f"%crystal /logs {job_id} --follow")
    assert run.status == "ok"
    view = run.outputs()[0]["text/plain"]
    assert view.startswith(f"{job_id} · running · {command}")
    assert view.splitlines()[1:] == ["line1", "line2"], "the cell ends at once; the view goes on updating"
    (kernel.workspace / "go1").write_text("")

    def finished(driver):
        return any(b.get("text/plain", "").endswith("line4") and " · running · " not in b.get("text/plain", "")
                   for b in driver.late_updates.values())
    kernel.driver.drain(10, until=finished)
    assert finished(kernel.driver), kernel.driver.late_updates
    final = [b["text/plain"] for b in kernel.driver.late_updates.values() if b["text/plain"].endswith("line4")][-1]
    assert final.splitlines()[1:] == ["line1", "line2", "line3", "line4"]


def test_logs_follow_from_the_synchronous_form(kernel):
    kernel.reset(approval="full")
    command = "echo first; for i in $(seq 200); do [ -f go2 ] && break; sleep 0.1; done; echo second"
    kernel.server.add({"tool_calls": [{"name": "bash_start", "arguments": {"command": command}}]},
                      {"text": "Started."})
    kernel.run("%%crystal\nStart another job")
    job_id = re.search(r"Started background job (\S+) ", tool_results(kernel.last_body())[-1]).group(1)
    run = kernel.run(f"view = %crystal /logs {job_id} --follow\nprint(view)")
    assert run.status == "ok" and run.streams == "None\n"
    assert " · running · " in run.outputs()[0]["text/plain"]
    (kernel.workspace / "go2").write_text("")
    kernel.driver.drain(10, until=lambda d: any(b.get("text/plain", "").endswith("first\nsecond")
                                                for b in d.late_updates.values()))
    assert any(b.get("text/plain", "").endswith("first\nsecond") for b in kernel.driver.late_updates.values())


def test_sync_form_runs_the_python_tool_and_its_interrupt_stops_user_code(magic_server, tmp_path):
    """No form can be answered in the synchronous form: a python call (asked in every
    mode, SANDBOX-1) is denied there until the person allowed python for the session in
    a form; then it runs, and an interrupt stops the code. Its own kernel: the session
    allowance must not reach the folder's other tests."""
    magic_server.clear()
    kernel = start_python_kernel(tmp_path, magic_server)
    try:
        _sync_form_runs_the_allowed_python_tool(kernel)
    finally:
        kernel.stop()


def _sync_form_runs_the_allowed_python_tool(kernel):
    kernel.reset(approval="full")
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print('unasked')"}}]},
                      {"text": "Denied."})
    run = kernel.run("said = %crystal print something\nprint(said)")
    assert run.status == "ok" and "unasked" not in run.streams
    assert "No person is present" in tool_results(kernel.last_body())[-1]
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print('allowed')"}}]},
                      {"text": "Allowed."})
    assert kernel.run("%%crystal\nprint it", actions=[click("Allow for session")]).status == "ok"
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {"code": "made_in_sync = 5\nprint('set it')"}}]},
                      {"text": "Set."})
    run = kernel.run("said = %crystal set a variable\nprint(said, made_in_sync)")
    assert run.status == "ok" and run.streams.endswith("Set. 5\n") and "set it" in run.streams
    kernel.server.add({"tool_calls": [{"name": "python", "arguments": {
        "code": "import time\nprint('looping', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"}}]},
        {"text": "never"})
    hook = interrupt_when(lambda m: m["msg_type"] == "stream" and "looping" in m["content"]["text"])
    hook.km = kernel.km
    run = kernel.run("said = %crystal loop for a minute", on_message=hook, timeout=30)
    assert time.monotonic() - hook.state["sent"] < 10, "the turn ends soon after the interrupt"
    assert run.status == "error" and run.reply["content"]["ename"] == "TurnInterrupted"
    assert "KeyboardInterrupt" in run.find("[python]")["text/plain"]
    kernel.server.add({"text": "ok"})
    assert kernel.run("%crystal still there").status == "ok"


def test_unload_removes_the_magic_and_reload_gets_it_back(kernel):
    run = kernel.run("%unload_ext crystal_kernel\n")
    assert run.status == "ok"
    run = kernel.run("%crystal /mode")
    assert run.status == "error" and "UsageError: Line magic function `%crystal` not found." in run.streams
    run = kernel.run("%load_ext crystal_kernel")
    assert run.status == "ok"
    assert kernel.run("%crystal /mode").texts() == ["Mode: work"]


def test_typing_key_by_key_into_the_deny_reason_arrives_whole(kernel):
    """FORM-1: in a python3 kernel with the extension loaded, each keystroke into the
    deny-reason box gets busy/idle, so "no, keep it" reaches the model, not "n"."""
    kernel.server.add(bash_call("rm -rf build"), {"text": "Kept it."})
    typing = KeyByKey("Reason for denying", "no, keep it", then=("Deny",))
    run = kernel.run("%%crystal --approval default\nClean up", on_message=typing, timeout=60)
    assert run.status == "ok" and typing.done
    assert typing.statuses == ["busy", "idle"] * len("no, keep it")
    assert "no, keep it" in tool_results(kernel.last_body())[-1]
