"""bash: exit codes, output, workspace cwd, timeouts and cancellation killing the whole
tree, bounded output. Real child processes throughout."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from crystal_kernel.jobs import spawner
from tests.cpu_wait import runqueue_wait
from tests.sandbox_pids import host_pid
from tests.tools.conftest import call


def _pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_runs_in_workspace_with_exit_code(ctx, workspace: Path):
    result = await call("bash", ctx, command="pwd; echo err >&2; exit 0")
    assert result.ok and result.display == "terminal"
    assert str(workspace) in result.text
    assert "err" in result.text
    assert result.text.endswith("Exit code: 0")


async def test_nonzero_exit_is_failed_result(ctx):
    result = await call("bash", ctx, command="echo oops; exit 3")
    assert not result.ok
    assert "oops" in result.text and result.text.endswith("Exit code: 3")


async def test_no_output(ctx):
    result = await call("bash", ctx, command="true")
    assert result.ok and result.text == "(no output)\n\nExit code: 0"


async def test_stdin_is_closed(ctx):
    start = time.monotonic()
    result = await call("bash", ctx, command="cat; echo done", timeout_seconds=10)
    assert result.ok and "done" in result.text
    assert time.monotonic() - start < 5


@pytest.mark.usefixtures("landlock_path")
async def test_timeout_kills_whole_tree(ctx, workspace: Path):
    # A grandchild in its own session: only a tree kill reaches it.
    command = "setsid sleep 300 & echo $! > child.pid; sleep 300"
    start = time.monotonic()
    result = await call("bash", ctx, command=command, timeout_seconds=0.5)
    elapsed = time.monotonic() - start
    assert not result.ok
    assert "timed out after 0.5 seconds" in result.text
    assert elapsed < 3
    pid = int((workspace / "child.pid").read_text())
    deadline = time.monotonic() + 2
    while _pid_alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _pid_alive(pid)


async def test_configured_timeout_is_default(ctx):
    ctx.config.bash_timeout_seconds = 0.3
    result = await call("bash", ctx, command="sleep 30")
    assert not result.ok and "timed out after 0.3 seconds" in result.text


@pytest.mark.usefixtures("landlock_path")
async def test_term_ignoring_process_is_killed(ctx, workspace: Path):
    command = "trap '' TERM; echo $$ > shell.pid; while true; do sleep 0.05; done"
    start = time.monotonic()
    result = await call("bash", ctx, command=command, timeout_seconds=0.3)
    assert not result.ok and time.monotonic() - start < 3
    assert not _pid_alive(int((workspace / "shell.pid").read_text()))


@pytest.mark.usefixtures("landlock_path")
async def test_cancellation_kills_tree_within_two_seconds(ctx, workspace: Path):
    task = asyncio.ensure_future(call("bash", ctx, command="echo $$ > shell.pid; sleep 1000 & sleep 1000"))
    for _ in range(100):
        if (workspace / "shell.pid").exists() and (workspace / "shell.pid").read_text().strip():
            break
        await asyncio.sleep(0.05)
    shell = psutil.Process(int((workspace / "shell.pid").read_text()))
    tree = [shell.pid] + [c.pid for c in shell.children(recursive=True)]
    assert len(tree) >= 2
    start, waited = time.monotonic(), runqueue_wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    elapsed, waited = time.monotonic() - start, runqueue_wait() - waited
    # ROBUST-3's 2 s is the host's own time: the wall time less the time this process's
    # threads sat ready while other work held the 2 shared cores (seconds under load;
    # the wall time alone made this test fail under load and pass alone). The hard cap
    # catches a wait the scheduler cannot explain.
    assert elapsed - waited < 2, (elapsed, waited)
    assert elapsed < 10, elapsed
    assert not any(_pid_alive(pid) for pid in tree), "no process of the tree outlives the cancel"


@pytest.mark.usefixtures("landlock_path")
async def test_background_leftovers_are_stopped_and_reported(ctx, workspace: Path):
    start = time.monotonic()
    result = await call("bash", ctx, command="sleep 300 & echo $! > bg.pid; echo started")
    assert time.monotonic() - start < 4
    assert result.ok and "started" in result.text
    assert "left processes running in the background" in result.text
    assert not _pid_alive(int((workspace / "bg.pid").read_text()))


async def test_late_output_of_a_background_child_is_kept(ctx):
    # The 0.5 s grace after the shell exits: a child finishing its output in time is
    # waited for, and nothing is reported as left behind.
    result = await call("bash", ctx, command="(sleep 0.2; echo late) & echo early")
    assert result.ok and "early" in result.text and "late" in result.text
    assert "left processes running" not in result.text


@pytest.mark.usefixtures("landlock_path")
async def test_detached_background_process_is_stopped_and_reported(ctx, workspace: Path):
    # It holds no output, yet it is part of the command's tree: stopped, and said so.
    start = time.monotonic()
    result = await call("bash", ctx, command="sleep 300 >/dev/null 2>&1 & echo $! > bg.pid")
    assert time.monotonic() - start < 3
    assert result.ok and "left processes running in the background" in result.text
    assert not _pid_alive(int((workspace / "bg.pid").read_text()))


async def test_shell_killed_by_signal_reports_it(ctx):
    result = await call("bash", ctx, command="echo before; kill -KILL $$")
    assert not result.ok and "before" in result.text and result.text.endswith("Exit code: -9")


async def test_huge_output_is_bounded(ctx):
    ctx.config.tool_output_limit = 2000
    result = await call("bash", ctx, command="echo FIRST; seq 1 2000000; echo LAST")
    assert result.ok
    assert result.text.startswith("FIRST")
    assert "LAST" in result.text
    assert "output cut" in result.text
    assert len(result.text) < 2600


async def test_small_overflow_is_cut_with_note(ctx):
    ctx.config.tool_output_limit = 100
    result = await call("bash", ctx, command="printf 'a%.0s' $(seq 1 150)")
    assert "output cut" in result.text and "150 bytes" in result.text


async def test_empty_command_refused(ctx):
    result = await call("bash", ctx, command="   ")
    assert not result.ok and result.text == "The command is empty."


async def test_bad_timeout_refused(ctx):
    result = await call("bash", ctx, command="true", timeout_seconds=0)
    assert not result.ok and "timeout_seconds" in result.text


async def test_classification_pattern_is_the_command(ctx):
    from crystal_kernel.tools.catalog import load_builtin

    tool = load_builtin("bash")
    c = tool.classify(tool.parse({"command": "make test"}), ctx)
    assert str(c.risk) == "execute" and c.pattern == "make test"


async def test_no_process_left_behind(ctx):
    me = psutil.Process(os.getpid())

    def live() -> set[int]:
        # The spawn server and its servers of one sandbox are helpers that live as long as
        # the host, not leftovers.
        return {c.pid for c in me.children(recursive=True) if _pid_alive(c.pid)} - spawner.helper_pids()

    before = live()
    result = await call("bash", ctx, command="sleep 0.1; echo hi")
    assert result.ok and "hi" in result.text
    # The call returns once the supervisor has reported its tree stopped; the supervisor
    # itself then exits on its own, at once (its exit is not waited for; docs/benchmarks.md).
    deadline = time.monotonic() + 2
    while live() - before and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert live() <= before


HOST_SCRIPT = """
import asyncio, sys
from pathlib import Path
from crystal_kernel.core.config import Config
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolContext
from crystal_kernel.tools.catalog import load_builtin

workspace, home = Path(sys.argv[1]), Path(sys.argv[2])
session = Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider(), person_present=False)
ctx = session.tool_context(NoPerson(), call_id="call-1")
tool = load_builtin("bash")
command = "sleep 300 & echo $! > sleep.pid; setsid sleep 300 & echo $! > setsid.pid; sleep 300"
asyncio.run(tool.run(tool.parse({"command": command}), ctx))
"""


@pytest.mark.usefixtures("landlock_path")
def test_sigkilled_host_leaves_no_process_behind(workspace: Path, home: Path):
    """A host SIGKILLed during a bash call: the command's whole tree (the supervisor, the
    shell's own sleep, a background child and one in a session of its own) is gone within
    a few seconds."""
    host = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT, str(workspace), str(home)])
    pids: list[int] = []
    everything: set[int] = set()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = [workspace / "sleep.pid", workspace / "setsid.pid"]
            if all(f.exists() and f.read_text().strip() for f in files):
                pids = [int(f.read_text()) for f in files]
                break
            time.sleep(0.05)
        assert pids, "the bash call never started"
        tree = [c.pid for c in psutil.Process(host.pid).children(recursive=True)]
        everything = set(tree) | set(pids)
        assert set(pids) <= everything
        os.kill(host.pid, signal.SIGKILL)
        host.wait()
        deadline = time.monotonic() + 5
        while any(_pid_alive(p) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in everything if _pid_alive(p)], "processes outlived the host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for pid in everything | set(pids):  # never leave a test's sleeps behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def test_supervisor_killed_from_outside_still_stops_the_command(ctx, workspace: Path):
    # Nobody stops the shell when its supervisor is SIGKILLed by someone else: the host
    # notices the supervisor is gone and stops the shell's process group itself.
    command = "echo $PPID > sup.pid; echo $$ > shell.pid; sleep 300"
    task = asyncio.ensure_future(call("bash", ctx, command=command, timeout_seconds=60))
    for _ in range(200):
        if (workspace / "shell.pid").exists() and (workspace / "shell.pid").read_text().strip():
            break
        await asyncio.sleep(0.05)
    # SANDBOX-2: the ids as the host sees them (bubblewrap's PID namespace gives its own).
    shell = host_pid(int((workspace / "shell.pid").read_text()), workspace)
    supervisor = host_pid(int((workspace / "sup.pid").read_text()), workspace)
    assert shell is not None and supervisor is not None
    os.kill(supervisor, signal.SIGKILL)
    result = await asyncio.wait_for(task, 10)
    assert "Exit code" in result.text
    deadline = time.monotonic() + 3
    while _pid_alive(shell) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _pid_alive(shell)
