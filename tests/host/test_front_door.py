"""The front door (docs/architecture.md "The front door"): every front opens its
session through host.bootstrap.open_session, so the boundary protections behind it hold
for all of them. These tests guard that no module outside crystal_kernel/host/ builds a
Session itself, and that the door's options do what they say."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import crystal_kernel
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.session import ProcessFlags
from crystal_kernel.testing.scripted import ScriptedProvider

PACKAGE = Path(crystal_kernel.__file__).resolve().parent
# The fronts that open sessions, each through the door.
FRONTS = ("jupyter/kernel.py", "jupyter/magics.py", "acp/agent.py", "cli/__init__.py", "cli/prompts.py",
          "cli/tools.py")


def _session_constructions(path: Path) -> list[int]:
    """Lines of ``path`` that call ``Session(...)`` or ``<module>.Session(...)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == "Session":
                lines.append(node.lineno)
    return lines


def test_no_module_outside_host_constructs_a_session():
    """One way in: a front that built its own Session would skip the door's protections."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "host":
            continue
        offenders += [f"{rel}:{line}" for line in _session_constructions(path)]
    assert offenders == []


def test_the_guard_sees_a_construction(tmp_path):
    """The guard is real: a module that calls Session(...) (plain or qualified) is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from crystal_kernel.host import session as s\nfrom crystal_kernel.host.session import Session\n"
                   "a = Session(workspace=1)\nb = s.Session(workspace=2)\n")
    assert _session_constructions(bad) == [3, 4]


@pytest.mark.parametrize("front", FRONTS)
def test_every_front_opens_through_the_door(front):
    source = (PACKAGE / front).read_text(encoding="utf-8")
    assert "open_session(SessionOptions(" in source


def test_options_are_frozen(workspace):
    options = SessionOptions(workspace)
    with pytest.raises(AttributeError):
        options.resume = "x"  # type: ignore[misc]


def test_each_session_gets_its_own_flags(workspace):
    """ACP opens many sessions from one set of process flags: a session changing its
    flags (the session normalises --disable-tool) must not change the next session's."""
    flags = ProcessFlags(disable_tool=["bash"])
    first = open_session(SessionOptions(workspace, flags=flags, provider=ScriptedProvider([])))
    first.flags.disable_tool.append("grep")
    assert flags.disable_tool == ["bash"]
    assert first.flags is not flags


def test_resume_and_fork(workspace):
    """resume continues a saved session; fork=True continues in a copy under a new id."""
    first = open_session(SessionOptions(workspace, provider=ScriptedProvider([])))
    from crystal_kernel.core.messages import Message, TextPart

    first.history.append(Message(role="user", parts=[TextPart(text="hello")]))
    first.transcript.append(first.history[-1])
    first.save()
    first.release_lock()
    resumed = open_session(SessionOptions(workspace, resume=first.id, provider=ScriptedProvider([])))
    assert resumed.id == first.id and len(resumed.transcript) == 1
    resumed.release_lock()
    forked = open_session(SessionOptions(workspace, resume=first.id, fork=True, provider=ScriptedProvider([])))
    assert forked.id != first.id and forked.forked_from == first.id and len(forked.transcript) == 1
    forked.release_lock()


def test_bad_input_is_one_line(workspace, tmp_path):
    with pytest.raises(UserError, match="is not a folder"):
        open_session(SessionOptions(tmp_path / "missing"))
    with pytest.raises(UserError, match="fork needs"):
        open_session(SessionOptions(workspace, fork=True, provider=ScriptedProvider([])))
    with pytest.raises(UserError):
        open_session(SessionOptions(workspace, resume="no-such-session", provider=ScriptedProvider([])))


def test_export_options_claim_nothing(workspace):
    """saves=False (prompts export, tools call): the id is only a name; no lock, no file."""
    session = open_session(SessionOptions(workspace, session_id="export", saves=False, provider=ScriptedProvider([])))
    assert session.id == "export"
    sessions = workspace / ".crystal" / "sessions"
    assert not sessions.exists() or list(sessions.iterdir()) == []
