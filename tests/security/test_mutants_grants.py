"""host/grants.py: a session document's added directories count only when the person
granted exactly that list, in this Home, for this session and workspace (TRUST-3;
``G..`` rows of docs/mutants.md). Real session documents, resumed for real."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crystal_kernel.core.paths import home_dir
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.grants import KEY_FILE, sign, verify
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply


async def _granted_session(workspace: Path, granted: Path, mode: str = "ro"):
    """A saved session (one prompt answered: a session file exists only then) whose
    person added ``granted``."""
    session = open_session(SessionOptions(workspace, provider=ScriptedProvider([text_reply("ok")]),
                                          person_present=False))
    session.access.add(granted, mode)  # what /access add does: the person's grant
    [e async for e in run_turn(session, "hello")]
    path = session.save()
    return session, path


def _rewrite(session, path: Path, doc: dict, session_id: str | None = None) -> None:
    """Write the edited document back as a journal this Home signs and records, so the
    journal's own signature (TRUST-5, TRUST-7: a hand-edited or old-format file is
    unverified, and its folders are dropped for that alone) does not hide what the
    grant's signature decides."""
    doc = {**doc, "id": session_id or session.id}
    SessionStore(session.workspace, home=session.home).save(doc)


def _resume(workspace: Path, session_id: str):
    return open_session(SessionOptions(workspace, provider=ScriptedProvider([]), resume=session_id))


async def test_a_document_whose_signature_was_removed_grants_nothing__G01(workspace, tmp_path):
    granted = tmp_path / "granted"
    granted.mkdir()
    session, path = await _granted_session(workspace, granted)
    doc = session.store.load(session.id)
    doc.pop("directoriesSignature", None)
    _rewrite(session, path, doc)
    resumed = _resume(workspace, session.id)
    assert resumed.access.directories == []
    assert any("were not granted" in n for n in resumed.drain_notes())


def test_an_unsigned_list_is_refused_with_or_without_a_home_key__G01(tmp_path):
    home = tmp_path / "fresh-home"
    home.mkdir()
    dirs = [{"path": "/", "mode": "rw"}]
    assert not verify(home, "s1", tmp_path, dirs, None)  # no key yet
    assert sign(home, "s1", tmp_path, [{"path": "/tmp", "mode": "ro"}])  # makes the key
    assert not verify(home, "s1", tmp_path, dirs, None)


async def test_a_signed_list_copied_into_another_session_grants_nothing__G03(workspace, tmp_path):
    granted = tmp_path / "granted"
    granted.mkdir()
    session, _ = await _granted_session(workspace, granted)
    doc = session.store.load(session.id)
    doc["id"] = "copied-1"
    _rewrite(session, Path(), doc, session_id="copied-1")
    copied = _resume(workspace, "copied-1")
    assert copied.access.directories == []
    original = _resume(workspace, session.id)
    assert [str(d.path) for d in original.access.directories] == [str(granted)]


async def test_a_signed_list_moved_to_another_workspace_grants_nothing__G04(workspace, tmp_path):
    granted = tmp_path / "granted"
    granted.mkdir()
    session, _ = await _granted_session(workspace, granted)
    doc = session.store.load(session.id)
    other = tmp_path / "other-ws"
    other.mkdir()
    doc["workspace"] = str(other)
    SessionStore(other, home=session.home).save(doc)  # signed for the other workspace
    moved = _resume(other, session.id)
    assert moved.access.directories == []
    assert not verify(home_dir(), session.id, other, doc["directories"], doc["directoriesSignature"])


async def test_a_read_only_grant_edited_to_read_write_grants_nothing__G05(workspace, tmp_path):
    granted = tmp_path / "granted"
    granted.mkdir()
    session, path = await _granted_session(workspace, granted, "ro")
    doc = session.store.load(session.id)
    assert doc["directories"] == [{"path": str(granted), "mode": "ro"}]
    doc["directories"][0]["mode"] = "rw"
    _rewrite(session, path, doc)
    resumed = _resume(workspace, session.id)
    assert resumed.access.directories == []


async def test_the_session_key_is_readable_by_its_owner_only__G06(workspace, tmp_path):
    granted = tmp_path / "granted"
    granted.mkdir()
    before = os.umask(0o022)  # a usual umask: the file's own mode must keep others out
    try:
        await _granted_session(workspace, granted)
    finally:
        os.umask(before)
    key = home_dir() / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
