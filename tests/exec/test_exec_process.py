"""EX-1 … EX-9, EX-15: how the child process is started, fed and stopped.
Every test runs real child processes from small scripts it writes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from exec_support import PY, call, home_set, load, make_ctx

from tests.sandbox_pids import host_pid

# Reports what it got: argv, stdin, cwd and the CRYSTAL_* environment.
REPORT = r'''
import json, os, sys
data = sys.stdin.read()
env = {k: v for k, v in os.environ.items() if k.startswith("CRYSTAL_")}
print(json.dumps({"text": json.dumps({"argv": sys.argv[1:], "stdin": data, "cwd": os.getcwd(),
                                      "env": env, "bom": data.startswith("\ufeff")})}))
'''


def report_set(home: Path, tool: dict, command: list[str] | None = None) -> None:
    home_set(home, "rep", {"command": command or [PY, "report.py"], "tools": [tool]}, {"report.py": REPORT})


async def run_report(home, workspace, ctx, tool: dict, arguments: dict, command=None) -> dict:
    report_set(home, tool, command)
    tools, notes = load(home, workspace)
    assert notes == []
    result = await call(tools[tool["name"]], arguments, ctx)
    assert result.ok, result.text
    return json.loads(result.text)


async def test_ex1_argument_list_no_shell_cwd_workspace(home, workspace, ctx):
    got = await run_report(home, workspace, ctx, {"name": "rep", "argv": {"q": "--q"}},
                           {"q": "$(touch pwned); `id` | cat > x"})
    # The value arrives as one argv element, untouched by any shell.
    assert got["argv"] == ["--q", "$(touch pwned); `id` | cat > x"]
    assert got["cwd"] == str(workspace.resolve())
    assert not (workspace / "pwned").exists() and not (workspace / "x").exists()


async def test_ex2_environment_five_variables_no_home(home, workspace, ctx, monkeypatch):
    monkeypatch.setenv("CRYSTAL_SOMETHING_ELSE", "inherited")
    got = await run_report(home, workspace, ctx, {"name": "rep"}, {})
    env = got["env"]
    assert "CRYSTAL_HOME" not in env  # set in the host by the fixture, removed for the child
    assert os.environ["CRYSTAL_HOME"] == str(home)
    assert env["CRYSTAL_WORKSPACE"] == str(workspace.resolve())
    assert env["CRYSTAL_SESSION"] == "sess-test-1"
    assert env["CRYSTAL_APPROVAL"] == "default"
    assert env["CRYSTAL_TOOL_DATA"] == str(home / "data" / "tools" / "rep")
    assert env["CRYSTAL_PROJECT_DATA"] == str(workspace.resolve() / ".crystal" / "data" / "tools" / "rep")
    assert env["CRYSTAL_SOMETHING_ELSE"] == "inherited"


async def test_ex2_approval_follows_the_session(home, workspace, session):
    session.approval = "audit"
    got = await run_report(home, workspace, make_ctx(session), {"name": "rep"}, {})
    assert got["env"]["CRYSTAL_APPROVAL"] == "audit"


async def test_ex3_data_folders_created_lazily(home, workspace, ctx):
    report_set(home, {"name": "rep"})
    tools, _ = load(home, workspace)
    tool_data = home / "data" / "tools" / "rep"
    project_data = workspace / ".crystal" / "data" / "tools" / "rep"
    assert not tool_data.exists() and not project_data.exists()  # discovery creates nothing
    result = await call(tools["rep"], {}, ctx)
    assert result.ok
    assert tool_data.is_dir() and project_data.is_dir()


async def test_ex3_data_folder_that_cannot_be_created_is_not_reported(home, workspace, ctx):
    (home / "data").write_text("a file where the folder should be")
    got = await run_report(home, workspace, ctx, {"name": "rep"}, {})
    assert got["env"]["CRYSTAL_TOOL_DATA"] == str(home / "data" / "tools" / "rep")


async def test_ex4_bare_name_resolves_in_set_folder_first(home, workspace, ctx):
    script = f"#!{PY}\nimport json; print(json.dumps({{'text': 'from the set folder'}}))\n"
    folder = home_set(home, "bare", {"command": ["mytool"], "tools": [{"name": "bare"}]}, {"mytool": script})
    (folder / "mytool").chmod(0o755)
    tools, _ = load(home, workspace)
    result = await call(tools["bare"], {}, ctx)
    assert result.ok and result.text == "from the set folder"


async def test_ex4_bare_name_falls_back_to_path(home, workspace, ctx):
    home_set(home, "onpath", {"command": ["echo"], "tools": [{"name": "onpath", "output": "text"}]})
    tools, _ = load(home, workspace)
    result = await call(tools["onpath"], {}, ctx)
    assert result.ok and result.text == "\n"


async def test_ex4_relative_path_inside_set_folder(home, workspace, ctx):
    script = f"#!{PY}\nprint('{{\"text\": \"nested\"}}')\n"
    folder = home_set(home, "rel", {"command": ["./bin/tool"], "tools": [{"name": "rel"}]})
    (folder / "bin").mkdir()
    (folder / "bin" / "tool").write_text(script)
    (folder / "bin" / "tool").chmod(0o755)
    tools, _ = load(home, workspace)
    result = await call(tools["rel"], {}, ctx)
    assert result.ok and result.text == "nested"


async def test_ex4_relative_path_leaving_the_set_is_refused(home, workspace):
    home_set(home, "esc", {"command": ["../other/tool"], "tools": [{"name": "esc"}]})
    tools, notes = load(home, workspace)
    assert "esc" not in tools
    assert len(notes) == 1 and "tools.json" in notes[0] and "leaves the set folder" in notes[0]


async def test_ex4_symlink_leaving_the_set_is_refused_at_run(home, workspace, ctx, tmp_path):
    outside = tmp_path / "outside.sh"
    outside.write_text("#!/bin/sh\necho '{}'\n")
    outside.chmod(0o755)
    folder = home_set(home, "link", {"command": ["./bin/tool"], "tools": [{"name": "link"}]})
    (folder / "bin").mkdir()
    (folder / "bin" / "tool").symlink_to(outside)
    tools, _ = load(home, workspace)
    result = await call(tools["link"], {}, ctx)
    assert not result.ok and "leaves its set folder" in result.text


async def test_ex4_absolute_path_used_as_given(home, workspace, ctx):
    home_set(home, "abs", {"command": ["/bin/echo", "absolute"], "tools": [{"name": "abs", "output": "text"}]})
    tools, _ = load(home, workspace)
    result = await call(tools["abs"], {}, ctx)
    assert result.ok and result.text == "absolute\n"


async def test_ex4_missing_executable_is_a_clear_error(home, workspace, ctx):
    home_set(home, "gone", {"command": ["no-such-program-xyz"], "tools": [{"name": "gone"}]})
    tools, _ = load(home, workspace)
    result = await call(tools["gone"], {}, ctx)
    assert not result.ok and "no-such-program-xyz" in result.text and "not found" in result.text


async def test_ex5_argv_is_set_command_then_tool_command_then_flags(home, workspace, ctx):
    got = await run_report(home, workspace, ctx,
                           {"name": "rep", "command": ["thumb", "--fast"], "argv": {"size": "--size"}},
                           {"size": 64}, command=[PY, "report.py", "--global"])
    assert got["argv"] == ["--global", "thumb", "--fast", "--size", "64"]


async def test_ex5_shorthand_tool_adds_no_suffix(home, workspace, ctx):
    got = await run_report(home, workspace, ctx, {"name": "rep"}, {"anything": 1})
    assert got["argv"] == []


async def test_ex6_stdin_gets_utf8_json_without_bom(home, workspace, ctx):
    args = {"path": "ünïcødé.png", "n": 3, "tags": ["a", "b"]}
    got = await run_report(home, workspace, ctx, {"name": "rep"}, args)
    assert got["bom"] is False
    assert json.loads(got["stdin"]) == args


async def test_ex6_same_body_for_one_or_many_tools(home, workspace, ctx):
    home_set(home, "multi", {"command": [PY, "report.py"], "tools": [
        {"name": "first", "command": ["first"]}, {"name": "second", "command": ["second"]}]},
        {"report.py": REPORT})
    tools, _ = load(home, workspace)
    a = json.loads((await call(tools["first"], {"x": "y"}, ctx)).text)
    b = json.loads((await call(tools["second"], {"x": "y"}, ctx)).text)
    assert a["stdin"] == b["stdin"] and json.loads(a["stdin"]) == {"x": "y"}
    assert a["argv"] == ["first"] and b["argv"] == ["second"]


async def test_ex7_flags_follow_argv_map_order_not_argument_order(home, workspace, ctx):
    tool = {"name": "rep", "argv": {"alpha": "--alpha", "beta": "-b", "gamma": "--gamma"}}
    got = await run_report(home, workspace, ctx, tool, {"gamma": True, "beta": 2.5, "alpha": "x", "unmapped": 1})
    assert got["argv"] == ["--alpha", "x", "-b", "2.5", "--gamma", "true"]


async def test_ex7_string_array_repeats_its_flag(home, workspace, ctx):
    got = await run_report(home, workspace, ctx, {"name": "rep", "argv": {"tag": "--tag"}},
                           {"tag": ["one", "two words", "three"]})
    assert got["argv"] == ["--tag", "one", "--tag", "two words", "--tag", "three"]


@pytest.mark.parametrize("value,kind", [({"a": 1}, "an object"), (None, "null"),
                                         (["a", 1], "an array that is not all strings")])
async def test_ex7_object_null_and_mixed_array_refused(home, workspace, ctx, value, kind):
    marker = workspace / "ran"
    script = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x'); print('{{}}')"
    home_set(home, "bad", {"command": [PY, "-c", script], "tools": [{"name": "bad", "argv": {"v": "--v"}}]})
    tools, _ = load(home, workspace)
    result = await call(tools["bad"], {"v": value}, ctx)
    assert not result.ok
    assert result.text == (f"Argument 'v' of bad is {kind}; it is passed as the command-line flag --v, "
                           "which takes only a string, a number, a boolean or an array of strings.")
    assert not marker.exists()  # the child never started


async def test_ex8_argv_map_and_stdin_together(home, workspace, ctx):
    args = {"path": "a.png", "size": 32, "extra": {"nested": True}}
    got = await run_report(home, workspace, ctx,
                           {"name": "rep", "command": ["sub"], "argv": {"path": "--path", "size": "--size"}}, args,
                           command=[PY, "report.py", "pre"])
    assert got["argv"] == ["pre", "sub", "--path", "a.png", "--size", "32"]
    assert json.loads(got["stdin"]) == args


async def test_ex9_stdin_off_is_closed_so_a_reader_gets_eof(home, workspace, ctx):
    got = await run_report(home, workspace, ctx, {"name": "rep", "stdin": False, "timeoutSeconds": 10}, {"x": 1})
    assert got["stdin"] == ""


async def test_ex9_tool_that_never_reads_stdin_does_not_hang(home, workspace, ctx):
    script = "import json; print(json.dumps({'text': 'ignored my input'}))"
    home_set(home, "deaf", {"command": [PY, "-c", script], "tools": [{"name": "deaf", "timeoutSeconds": 20}]})
    tools, _ = load(home, workspace)
    started = time.monotonic()
    # A large argument object (far more than a pipe buffer) the child never reads.
    result = await call(tools["deaf"], {"blob": "x" * 2_000_000}, ctx)
    assert time.monotonic() - started < 10
    assert result.ok and result.text == "ignored my input"


async def _stops_reading_at_once(home: Path, workspace: Path, ctx: Any, prelude: str = "") -> None:
    """EX-15: a tool that closes its stdin before reading its 2 MB of arguments fails at
    once (the host's write breaks), not at its 30 s timeout."""
    script = prelude + "import os, time\nos.close(0); time.sleep(60)"
    home_set(home, "closer", {"command": [PY, "-c", script], "tools": [{"name": "closer", "timeoutSeconds": 30}]})
    tools, _ = load(home, workspace)
    started = time.monotonic()
    result = await call(tools["closer"], {"blob": "x" * 2_000_000}, ctx)
    assert time.monotonic() - started < 15
    assert not result.ok and "stopped reading its input" in result.text, result.text


async def test_ex15_stdin_failure_kills_the_tree(home, workspace, ctx):
    pidfile = workspace / "pid"
    await _stops_reading_at_once(home, workspace, ctx,
                                 f"import os\nwith open({str(pidfile)!r}, 'w') as f: f.write(str(os.getpid()))\n")
    # SIGKILL'ed, the program still takes the kernel a moment to tear down (seen 'running'
    # under init right after the call): wait for it as the timeout and cancel tests do.
    pid = host_pid(int(pidfile.read_text()), workspace, wait=0)  # SANDBOX-2: the host's id (None: gone)
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _gone(pid)


async def test_ex15_stdin_failure_without_the_spawn_server_under_bubblewrap(home, workspace, ctx, monkeypatch):
    """EX-15 and SANDBOX-2 on the path that starts a supervisor of its own (no spawn
    server): it runs the program through bwrap, whose own processes keep descriptors 0-2
    for the sandbox's life. A program that stops reading still breaks the host's pipe
    (stdin goes in as descriptor 3), so the call ends at once, not at its timeout."""
    from crystal_kernel.jobs import spawner

    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "bubblewrap")
    monkeypatch.setattr(spawner, "send", lambda *args, **kwargs: None)  # as where the server cannot be used
    await _stops_reading_at_once(home, workspace, ctx)


def _gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


GRANDPARENT = r'''
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time, os; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(os.environ['PIDFILE'], 'w').write(str(os.getpid())); time.sleep(120)"])
while not os.path.exists(os.environ["PIDFILE"]) or not open(os.environ["PIDFILE"]).read():
    time.sleep(0.02)
print("started", flush=True)
time.sleep(120)
'''


async def test_ex15_timeout_kills_grandchild_that_ignores_sigterm(home, workspace, ctx, monkeypatch):
    pidfile = workspace / "grandchild.pid"
    monkeypatch.setenv("PIDFILE", str(pidfile))
    home_set(home, "spawner", {"command": [PY, "tree.py"], "tools": [{"name": "spawner", "timeoutSeconds": 2}]},
             {"tree.py": GRANDPARENT})
    tools, _ = load(home, workspace)
    started = time.monotonic()
    task = asyncio.ensure_future(call(tools["spawner"], {}, ctx))
    while not (pidfile.exists() and pidfile.read_text()) and not task.done():
        await asyncio.sleep(0.02)
    pid = host_pid(int(pidfile.read_text()), workspace)  # SANDBOX-2: the host's id, found while it runs
    assert pid is not None
    result = await task
    elapsed = time.monotonic() - started
    assert not result.ok and result.text == "spawner timed out after 2 seconds and was stopped."
    assert 1.9 <= elapsed < 8
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _gone(pid)


async def test_ex15_cancellation_kills_the_tree(home, workspace, ctx, monkeypatch):
    pidfile = workspace / "grandchild.pid"
    monkeypatch.setenv("PIDFILE", str(pidfile))
    home_set(home, "spawner", {"command": [PY, "tree.py"], "tools": [{"name": "spawner", "timeoutSeconds": "unlimited"}]},
             {"tree.py": GRANDPARENT})
    tools, _ = load(home, workspace)
    task = asyncio.ensure_future(call(tools["spawner"], {}, ctx))
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    pid = host_pid(int(pidfile.read_text()), workspace)  # SANDBOX-2: the host's id, found while it runs
    assert pid is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _gone(pid)


async def test_ex15_unlimited_timeout_lets_a_slow_tool_finish(home, workspace, ctx):
    script = "import time, json; time.sleep(1.5); print(json.dumps({'text': 'slow but done'}))"
    home_set(home, "slow", {"command": [PY, "-c", script], "tools": [
        {"name": "slow", "timeoutSeconds": "unlimited"}, {"name": "slow_short", "timeoutSeconds": 0.5}]})
    tools, _ = load(home, workspace)
    assert (await call(tools["slow"], {}, ctx)).text == "slow but done"
    short = await call(tools["slow_short"], {}, ctx)
    assert not short.ok and "timed out after 0.5 seconds" in short.text


async def test_ex15_grandchild_holding_output_is_stopped_when_the_tool_exits(home, workspace, ctx):
    # The child exits at once but leaves a grandchild holding stdout open. The tool runs
    # under the job supervisor (ROBUST-3), which stops whatever the tool left running when
    # it exits: the call neither waits for the grandchild nor leaves it behind.
    script = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
              "open('grandchild.pid', 'w').write(str(p.pid)); print('{}', flush=True)")
    home_set(home, "leak", {"command": [PY, "-c", script], "tools": [{"name": "leak", "timeoutSeconds": 5}]})
    tools, _ = load(home, workspace)
    started = time.monotonic()
    result = await call(tools["leak"], {}, ctx)
    assert result.ok
    assert time.monotonic() - started < 4
    grandchild = host_pid(int((workspace / "grandchild.pid").read_text()), workspace, wait=0)  # None: gone
    deadline = time.monotonic() + 3
    while grandchild is not None and psutil.pid_exists(grandchild) and \
            psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the grandchild outlived the tool"
        await asyncio.sleep(0.05)


async def test_ex15_timeout_covers_reading_output_of_a_tool_still_running(home, workspace, ctx):
    # The tool closes nothing and keeps running after printing: reading is inside the timeout.
    script = "import time; print('{}', flush=True); time.sleep(60)"
    home_set(home, "linger", {"command": [PY, "-c", script], "tools": [{"name": "linger", "timeoutSeconds": 1}]})
    tools, _ = load(home, workspace)
    started = time.monotonic()
    result = await call(tools["linger"], {}, ctx)
    assert not result.ok and "timed out" in result.text
    assert time.monotonic() - started < 6


async def test_ex15_child_that_closes_its_streams_early_is_still_awaited(home, workspace, ctx):
    # Output first, streams closed, exit later: the host waits for the exit status.
    script = ("import os, sys, time, json; sys.stdout.write(json.dumps({'text': 'early'})); sys.stdout.flush(); "
              "os.close(1); os.close(2); time.sleep(0.5); sys.exit(%d)")
    home_set(home, "early", {"command": [PY, "-c", script % 0], "tools": [{"name": "early_ok"}]})
    home_set(home, "early2", {"command": [PY, "-c", script % 4], "tools": [{"name": "early_bad"}]})
    tools, _ = load(home, workspace)
    ok = await call(tools["early_ok"], {}, ctx)
    assert ok.ok and ok.text == "early"
    bad = await call(tools["early_bad"], {}, ctx)
    assert not bad.ok and bad.text.startswith("early_bad exited with code 4.")


async def test_tools_need_only_the_documented_session_attributes(home, workspace, stand_in_session):
    """A minimal session (id, workspace, home, config, access, approval) is enough."""
    got = await run_report(home, workspace, make_ctx(stand_in_session), {"name": "rep"}, {"a": 1})
    assert got["env"]["CRYSTAL_SESSION"] == "sess-test-1" and json.loads(got["stdin"]) == {"a": 1}
