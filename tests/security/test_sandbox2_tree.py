"""ROBUST-3 inside the SANDBOX-2 sandbox, on both mechanisms: a call's supervisor runs
inside the sandbox's server (jobs/spawn_server.py), so a background child that finishes
its output after the shell exited is waited for, a signal death is reported as one, and
a call that times out leaves no process of its tree behind (looked for on the host, by a
mark only that tree has)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from tests.security.test_sandbox1_tool_processes import full_session, mechanism, place, turn

__all__ = ["mechanism", "place"]  # fixtures this module uses


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


async def test_a_commands_tree_is_whole_inside_the_sandbox(place, mechanism):
    mark = f"{uuid.uuid4().int % 1000 + 1000}.{uuid.uuid4().int % 1000}"
    session = full_session(place / "ws", [("bash", {"command": "(sleep 0.3; echo late) & echo early"}),
                                          ("bash", {"command": "echo before; kill -9 $$"}),
                                          ("bash", {"command": f"sleep {mark} & sleep {mark}", "timeout_seconds": 1})])
    try:
        results, _, _ = await turn(session)
    finally:
        await session.close()
    assert "early" in results[0].text and "late" in results[0].text, results[0].text
    assert results[1].text.rstrip().endswith("Exit code: -9"), results[1].text
    assert "timed out after 1 seconds" in results[2].text, results[2].text
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).endswith(f"sleep {mark}")]
    assert left == [], left


async def test_a_sessions_private_temp_is_kept_between_its_calls_and_removed_with_it(place, private_home,
                                                                                      monkeypatch):
    """SANDBOX-2 (bubblewrap): `/tmp` is `<Crystal Home>/sandbox-tmp/<session id>` on the
    host, kept between the session's calls, gone once the session is closed."""
    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "bubblewrap")
    session = full_session(place / "ws", [("bash", {"command": "echo kept > /tmp/note.txt"}),
                                          ("bash", {"command": "cat /tmp/note.txt"})])
    try:
        results, _, _ = await turn(session)
        folder = private_home / "sandbox-tmp" / session.id
        assert (folder / "note.txt").read_text() == "kept\n" and "kept" in results[1].text, results[1].text
    finally:
        await session.close()
    assert not folder.exists()


async def test_a_session_starts_its_bubblewrap_server_before_the_first_call(place, monkeypatch):
    """SANDBOX-2: a session whose catalog holds bash starts the server of bash's
    bubblewrap sandbox with the spawn server (host/runtime.py), even in a workspace with
    no .crystal/ yet (made, as the first call would), so the first call does not wait for
    a bwrap and an interpreter to start; that call is served by it."""
    from crystal_kernel.jobs import spawner
    from crystal_kernel.jobs.sandbox import sandbox_for
    from tests.jobs.conftest import wait_until

    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "bubblewrap")
    shutil.rmtree(place / "ws" / ".crystal")
    session = full_session(place / "ws", [("bash", {"command": "echo served"})])
    try:
        await session.prepare_tools()
        rules = sandbox_for(session.config, place / "ws", session=session.id)  # what bash's call uses
        assert rules is not None and wait_until(lambda: spawner.server_of(rules) is not None, 20)
        started = spawner.server_of(rules)
        results, _, _ = await turn(session)
        assert results[0].ok and "served" in results[0].text, results[0].text
        assert spawner.server_of(rules) == started  # no other server was started for the call
    finally:
        await session.close()


def test_private_temps_of_sessions_that_never_closed_are_removed_in_bounds(tmp_path):
    """A session whose process crashed leaves its private temp: the next new session
    removes those untouched for a week (and only those; at most 64 looked at)."""
    import os
    import time

    from crystal_kernel.jobs import bwrap

    home = tmp_path / "crystal-home"
    old = Path(bwrap.private_temp(home, "crashed-session"))
    (old / "left.txt").write_text("x")
    recent = Path(bwrap.private_temp(home, "open-session"))
    week_ago = time.time() - bwrap.STALE_SECONDS - 60
    os.utime(old, (week_ago, week_ago))
    bwrap.private_temp(home, "open-session")  # an existing one: nothing is looked at
    assert old.exists()
    fresh = Path(bwrap.private_temp(home, "new-session"))
    assert not old.exists() and recent.exists() and fresh.exists()
