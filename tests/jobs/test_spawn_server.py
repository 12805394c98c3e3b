"""ROBUST-3, SANDBOX-1: tool processes (exec tools, ripgrep) run under a
supervisor forked by one long-lived spawn server per host (jobs/spawn_server.py)
instead of a supervisor interpreter started for every call; no process outlives the
host however it dies, and a call made from a thread that then ends is not stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from crystal_kernel.jobs import spawner
from crystal_kernel.tools.child_process import run_process
from tests.jobs.conftest import alive, read_pids, wait_until

PY = sys.executable
ANCESTRY = ("import os\n"
            "sup = os.getppid()\n"
            "server = int(open(f'/proc/{sup}/stat').read().rpartition(')')[2].split()[1])\n"
            "same = open(f'/proc/{sup}/cmdline').read() == open(f'/proc/{server}/cmdline').read()\n"
            "print(sup, server, os.getpgid(0), int(same))\n")


async def test_a_tool_process_runs_under_a_forked_supervisor_not_a_new_interpreter(workspace: Path):
    outcome = await run_process([PY, "-S", "-c", ANCESTRY], cwd=workspace, env=dict(os.environ), payload=None,
                                timeout=30, max_bytes=10_000)
    assert outcome.returncode == 0, outcome.stderr
    supervisor, its_parent, group, same_command = (int(v) for v in outcome.stdout.split())
    server = spawner.server_pid()
    assert server is not None and its_parent == server, "the supervisor was not forked by the spawn server"
    # A fork: the same command line as the server, no interpreter started for the call.
    assert same_command
    assert group == supervisor, "the call's process group is its supervisor's, which the host signals to stop it"


async def test_the_exit_code_and_a_killing_signal_come_back(workspace: Path):
    code = await run_process([PY, "-S", "-c", "import sys; sys.exit(7)"], cwd=workspace, env=dict(os.environ),
                             payload=None, timeout=30, max_bytes=100)
    killed = await run_process([PY, "-S", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"],
                               cwd=workspace, env=dict(os.environ), payload=None, timeout=30, max_bytes=100)
    assert (code.returncode, killed.returncode) == (7, -signal.SIGUSR1)


def test_a_call_from_a_thread_that_ends_is_not_stopped(workspace: Path):
    # The parent-death signal follows the thread that started a child: the server must
    # not be tied to the (worker) thread of the first call.
    result: list[int | None] = []

    def call() -> None:
        proc = spawner.spawn([PY, "-S", "-c", "import time; time.sleep(1.0)"], cwd=str(workspace), env=None,
                             sandbox=None, grace=1.0, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        assert proc is not None
        result.append(proc.pid)
        threading.Thread(target=lambda: result.append(proc.wait(30)), daemon=True).start()

    first = threading.Thread(target=call)
    first.start()
    first.join()
    assert wait_until(lambda: len(result) == 2, 30)
    assert result[1] == 0, "the program was stopped when the thread that started it ended"


async def test_a_request_too_large_for_one_message_still_runs(workspace: Path):
    env = dict(os.environ, **{f"BIG_{i}": "x" * 100_000 for i in range(4)})  # 400 KB: beyond one message
    outcome = await run_process([PY, "-S", "-c", "import os; print(len(os.environ['BIG_3']))"], cwd=workspace,
                                env=env, payload=None, timeout=30, max_bytes=100)
    assert outcome.returncode == 0 and outcome.stdout.strip() == b"100000"


TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    GRANDCHILD = ("import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "open('pids', 'a').write(f'{os.getpid()} '); time.sleep(300)")
    subprocess.Popen([sys.executable, "-c", GRANDCHILD])
    open("pids", "a").write(f"{os.getpid()} {os.getppid()} ")
    time.sleep(300)
    """
)
HOST = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from crystal_kernel.jobs import spawner
    from crystal_kernel.tools.child_process import run_process

    workspace = Path(sys.argv[1])

    async def main():
        task = asyncio.ensure_future(run_process([sys.executable, "tree.py"], cwd=workspace, env=dict(os.environ),
                                                 payload=None, timeout=None, max_bytes=100))
        while not (workspace / "pids").exists() or len((workspace / "pids").read_text().split()) < 3:
            await asyncio.sleep(0.02)
        print(spawner.server_pid(), flush=True)
        await task

    asyncio.run(main())
    """
)


def test_a_sigkilled_host_leaves_no_tool_process_and_no_server(workspace: Path):
    (workspace / "tree.py").write_text(TREE)
    host = subprocess.Popen([PY, "-c", HOST, str(workspace)], stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        server = int(host.stdout.readline())
        pids = read_pids(workspace / "pids", 3)  # the tool, its supervisor, a grandchild ignoring SIGTERM
        assert all(alive(p) for p in [server, *pids])
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_until(lambda: not any(alive(p) for p in [server, *pids]), 5), \
            [p for p in [server, *pids] if alive(p)]
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


async def test_a_bash_call_runs_under_a_forked_supervisor_and_keeps_its_status(workspace: Path):
    from crystal_kernel.tools.bash import run_supervised

    done = await run_supervised("sup=$PPID; echo $sup $(cut -d' ' -f4 /proc/$sup/stat); exit 3", cwd=workspace,
                                env=dict(os.environ), timeout=30, limit=10_000, workspace=workspace)
    supervisor, its_parent = (int(v) for v in done.text.split())
    assert its_parent == spawner.server_pid(), "bash's supervisor was not forked by the spawn server"
    assert done.code == 3 and not done.timed_out and not done.leftovers


PRESTART = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.session import Session
    from crystal_kernel.jobs import spawner
    from crystal_kernel.testing.scripted import ScriptedProvider

    async def main():
        home, workspace = Path(sys.argv[1]), Path(sys.argv[2])
        session = Session(workspace=workspace, config=load_config(home), provider=ScriptedProvider([]),
                          person_present=False)
        await session.prepare_tools()
        deadline = time.monotonic() + 20
        while spawner.server_pid() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        print(spawner.server_pid() is not None, flush=True)
        # The sandbox's first-use work is done in the same thread: ABI asked, rules kept.
        from crystal_kernel.jobs import sandbox
        while not sandbox._kept and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        print(sandbox._abi is not None and len(sandbox._kept) == 1, flush=True)
        await session.close()

    asyncio.run(main())
    """
)


def test_a_session_with_bash_starts_the_server_before_its_first_call(workspace: Path, tmp_path: Path):
    # The first bash call of a `crystal run` turn would otherwise wait for the server's
    # interpreter to start, then ask the Landlock ABI and compute the sandbox's rules
    # (the per-tool-call gap, docs/benchmarks.md).
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([PY, "-c", PRESTART, str(home), str(workspace)], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]
    assert not (workspace / ".crystal").exists(), "warming the sandbox created the workspace's .crystal/"
