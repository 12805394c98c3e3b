"""An approval's decision shows on its tool's card, above the result it led to (FORM-2,
TRUST-7's one-statement rule for decisions): the answered form leaves nothing below the
result. The real kernel, with the comm messages a browser sends."""

from __future__ import annotations

from crystal_kernel.jupyter.driver import click, type_text


def bash_call(command):
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_allowed_once_is_on_the_card_above_the_result_not_below_it(kernel):
    kernel.server.add(bash_call("echo on-the-card"), {"text": "Done."})
    run = kernel.run("Run it", actions=[click("Allow once")])
    assert run.status == "ok"
    card = run.find("[bash] echo on-the-card")
    # Header, then the decision, then the result: read top to bottom.
    assert card["text/plain"].startswith("[bash] echo on-the-card — done\nAllowed once: bash echo on-the-card\non-the-card"), \
        card["text/plain"]
    html = card["text/html"]
    assert html.index("Allowed once") < html.index("<pre"), html
    # Said once: no other output of the cell says what was decided.
    others = [t for t in run.texts() if not t.startswith("[bash]")]
    assert not any("Allowed" in t for t in others), run.texts()
    assert run.outputs()[-1]["text/plain"] == "Done."


def test_denied_with_a_reason_is_on_the_card_only(kernel):
    kernel.server.add(bash_call("rm -rf dist"), {"text": "Kept it."})
    run = kernel.run("Clean", actions=[type_text("Reason", "still needed"), click("Deny")])
    assert run.status == "ok"
    card = run.find("[bash] rm -rf dist")
    assert card["text/plain"] == "[bash] rm -rf dist — denied\nDenied: bash rm -rf dist (reason: still needed)"
    assert 'data-state="denied"' in card["text/html"]
    assert not any("Denied" in t for t in run.texts() if not t.startswith("[bash]")), run.texts()


def test_allowed_for_the_session_is_on_the_card(kernel):
    kernel.server.add(bash_call("echo all-session"), {"text": "Fine."})
    run = kernel.run("Run", actions=[click("Allow for session")])
    card = run.find("[bash] echo all-session")["text/plain"]
    assert card.splitlines()[1] == "Allowed for this session: bash echo all-session", card
    assert not any("Allowed" in t for t in run.texts() if not t.startswith("[bash]")), run.texts()
