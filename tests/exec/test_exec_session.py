"""Exec tools inside a real Session and turn loop (scripted in-process provider, real
child processes): catalogs by mode (MODE-1/2), the MODE-3 approval floor in Plan, and
EX-12 on text-only and image-capable models."""

from __future__ import annotations

import base64
import json

from exec_support import PY, home_set

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.providers.base import Capabilities
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
SCRIPT = ("import json, os, sys; a = json.load(sys.stdin); "
          "print(json.dumps({'text': 'got ' + a['q'] + ' as ' + os.environ['CRYSTAL_SESSION'], "
          "'images': [{'mimeType': 'image/png', 'base64': " + repr(PNG) + "}] if a.get('img') else []}))")


def install(home):
    home_set(home, "demo", {"command": [PY, "-c", SCRIPT], "tools": [
        {"name": "ask_plan", "catalogs": ["plan", "work"]}, {"name": "ask_work"}]})


def session_for(workspace, replies, *, mode="work", approval="full", images=True):
    config = load_config(overrides={"approval": approval, "mode": mode})
    provider = ScriptedProvider(replies, capabilities=Capabilities(images=images))
    return Session(workspace=workspace, config=config, provider=provider, person_present=False)


async def events_of(session, prompt="go"):
    return [e async for e in run_turn(session, prompt)]


async def test_catalogs_by_mode(home, workspace):
    install(home)
    plan = session_for(workspace, [], mode="plan")
    work = session_for(workspace, [], mode="work")
    plan_names = [t.name for t in (await plan.prepare_tools())]
    work_names = [t.name for t in (await work.prepare_tools())]
    assert "ask_plan" in plan_names and "ask_work" not in plan_names
    assert work_names[-2:] == ["ask_plan", "ask_work"]
    assert "edit" not in plan_names and "bash" not in plan_names  # MODE-3: built-in Plan stays read-only


async def test_work_turn_runs_the_exec_tool(home, workspace):
    install(home)
    session = session_for(workspace, [tool_reply([("ask_work", {"q": "hello"})]), text_reply("ok")])
    events = await events_of(session)
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.ok and result.text == f"got hello as {session.id}"


async def test_plan_external_tool_still_needs_approval(home, workspace):
    install(home)
    session = session_for(workspace, [tool_reply([("ask_plan", {"q": "x"})]), text_reply("ok")],
                          mode="plan", approval="default")
    events = await events_of(session)
    approvals = [(e.name, e.outcome, e.by) for e in events if isinstance(e, ApprovalEvent)]
    # The host asks (write floor), and with nobody present the ask resolves to deny.
    assert approvals[0][:2] == ("ask_plan", "ask") and approvals[-1][:2] == ("ask_plan", "deny")
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and not (workspace / ".crystal" / "data").exists()  # the tool never ran


async def test_text_only_model_gets_the_exact_refusal(home, workspace):
    install(home)
    session = session_for(workspace, [tool_reply([("ask_work", {"q": "p", "img": True})]), text_reply("ok")],
                          images=False)
    events = await events_of(session)
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and result.text == "This model cannot accept tool images."


async def test_image_capable_model_receives_the_image_part(home, workspace):
    install(home)
    session = session_for(workspace, [tool_reply([("ask_work", {"q": "p", "img": True})]), text_reply("ok")])
    events = await events_of(session)
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.ok
    sent = [p for m in session.provider.requests[1].messages for p in m.parts if p.kind == "tool_result"]
    assert sent[0].images and sent[0].images[0].mime_type == "image/png"
    assert json.loads(json.dumps(sent[0].images[0].data)) == PNG
