"""The sidebar's API finds sessions and jobs in the Crystal folders under the server
root (``make lab`` serves build/demo while the tours work in build/demo/tour), says which
notebook each session belongs to, and labels each job with its session — bounded, and
never outside the root."""

from __future__ import annotations

import json
import os

from crystal_kernel.core.messages import Message, dump_transcript
from crystal_kernel.host.store import SessionStore
from crystal_kernel.jobs.manager import JobManager
from crystal_kernel.jupyter.notebook_map import remember
from crystal_kernel.jupyter.server.workspaces import MAX_DEPTH, find_workspaces


def write_session(root, session_id, topic, updated="2026-11-30T05:10:00+00:00"):
    root.mkdir(parents=True, exist_ok=True)  # a workspace exists before its sessions do
    history = dump_transcript([Message.user_text("hello")])
    SessionStore(root).save({"version": 1, "id": session_id, "created": "2026-11-30T05:00:00+00:00",
                             "updated": updated, "topic": topic, "mode": "work", "approval": "edit",
                             "turns": 1, "transcript": history, "history": history, "usage": {}})

TOUR = "20261130-050000-tour01"
TOP = "20261130-060000-top001"


def test_sessions_under_the_root_are_found_with_their_notebook(api, jp_root_dir):
    tour = jp_root_dir / "tour"
    write_session(tour, TOUR, topic="Fix the inventory")
    remember(tour, str(jp_root_dir / "kernel-tour.ipynb"), TOUR)
    write_session(jp_root_dir, TOP, topic="At the top", updated="2026-11-30T06:10:00+00:00")
    status, data = api("GET", "sessions")
    assert status == 200
    rows = {r["id"]: r for r in data["sessions"]}
    assert rows[TOUR]["workspace"] == "tour" and rows[TOUR]["notebook"] == "kernel-tour.ipynb"
    assert rows[TOP]["workspace"] == "" and rows[TOP]["notebook"] is None
    assert [r["id"] for r in data["sessions"]] == [TOP, TOUR], "newest first across folders"
    # The transcript and the status bar's status are found without naming the folder.
    status, transcript = api("GET", "sessions", TOUR)
    assert status == 200 and transcript["topic"] == "Fix the inventory"
    status, state = api("GET", "status", params={"session": TOUR})
    assert status == 200 and state["session"] == TOUR
    # An explicit workspace still narrows the list to that folder.
    status, only = api("GET", "sessions", params={"workspace": "tour"})
    assert [r["id"] for r in only["sessions"]] == [TOUR]


def test_search_is_bounded_hidden_and_symlinked_folders_skipped(jp_root_dir, tmp_path_factory):
    deep = jp_root_dir
    for i in range(MAX_DEPTH + 1):
        deep = deep / f"d{i}"
    (deep / ".crystal").mkdir(parents=True)
    (jp_root_dir / ".hidden" / "w" / ".crystal").mkdir(parents=True)
    (jp_root_dir / "node_modules" / "pkg" / ".crystal").mkdir(parents=True)
    outside = tmp_path_factory.mktemp("outside")
    (outside / ".crystal" / "sessions").mkdir(parents=True)
    os.symlink(outside, jp_root_dir / "linked")
    ok = jp_root_dir / "a" / "b" / ".crystal"
    ok.mkdir(parents=True)
    found = find_workspaces(jp_root_dir)
    assert found == [jp_root_dir, jp_root_dir / "a" / "b"]


def test_jobs_of_two_sessions_are_labelled_with_their_session(api, jp_root_dir):
    tour = jp_root_dir / "tour"
    write_session(tour, TOUR, topic="Fix the inventory")
    remember(tour, str(jp_root_dir / "kernel-tour.ipynb"), TOUR)
    write_session(jp_root_dir, TOP, topic="At the top")
    managers = [JobManager(tour, TOUR, grace_seconds=0.5), JobManager(jp_root_dir, TOP, grace_seconds=0.5)]
    try:
        for m, text in zip(managers, ("from-tour", "from-top")):
            job = m.start(f"echo {text}")
            m.join(job.id, timeout=10)
        status, data = api("GET", "jobs")
        assert status == 200
        rows = {(r["session"], r["id"]): r for r in data["jobs"]}
        assert set(rows) == {(TOUR, "j1"), (TOP, "j1")}, "the same id, told apart by session"
        assert rows[(TOUR, "j1")]["sessionTopic"] == "Fix the inventory"
        assert rows[(TOUR, "j1")]["notebook"] == "kernel-tour.ipynb" and rows[(TOUR, "j1")]["workspace"] == "tour"
        assert rows[(TOP, "j1")]["sessionTopic"] == "At the top"
        # Each log is read from its own folder without naming it.
        for session, text in ((TOUR, "from-tour"), (TOP, "from-top")):
            status, log = api("GET", "jobs", session, "j1", "log", params={"offset": 0})
            assert status == 200 and text in log["text"], log
    finally:
        for m in managers:
            m.close()


def test_a_bad_session_id_is_refused_before_any_lookup(api, jp_root_dir):
    status, data = api("GET", "sessions", "..%2F..%2Fetc")
    assert status in (400, 404)
    status, data = api("GET", "status", params={"session": "../x"})
    assert status == 400 and "not a valid session id" in data["error"]
    assert json.dumps(data)
