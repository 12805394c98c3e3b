"""Question forms (Q-1 … Q-5) and approvals answered with the comm messages a browser
sends, in the real kernel."""

from __future__ import annotations

import json

from crystal_kernel.jupyter.driver import check, click, type_text


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
    summary = run.find("Answered:")
    assert summary["text/plain"] == "Answered:\nDatabase: SQLite"
    texts = run.texts()
    card = next(i for i, t in enumerate(texts) if t.startswith("[question]"))
    assert card < texts.index(summary["text/plain"]) < texts.index("SQLite it is."), texts
    assert "application/vnd.jupyter.widget-view+json" not in summary, "the form is replaced by a static summary"
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
    assert run.find("Answered:")["text/plain"] == "Answered:\nLanguage: Rust\nChecks: lint, tests, docs"


def test_dismiss_gives_a_failed_tool_result_Q5(kernel):
    kernel.server.add(
        {"tool_calls": [{"name": "question", "arguments": {"questions": [
            question("Scope", "How far should I go?", ["a little", "a lot"], multiple=True)]}}]},
        {"text": "I will go with the default."},
    )
    run = kernel.run("Refactor", actions=[click("Dismiss")])
    assert run.status == "ok"
    assert tool_results(kernel.last_body())[-1].startswith("Error: The person dismissed the questions.")
    assert run.find("Questions dismissed.")


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
