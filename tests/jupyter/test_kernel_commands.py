"""Slash-command cells in the real kernel: /mode, /promptset, /jobs with Stop buttons,
/logs --follow updating after the cell has finished."""

from __future__ import annotations

import json
import re
import time

from crystal_kernel.jupyter.driver import click


def tool_names(body):
    return [t["function"]["name"] for t in body["tools"]]


def test_mode_switch_changes_status_line_and_catalog_MODE4(kernel):
    run = kernel.run("/mode plan")
    assert run.texts() == ["Mode is now plan. Saved as your default in ~/.crystal/config.json."]
    kernel.server.add({"text": "A plan."})
    run = kernel.run("Plan the work")
    assert run.outputs()[0]["text/plain"].startswith("Crystal · plan · approval default")
    assert "bash" not in tool_names(kernel.last_body())
    kernel.run("/mode work")
    kernel.server.add({"text": "Working."})
    kernel.run("Now work")
    assert "bash" in tool_names(kernel.last_body())


def test_bad_command_is_one_red_line_and_an_error_reply(kernel):
    run = kernel.run("/mode sideways")
    assert run.status == "error" and run.reply["content"]["ename"] == "UserError"
    assert run.texts() == ["UserError: Unknown mode 'sideways'; use plan or work."]


def test_promptset_switch_shows_in_the_status_line_PS7_PA8(kernel):
    folder = kernel.home / ".crystal" / "promptsets" / "strict"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompt.json").write_text(json.dumps({"name": "Strict", "enabled": False}))
    (folder / "work.md").write_text("You are strict. {{env}}")
    run = kernel.run("/promptset strict")
    assert run.status == "ok", run.texts()
    kernel.server.add({"text": "Strictly."})
    run = kernel.run("Hello")
    assert "prompts strict" in run.outputs()[0]["text/plain"]
    system = kernel.last_body()["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are strict.")
    assert kernel.run("/promptset default").status == "ok"


def _job_ids(text):
    return re.findall(r"\bj\d+\b", text)


def test_jobs_table_with_stop_button_and_live_logs(kernel):
    kernel.reset(approval="full")
    kernel.server.add(
        {"tool_calls": [{"name": "bash_start", "arguments": {
            "command": "for i in $(seq 1 30); do echo line$i; sleep 0.05; done"}},
            {"name": "bash_start", "arguments": {"command": "sleep 60"}}]},
        {"text": "Started two jobs."},
    )
    assert kernel.run("Start the jobs").status == "ok"
    run = kernel.run("/jobs")
    table, buttons = run.outputs()
    assert "<table" in table["text/html"] and "sleep 60" in table["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" in buttons
    counter, sleeper = _job_ids(table["text/plain"])[:2]

    # /logs --follow: the cell ends at once; the view keeps updating until the job ends.
    run = kernel.run(f"/logs {counter} --follow")
    assert run.status == "ok" and run.seconds < 2
    view_id = run.order[0]

    def finished(driver):
        data = driver.late_updates.get(view_id) or {}
        return 'data-state="exited"' in data.get("text/html", "")

    kernel.driver.drain(15, until=finished)
    final = kernel.driver.late_updates[view_id]["text/plain"]
    assert "line30" in final and final.startswith(f"{counter} · exited (exit 0)")

    # The Stop button on the sleeping job stops it.
    run = kernel.run("/jobs", actions=[click(f"Stop {sleeper}")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rows = kernel.run("/jobs").outputs()[0]["text/plain"]
        if re.search(rf"{sleeper}\s+stopped", rows):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the Stop button did not stop {sleeper}: {rows}")
