"""GET jobs, GET jobs/<session>/<job>/log, POST jobs/<session>/<job>/stop over the files a
real JobManager mirrors (BG-1): state, runtime, a log read by offset, a stop that ends
the job's process tree."""

from __future__ import annotations

import json
import time

import pytest

from crystal_kernel.jobs.manager import JobManager

SESSION = "20261130-080000-aaaaaa"


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def manager(jp_root_dir):
    jobs = JobManager(jp_root_dir, SESSION, grace_seconds=0.5)
    yield jobs
    jobs.close()


def test_jobs_list_state_and_runtime(api, manager):
    done = manager.start("echo first")
    manager.join(done.id, timeout=10)
    running = manager.start("echo started; sleep 30")
    status, data = api("GET", "jobs")
    assert status == 200
    rows = {r["id"]: r for r in data["jobs"]}
    assert rows[done.id]["state"] == "exited" and rows[done.id]["exitCode"] == 0
    assert rows[done.id]["stoppable"] is False
    assert rows[running.id]["state"] == "running" and rows[running.id]["stoppable"] is True
    assert rows[running.id]["session"] == SESSION and rows[running.id]["command"] == "echo started; sleep 30"
    assert isinstance(rows[running.id]["runtime"], float)


def test_log_by_offset_follows_new_output(api, manager):
    job = manager.start("for i in 1 2 3; do echo line$i; done; sleep 0.3; echo tail-line; sleep 30")
    wait_for(lambda: "tail-line" in api("GET", "jobs", SESSION, job.id, "log", params={"offset": 0})[1]["text"])
    status, first = api("GET", "jobs", SESSION, job.id, "log", params={"offset": 0, "limit": 6})
    assert status == 200 and first["text"] == "line1\n" and first["offset"] == 0 and first["next"] == 6
    status, rest = api("GET", "jobs", SESSION, job.id, "log", params={"offset": first["next"]})
    assert rest["text"] == "line2\nline3\ntail-line\n" and rest["state"] == "running"
    status, empty = api("GET", "jobs", SESSION, job.id, "log", params={"offset": rest["next"]})
    assert empty["text"] == "" and empty["next"] == rest["next"]
    # Without an offset: the tail.
    status, tail = api("GET", "jobs", SESSION, job.id, "log", params={"limit": 10})
    assert tail["text"] == "tail-line\n"


def test_log_across_a_rotated_file_reports_what_was_dropped(api, jp_root_dir):
    jobs = JobManager(jp_root_dir, SESSION, log_bytes=1000)
    try:
        job = jobs.start("python3 -c \"import sys; [sys.stdout.write('%04d\\n' % i) for i in range(1000)]\"")
        jobs.join(job.id, timeout=10)
    finally:
        jobs.close()
    status, data = api("GET", "jobs", SESSION, job.id, "log", params={"offset": 0, "limit": 200_000})
    assert status == 200
    assert data["dropped"] > 0 and data["offset"] == data["dropped"]
    assert data["text"].endswith("0999\n") and data["next"] == 5000
    assert data["offset"] % 5 == 0 and data["text"].startswith(f"{data['offset'] // 5:04d}")


def test_stop_ends_the_job_and_its_tree(api, manager):
    job = manager.start("sleep 60 & sleep 60; wait")
    assert api("GET", "jobs")[1]["jobs"][0]["stoppable"] is True
    status, data = api("POST", "jobs", SESSION, job.id, "stop")
    assert status == 200 and "Stopping" in data["message"]
    info = manager.join(job.id, timeout=10)
    assert info.state != "running"
    row = wait_for(lambda: next((r for r in api("GET", "jobs")[1]["jobs"] if r["id"] == job.id and r["state"] != "running"), None))
    assert row["stoppable"] is False
    status, data = api("POST", "jobs", SESSION, job.id, "stop")
    assert status == 400 and "not running" in data["error"]


def test_stop_refuses_a_pid_that_is_not_a_job_supervisor(api, jp_root_dir):
    import os

    folder = jp_root_dir / ".crystal" / "data" / "jobs" / SESSION
    folder.mkdir(parents=True)
    # A status file claiming this test process (not a supervisor) is the job: never signalled.
    (folder / "j1.json").write_text(json.dumps({"id": "j1", "state": "running", "pid": os.getpid(),
                                                 "hostPid": os.getpid(), "command": "x"}))
    status, data = api("POST", "jobs", SESSION, "j1", "stop")
    assert status == 400 and "no longer running" in data["error"]


def test_a_job_whose_host_died_is_lost(api, jp_root_dir):
    folder = jp_root_dir / ".crystal" / "data" / "jobs" / SESSION
    folder.mkdir(parents=True)
    (folder / "j4.json").write_text(json.dumps({"id": "j4", "state": "running", "pid": 999999,
                                                 "hostPid": 999999, "command": "x"}))
    row = api("GET", "jobs")[1]["jobs"][0]
    assert row["state"] == "lost" and row["stoppable"] is False


def test_unknown_job_is_404(api, manager):
    assert api("GET", "jobs", SESSION, "j99", "log")[0] == 404
    assert api("POST", "jobs", SESSION, "j99", "stop")[0] == 404


@pytest.mark.parametrize("session,job", [("..", "j1"), (SESSION, ".."), (".crystal", "j1"), ("a b", "j1")])
def test_bad_ids_are_400(api, session, job):
    status, data = api("GET", "jobs", session, job, "log")
    assert status == 400 and "not a valid" in data["error"]


@pytest.mark.parametrize("params,message", [({"offset": "abc"}, "whole number"), ({"offset": -1}, "at least 0"),
                                            ({"limit": 0}, "at least 1"), ({"limit": 10**9}, "at most")])
def test_bad_offsets_are_400(api, manager, params, message):
    job = manager.start("echo x")
    status, data = api("GET", "jobs", SESSION, job.id, "log", params=params)
    assert status == 400 and message in data["error"]


def test_symlinked_job_folder_outside_root_is_refused(api, jp_root_dir, tmp_path):
    import os

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "j1.log").write_text("SECRET")
    (outside / "j1.json").write_text(json.dumps({"id": "j1", "state": "exited"}))
    root = jp_root_dir / ".crystal" / "data" / "jobs"
    root.mkdir(parents=True)
    os.symlink(outside, root / "linked")
    status, data = api("GET", "jobs", "linked", "j1", "log")
    assert status == 400 and "SECRET" not in json.dumps(data)
    assert all(r["session"] != "linked" for r in api("GET", "jobs")[1]["jobs"])
