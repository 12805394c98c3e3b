"""Question and approval forms as real ipywidgets objects, clicked in process (the
comm layer is ipywidgets' own no-kernel comm; the kernel tests cover the wire)."""

from __future__ import annotations

import asyncio

import pytest

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import ApprovalRequest, Question, QuestionOption
from crystal_kernel.jupyter.render import RecordingOutput
from crystal_kernel.jupyter.widgets import QuestionForm, WidgetInteraction


def q(header, options, multiple=False, custom=True):
    return Question(header=header, question=f"{header}?", multiple=multiple, custom=custom,
                    options=[QuestionOption(label=o, description=f"d-{o}") for o in options])


def buttons(widget):
    found = []

    def walk(w):
        if type(w).__name__ == "Button":
            found.append(w)
        for c in getattr(w, "children", ()):
            walk(c)

    walk(widget)
    return {b.description: b for b in found}


def test_unanswered_single_select_blocks_next_with_a_message():
    done = []
    form = QuestionForm([q("A", ["x", "y"]), q("B", ["z"], multiple=True)], done.append)
    buttons(form.widget)["Next"].click()
    assert "Choose an answer for: A" in form.message.value and done == []
    buttons(form.widget)["y"].click()
    form.custom[0].value = "typed"
    assert form.choice[0] is None, "typing replaces the chosen option"
    buttons(form.widget)["Next"].click()
    buttons(form.widget)["Submit"].click()
    assert done == [[["typed"], []]]


def test_immediate_form_submits_typed_text():
    done = []
    form = QuestionForm([q("Name", ["a"])], done.append)
    assert "Next" not in buttons(form.widget)
    form.custom[0].value = "  custom answer "
    assert done == [[["custom answer"]]]


async def test_timeout_dismisses_questions_and_denies_approvals():
    out = RecordingOutput()
    inter = WidgetInteraction(out, timeout=0.05)
    # The model is told why (a failed tool result, Q-5), not that the person dismissed.
    with pytest.raises(ToolError, match=r"Nobody answered within 0.05 seconds \(personTimeoutSeconds\)"):
        await inter.ask_questions([q("A", ["x"])])
    # The form leaves nothing: the question's card shows the failed result that says why.
    assert out.outputs[-1] == {"text/plain": "", "text/html": ""}
    decision = await inter.ask_approval(ApprovalRequest(call_id="1", tool="bash", arguments={"command": "ls"},
                                                        risk="execute", authority="workspace"))
    assert decision.outcome == "deny" and "Nobody answered within 0.05 seconds" in decision.reason
    assert inter.open_forms == []


async def test_cancelled_turn_replaces_the_form():
    out = RecordingOutput()
    inter = WidgetInteraction(out)
    task = asyncio.ensure_future(inter.ask_approval(ApprovalRequest(
        call_id="1", tool="bash", arguments={"command": "ls"}, risk="execute", authority="workspace",
        verdict={"risk_level": "medium", "user_authorization": "low", "outcome": "ask", "rationale": "unclear"})))
    for _ in range(10):
        await asyncio.sleep(0)
    assert "Reviewer: risk medium, authorization low, suggests ask — unclear" in inter.open_forms[0].request_html()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert out.outputs[-1]["text/plain"].startswith("Approval for bash ls: no decision. The turn was interrupted.")


def test_approval_form_shows_the_per_cell_diff_of_notebook_edit():
    """SPEC §12 notebook tools: the person approving a notebook_edit sees the change."""
    from crystal_kernel.jupyter.widgets import ApprovalForm

    preview = "Replaced the source of cell 3 (id ab12).\n--- a/a.ipynb cell 3 (id ab12)\n-1/0\n+1/<b>2</b>\n"
    form = ApprovalForm(ApprovalRequest(call_id="1", tool="notebook_edit", risk="write", authority="workspace",
                                        arguments={"path": "a.ipynb", "action": "replace"}, preview=preview),
                        lambda decision: None)
    html = form.request_html()
    assert "Replaced the source of cell 3 (id ab12).\n--- a/a.ipynb cell 3 (id ab12)\n-1/0\n+1/&lt;b&gt;2&lt;/b&gt;" in html
    assert "<b>2</b>" not in html


def test_person_timeout_config_is_checked_and_flag_wins(tmp_path):
    from types import SimpleNamespace

    from crystal_kernel.core.config import load_config
    from crystal_kernel.core.errors import UserError
    from crystal_kernel.jupyter.widgets import live_forms

    assert load_config(tmp_path, environ={}).person_timeout_seconds == 3600
    assert load_config(tmp_path, {"personTimeoutSeconds": 0}, environ={}).person_timeout_seconds == 0
    with pytest.raises(UserError, match="personTimeoutSeconds"):
        load_config(tmp_path, {"personTimeoutSeconds": -1}, environ={})
    session = SimpleNamespace(config=SimpleNamespace(person_timeout_seconds=3600), workspace=tmp_path)
    assert live_forms(session, RecordingOutput(), ask_timeout=None, before_ask=None).timeout == 3600
    assert live_forms(session, RecordingOutput(), ask_timeout=5, before_ask=None).timeout == 5
    session.config.person_timeout_seconds = 0
    assert live_forms(session, RecordingOutput(), ask_timeout=None, before_ask=None) is None
