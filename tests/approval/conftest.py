"""Shared pieces for the approval tests: a real Session on a real workspace, the
scripted in-process provider playing agent and reviewer, a person who answers, and a
real exec tool set (an external tool, MODE-3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedPerson, ScriptedProvider, text_reply


def make_session(workspace: Path, approval: str, replies=(), *, person: bool = False, **config) -> Session:
    overrides = {"approval": approval}
    session = Session(workspace=workspace, config=load_config(overrides=overrides),
                      provider=ScriptedProvider(list(replies)), person_present=person)
    for key, value in config.items():
        setattr(session.config, key, value)
    return session


def verdict(risk: str, auth: str, harm: bool = False, rationale: str = "judged") -> list:
    """A reviewer reply: the JSON object the review prompt asks for."""
    return text_reply(json.dumps({"risk_level": risk, "user_authorization": auth,
                                  "harm_unrequested": harm, "rationale": rationale}))



Person = ScriptedPerson  # crystal_kernel/testing/scripted.py


async def collect(turn) -> list:
    return [e async for e in turn]


@pytest.fixture
def exec_tool(workspace: Path) -> str:
    """A real exec tool set in the workspace: ``shout`` upper-cases its text."""
    folder = workspace / ".crystal" / "tools" / "shouter"
    folder.mkdir(parents=True)
    (folder / "shout.py").write_text(
        "import json, sys\nprint(json.load(sys.stdin)['text'].upper())\n", encoding="utf-8")
    (folder / "tools.json").write_text(json.dumps({
        "command": [sys.executable, "shout.py"],
        "tools": [{"name": "shout", "description": "Upper-case a text.", "output": "text",
                   "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                                   "required": ["text"]}}],
    }), encoding="utf-8")
    # The person trusts the workspace set (TRUST-2); tests/security attack the untrusted case.
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.core.trust import trust_all

    trust_all(home_dir(), workspace)
    return "shout"
