"""A session holds fewer than 25 attributes (SPEC §11, the session's split): its saved
state, one object for what lives only while this process has it open
(host/state.py LiveState), its config, flags, file, runtime, who is there, and what a
notebook front attached. Counted on a real session, as the instance's own attributes
(what __init__ sets, the dataclass fields included)."""

from __future__ import annotations

from pathlib import Path

from crystal_kernel.core.config import Config
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider

LIMIT = 25


def _session(tmp_path: Path) -> Session:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    return Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider())


def test_a_session_has_fewer_than_25_attributes(tmp_path: Path) -> None:
    attributes = sorted(vars(_session(tmp_path)))
    assert len(attributes) < LIMIT, f"{len(attributes)} attributes: {attributes}"


def test_the_process_side_still_reads_as_before(tmp_path: Path) -> None:
    """busy, allowances, review_baseline and the notes behave as the fields they were."""
    session = _session(tmp_path)
    assert session.busy is False and session.review_baseline == session.live.review_baseline
    session.busy = True
    assert session.live.busy is True
    session.note("once", once=True)
    session.note("once", once=True)
    session.note("twice")
    assert session.drain_notes() == ["once", "twice"] and session.drain_notes() == []
    assert session.home == tmp_path / "home"
    first = session.system_text()
    assert session.system_text() is first
    session.refresh_system()
    assert session.live.system is None
