"""Question forms (Q-1 … Q-5) and approvals answered with the comm messages a browser
sends, in the real kernel."""

from __future__ import annotations

import json

from crystal_kernel.jupyter.driver import KeyByKey, check, click, type_text


def question(header, text, options, multiple=False, custom=True):
    return {"header": header, "question": text, "multiple": multiple, "custom": custom,
            "options": [{"label": o, "description": f"about {o}"} for o in options]}


def tool_results(body):
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_single_select_submits_on_the_click_Q2(kernel):
    kernel.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            question("Database", "Which database should I use?", ["Postgres", "SQLite"])]}}]},
        {"text": "SQLite it is."},
    )
    run = kernel.run("Set up storage", actions=[click("SQLite")])
    assert run.status == "ok"
    assert json.loads(tool_results(kernel.last_body())[-1]) == [["SQLite"]]
    # The card shows the question and its answer; the form leaves nothing that says it again.
    card = run.find("[question]")
    assert card["text/plain"] == "[question] Database — done\nDatabase: Which database should I use? → SQLite"
    assert sum(t.count("SQLite") for t in run.texts()) == 2, run.texts()  # the card, the final answer
    assert not any("widget-view+json" in str(d) for d in run.outputs()), "no live widget is left"
    # The option buttons were Buttons described by the label, with the description shown.
    labels = {w.get("description") for w in kernel.driver.widgets.values() if w.get("_model_name") == "ButtonModel"}
    assert {"Postgres", "SQLite", "Dismiss"} <= labels


def test_two_questions_with_multi_select_go_through_submit_Q3_Q4(kernel):
    kernel.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            question("Language", "Which language?", ["Python", "Rust"]),
            question("Checks", "Which checks should run?", ["lint", "types", "tests"], multiple=True)]}}]},
        {"text": "Configured."},
    )
    actions = [click("Rust"), check("lint"), check("tests"), type_text("your own", "docs", nth=1),
               click("Next"), click("Back"), click("Next"), click("Submit")]
    run = kernel.run("Configure CI", actions=actions)
    assert run.status == "ok"
    assert json.loads(tool_results(kernel.last_body())[-1]) == [["Rust"], ["lint", "tests", "docs"]]
    card = run.find("[question]")["text/plain"]
    assert card.endswith("Which language? → Rust\nChecks: Which checks should run? → lint, tests, docs"), card
    assert "Answered" not in "\n".join(run.texts()), "each answer is shown once, in the card"


def test_dismiss_gives_a_failed_tool_result_Q5(kernel):
    kernel.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            question("Scope", "How far should I go?", ["a little", "a lot"], multiple=True)]}}]},
        {"text": "I will go with the default."},
    )
    run = kernel.run("Refactor", actions=[click("Dismiss")])
    assert run.status == "ok"
    assert tool_results(kernel.last_body())[-1].startswith("Error: The person dismissed the questions.")
    # Said once, by the card's failed result.
    assert run.find("[question]")["text/plain"].endswith("The person dismissed the questions.")
    assert "dismissed" not in "\n".join(t for t in run.texts() if not t.startswith("[question]"))


def bash_call(command):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_approval_allow_once(kernel):
    kernel.server.add(bash_call("echo approved-once"), {"text": "ok"})
    run = kernel.run("Run it", actions=[click("Allow once")])
    assert run.status == "ok"
    assert "approved-once" in tool_results(kernel.last_body())[-1]
    assert run.find("Allowed once: bash echo approved-once")
    labels = {w.get("description") for w in kernel.driver.widgets.values()}
    assert {"Allow once", "Allow for session", "Deny"} <= labels


def test_approval_allow_for_session_is_not_asked_again(kernel):
    kernel.server.add(bash_call("echo session-wide"), {"text": "first"})
    run = kernel.run("Run it", actions=[click("Allow for session")])
    assert run.find("Allowed for this session: bash echo session-wide")
    kernel.server.add(bash_call("echo session-wide"), {"text": "second"})
    opened = len(kernel.driver.widgets)
    run = kernel.run("Run it again")
    assert run.status == "ok"
    assert len(kernel.driver.widgets) == opened, "no form the second time"
    assert "session-wide" in tool_results(kernel.last_body())[-1]
    card = run.find("[bash] echo session-wide")
    assert "Allowed by you (allowed for this session)" in card["text/plain"]


def test_approval_deny_with_a_reason(kernel):
    kernel.server.add(bash_call("rm -rf build"), {"text": "I will not delete it."})
    run = kernel.run("Clean up", actions=[type_text("Reason", "keep the build"), click("Deny")])
    assert run.status == "ok"
    result = tool_results(kernel.last_body())[-1]
    assert "denied by the person" in result and "keep the build" in result
    assert run.find("Denied: bash rm -rf build (reason: keep the build)")
    card = run.find("[bash] rm -rf build")
    assert 'data-state="denied"' in card["text/html"]


def test_typing_key_by_key_gets_a_status_per_keystroke_and_arrives_whole(kernel):
    """FORM-1: the ipywidgets front end sends the next keystroke
    only after the kernel says idle for the last one; the kernel says so while the cell
    runs, so "inventory-api" arrives whole (not "i")."""
    kernel.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            question("Service", "Which service?", ["billing-api"], multiple=True)]}}]},
        {"text": "Noted."},
    )
    typing = KeyByKey("your own", "inventory-api", then=("Next", "Submit"))
    run = kernel.run("Which one", on_message=typing, timeout=60)
    assert run.status == "ok" and typing.done
    assert typing.statuses == ["busy", "idle"] * len("inventory-api")
    assert json.loads(tool_results(kernel.last_body())[-1]) == [["inventory-api"]]


def _home_with(kernel_factory, tmp_path, **config):
    home = kernel_factory.make_home(tmp_path / "h")
    path = home / ".crystal" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return home


def test_person_timeout_denies_with_a_reason_the_model_reads(kernel_factory, tmp_path):
    """SPEC §12 personTimeoutSeconds: a form nobody answers ends in a clear denial; the
    cell completes (no kernel busy forever)."""
    k = kernel_factory.start(home=_home_with(kernel_factory, tmp_path, personTimeoutSeconds=1))
    k.server.add(bash_call("touch never"), {"text": "Nobody approved; stopping."})
    run = k.run("Touch it", timeout=60)
    assert run.status == "ok"
    result = tool_results(k.last_body())[-1]
    assert "Nobody answered within 1 seconds (personTimeoutSeconds)" in result
    assert not (k.workspace / "never").exists()
    assert run.find("no decision")["text/plain"].splitlines()[1].startswith("Approval for bash touch never: no decision.")
    assert run.outputs()[-1]["text/plain"] == "Nobody approved; stopping."


def test_person_timeout_zero_means_nobody_answers_forms(kernel_factory, tmp_path):
    """personTimeoutSeconds 0 (headless runs): no form at all, the ask is denied at once."""
    k = kernel_factory.start(home=_home_with(kernel_factory, tmp_path, personTimeoutSeconds=0))
    k.server.add(bash_call("touch never"), {"text": "Denied, as expected."})
    run = k.run("Touch it", timeout=30)
    assert run.status == "ok" and run.seconds < 20
    assert "No person is present" in tool_results(k.last_body())[-1]
    assert not any(w.get("description") == "Allow once" for w in k.driver.widgets.values())


def test_live_comm_lists_the_waiting_form_and_shows_it_again(kernel):
    """Reload and restart (live_outputs.py): the lab extension's ``crystal.live`` comm
    gets the display ids still live and the waiting form is published again; after the
    turn nothing is live."""
    import uuid

    kernel.server.add(bash_call("echo live-check"), {"text": "done"})
    state = {"comm": None, "open_id": None, "reply": None, "again": [], "clicked": False, "order": []}

    def on_message(msg, driver):
        if msg is not None and state["open_id"] and msg["parent_header"].get("msg_id") == state["open_id"]:
            state["order"].append(msg["msg_type"])
            if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == state["comm"]:
                state["reply"] = msg["content"]["data"]
            elif msg["msg_type"] == "display_data":
                state["again"].append(msg["content"])
        forms = [s for s in driver.open_widgets().values() if s.get("description") == "Allow once"]
        if forms and state["comm"] is None:
            state["comm"] = uuid.uuid4().hex
            open_msg = driver.kc.session.msg("comm_open", {"comm_id": state["comm"], "target_name": "crystal.live",
                                                          "data": {}})
            state["open_id"] = open_msg["header"]["msg_id"]
            driver.kc.shell_channel.send(open_msg)
        if state["reply"] is not None and state["again"] and not state["clicked"]:
            state["clicked"] = driver._try(click("Allow once"))

    run = kernel.run("Check live", on_message=on_message, timeout=60, cell_id="unsaved-cell")
    assert run.status == "ok" and state["clicked"]
    # The running cell is listed with its source (a page that never saved it adds it back),
    # before its outputs are shown again: all of them, not only the live ones.
    # With its request and execution count: a reloaded page ends the cell's [*] with them
    # when the kernel goes idle for that request (the reply goes to the page that is gone).
    assert state["reply"]["running"] == [{"cell": "unsaved-cell", "source": "Check live",
                                          "request": run.reply["parent_header"]["msg_id"],
                                          "count": run.reply["content"]["execution_count"]}]
    assert state["order"].index("comm_msg") < state["order"].index("display_data"), state["order"]
    assert any(c["data"]["text/plain"].startswith("Crystal · work") for c in state["again"]), "the status line too"
    assert all(c["metadata"]["crystal"]["cell"] == "unsaved-cell" for c in state["again"])
    # The waiting card is live too (shown again); the form is the one with the widget.
    again = next(c for c in state["again"] if "application/vnd.jupyter.widget-view+json" in c["data"])
    meta = again["metadata"]["crystal"]
    assert meta["live"] is True and meta["display"] in state["reply"]["live"]
    assert "application/vnd.jupyter.widget-view+json" in again["data"]
    assert meta["stale"]["text/plain"] == ("Approval for bash echo live-check: no decision. "
                                           "The kernel stopped before anyone answered.")
    # Every output names its display; the answered form is static and no longer live.
    summary = [m for m in run.messages if m["msg_type"] == "update_display_data"
               and m["content"]["metadata"].get("crystal", {}).get("display") == meta["display"]][-1]
    assert "live" not in summary["content"]["metadata"]["crystal"]
    assert all("display" in m["content"]["metadata"].get("crystal", {}) for m in run.messages
               if m["msg_type"] in ("display_data", "update_display_data"))
    assert "Allowed once: bash echo live-check" in run.find("Allowed once")["text/plain"]
    # After the turn nothing is live any more.
    import queue
    import time

    kc = kernel.driver.kc
    kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": "after", "target_name": "crystal.live", "data": {}}))
    deadline, reply = time.monotonic() + 15, None
    while reply is None and time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if msg["msg_type"] == "comm_msg" and msg["content"]["comm_id"] == "after":
            reply = msg["content"]["data"]
    assert reply == {"live": [], "running": []}, "nothing is kept once the turn ended"


def test_edit_approval_form_shows_the_files_hunk_and_no_false_warning_GUARD4(kernel):
    """GUARD-4, in the real kernel: the form for an ``edit`` of line 17 shows the
    host's diff against the file (``@@ -14,7 +14,7 @@``, context, no 'No newline'
    markers) and no warning about lines or whitespace for an ordinary fragment."""
    lines = [f"v{n} = {n}\n" for n in range(1, 31)]
    lines[16] = "total = price * qty\n"
    target = kernel.workspace / "shop17.py"
    target.write_text("".join(lines))
    kernel.server.add({"tool_calls": [{"name": "edit", "arguments": {
        "path": "shop17.py", "old_string": "price * qty", "new_string": "price * qty * 2"}}]},
        {"text": "Left as it was."})
    run = kernel.run("Double the total", actions=[click("Deny")])
    assert run.status == "ok"
    forms = [s.get("value", "") for s in kernel.driver.widgets.values()
             if s.get("_model_name") == "HTMLModel" and "crystal-approval-call" in str(s.get("value", ""))]
    shown = forms[-1]
    assert "@@ -14,7 +14,7 @@" in shown and "@@ -1 +1 @@" not in shown
    assert "v16 = 16" in shown and "v18 = 18" in shown
    assert "No newline at end of file" not in shown
    assert "This runs" not in shown and "starts or ends with whitespace" not in shown
    assert target.read_text() == "".join(lines), "denied: the file is unchanged"
