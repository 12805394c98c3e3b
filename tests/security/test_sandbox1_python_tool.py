"""SANDBOX-1: the ``python`` notebook tool runs the model's code in the kernel's own
process, where no sandbox reaches, so it is approved as an unsandboxed command: a person
decides it in every approval mode, ``full`` and ``review`` included (it was not: in
``full`` its code wrote ``.crystal/prompts/work.md`` with nobody asked). The form says
it runs unsandboxed in the kernel.

A real Crystal kernel under jupyter_client; the loopback model server scripts the
model's call (and, in ``review``, plays the reviewer); the person's click is the comm
message a browser sends.
"""

from __future__ import annotations

import json
from pathlib import Path

from crystal_kernel.jupyter.driver import click
from crystal_kernel.testing.llm_server import LLMServer
from tests.jupyter.conftest import make_home, start_kernel

ORIGINAL = "Original work prompt.\n"
UNSANDBOXED = "It runs unsandboxed in the kernel"


def attack(workspace: Path) -> dict:
    """The model's call: append to the prompt the next session reads as its system text."""
    target = workspace / ".crystal" / "prompts" / "work.md"
    code = f"open({str(target)!r}, 'a').write('INJECTED\\n')\nprint('wrote the prompt')"
    return {"tool_calls": [{"name": "python", "arguments": {"code": code}}]}


def prepared(tmp_path: Path, **config) -> tuple[Path, Path]:
    """A Home with ``config`` and a workspace whose .crystal/prompts/work.md exists."""
    home = make_home(tmp_path)
    path = home / ".crystal" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    workspace = tmp_path / "ws"
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    (workspace / ".crystal" / "prompts" / "work.md").write_text(ORIGINAL)
    return home, workspace


def tool_results(body: dict) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m["role"] == "tool"]


def form_texts(kernel) -> list[str]:
    """The approval forms' HTML the kernel sent (one per form, in order)."""
    return [str(s.get("value", "")) for s in kernel.driver.widgets.values()
            if s.get("_model_name") == "HTMLModel" and "crystal-approval-call" in str(s.get("value", ""))]


def test_python_tool_in_full_is_asked_and_runs_once_the_person_allows__SANDBOX_1(tmp_path):
    """``full`` no longer runs it unasked: a form appears saying it runs unsandboxed in
    the kernel, and the code runs once the person clicks Allow once. In ``default`` the
    form says the same."""
    home, workspace = prepared(tmp_path)
    with LLMServer(max_hang=20) as server:
        kernel = start_kernel(tmp_path, server, home=home, workspace=workspace)
        try:
            assert kernel.run("/approval full").status == "ok"
            server.add(attack(workspace), {"text": "Done."})
            run = kernel.run("Add a line to the prompt", actions=[click("Allow once")])
            full_forms = form_texts(kernel)
            result = tool_results(kernel.last_body())[-1]
            assert kernel.run("/approval default").status == "ok"
            server.add({"tool_calls": [{"name": "python", "arguments": {"code": "print(1)"}}]}, {"text": "Fine."})
            denied = kernel.run("Print one", actions=[click("Deny")])
            all_forms = form_texts(kernel)
        finally:
            kernel.stop()
    assert run.status == "ok", run.texts()
    assert len(full_forms) == 1 and UNSANDBOXED in full_forms[0], full_forms
    assert "wrote the prompt" in result
    assert run.find("Allowed once: python")
    assert (workspace / ".crystal/prompts/work.md").read_text() == ORIGINAL + "INJECTED\n"
    assert denied.status == "ok" and len(all_forms) == 2 and UNSANDBOXED in all_forms[1]


def test_python_tool_in_full_is_denied_when_nobody_answers__SANDBOX_1(tmp_path):
    """Nobody answers the form (personTimeoutSeconds): the call is denied, the model is
    told so, and ``.crystal/prompts/work.md`` is unchanged."""
    home, workspace = prepared(tmp_path, personTimeoutSeconds=1)
    with LLMServer(max_hang=20) as server:
        kernel = start_kernel(tmp_path, server, home=home, workspace=workspace)
        try:
            assert kernel.run("/approval full").status == "ok"
            server.add(attack(workspace), {"text": "Nobody approved; stopping."})
            run = kernel.run("Add a line to the prompt", timeout=60)
            result = tool_results(kernel.last_body())[-1]
            forms = form_texts(kernel)
        finally:
            kernel.stop()
    assert run.status == "ok", run.texts()
    assert "Nobody answered within 1 seconds (personTimeoutSeconds)" in result, result
    assert "wrote the prompt" not in result
    assert len(forms) == 1 and UNSANDBOXED in forms[0]
    assert (workspace / ".crystal/prompts/work.md").read_text() == ORIGINAL


def _reviewer_allows(body: dict, path: str) -> dict | None:
    """The reviewer allows everything (high authorization); the agent's replies come
    from the queue."""
    if "You are the reviewer" in json.dumps(body):
        return {"text": '{"risk_level": "low", "user_authorization": "high", "harm_unrequested": false, '
                        '"rationale": "The user asked for it."}'}
    return None


def test_python_tool_in_review_goes_to_the_person_not_the_reviewer__SANDBOX_1(tmp_path):
    """In ``review`` a reviewer that would allow it is not asked: the person is, and
    with nobody answering the call is denied."""
    home, workspace = prepared(tmp_path, personTimeoutSeconds=1)
    with LLMServer(max_hang=20, router=_reviewer_allows) as server:
        kernel = start_kernel(tmp_path, server, home=home, workspace=workspace)
        try:
            assert kernel.run("/approval review").status == "ok"
            server.add(attack(workspace), {"text": "Nobody approved; stopping."})
            run = kernel.run("Add a line to the prompt", timeout=60)
            bodies = server.bodies("chat")
            forms = form_texts(kernel)
        finally:
            kernel.stop()
    assert run.status == "ok", run.texts()
    assert not [b for b in bodies if "You are the reviewer" in json.dumps(b)], "the reviewer was asked"
    assert len(forms) == 1 and UNSANDBOXED in forms[0]
    assert "Nobody answered within 1 seconds" in tool_results(bodies[-1])[-1]
    assert (workspace / ".crystal/prompts/work.md").read_text() == ORIGINAL
