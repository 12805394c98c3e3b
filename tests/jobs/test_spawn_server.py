"""ROBUST-3, SANDBOX-1: tool processes (exec tools, ripgrep) run under a
supervisor forked by one long-lived spawn server per host (jobs/spawn_server.py)
instead of a supervisor interpreter started for every call; no process outlives the
host however it dies, and a call made from a thread that then ends is not stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from crystal_kernel.jobs import landlock, spawner
from crystal_kernel.jobs.sandbox import Sandbox, read_only_sandbox
from crystal_kernel.tools.child_process import run_process
from tests.jobs.conftest import alive, read_pids, wait_until


@pytest.fixture(autouse=True)
def landlock_path(monkeypatch):
    """These tests are of the Landlock path (its servers of one sandbox, its rules): the
    bubblewrap path has no such server (SANDBOX-2; tests/security/test_sandbox2_*.py)."""
    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "landlock")


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
    sandbox = None
    if len(sys.argv) > 2:  # under a server of its sandbox, a fork of the spawn server
        from crystal_kernel.core.config import Config
        from crystal_kernel.jobs.sandbox import sandbox_for
        sandbox = sandbox_for(Config(home=Path(sys.argv[2])), workspace)

    async def main():
        task = asyncio.ensure_future(run_process([sys.executable, "tree.py"], cwd=workspace, env=dict(os.environ),
                                                 payload=None, timeout=None, max_bytes=100, sandbox=sandbox))
        while not (workspace / "pids").exists() or len((workspace / "pids").read_text().split()) < 3:
            await asyncio.sleep(0.02)
        print(spawner.server_pid(), *(spawner.helper_pids() - {spawner.server_pid()}), flush=True)
        await task

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_sigkilled_host_leaves_no_tool_process_and_no_server(workspace: Path, private_home: Path, sandboxed):
    if sandboxed and landlock.abi_version() < 1:
        pytest.skip("needs Landlock")
    (workspace / "tree.py").write_text(TREE)
    host = subprocess.Popen([PY, "-c", HOST, str(workspace), *([str(private_home)] if sandboxed else [])],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert host.stdout is not None
        # The spawn server (and its sandbox's server, with the spare supervisor it keeps).
        servers = [int(p) for p in host.stdout.readline().split()]
        assert len(servers) == (3 if sandboxed else 1)
        pids = read_pids(workspace / "pids", 3)  # the tool, its supervisor, a grandchild ignoring SIGTERM
        parent = {pid: int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
                  for pid in [*servers, *pids]}
        # The supervisor: the one whose parent is a server (the pids' order depends on who wrote first).
        theirs = [parent[p] for p in pids if parent[p] in servers]
        assert len(theirs) == 1 and parent[theirs[0]] == (host.pid if not sandboxed else servers[0]), \
            "the supervisor's parent is not the spawn server (or, sandboxed, a server it forked)"
        assert all(alive(p) for p in [*servers, *pids])
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_until(lambda: not any(alive(p) for p in [*servers, *pids]), 5), \
            [p for p in [*servers, *pids] if alive(p)]
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


# --- Servers of one sandbox (SANDBOX-1 confined once, ROBUST-3 kept) -------------------
SERVER_OF = ("import os\n"
             "sup = os.getppid()\n"
             "server = int(open(f'/proc/{sup}/stat').read().rpartition(')')[2].split()[1])\n"
             "print(server, os.readlink('/proc/self/ns/mnt'))\n")


def _sandbox(workspace: Path, home: Path, session: str = "", **changes):
    from dataclasses import replace

    from crystal_kernel.core.config import Config
    from crystal_kernel.jobs.sandbox import sandbox_for

    found = sandbox_for(Config(home=home), workspace, session=session)
    assert found is not None
    return replace(found, **changes)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split()[1]
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
async def test_sandboxed_calls_run_under_a_server_that_confined_itself_once(workspace: Path, private_home: Path):
    sandbox = _sandbox(workspace, private_home)
    other = _sandbox(workspace, private_home, network=True)

    async def server_of(which) -> tuple[int, str]:
        done = await run_process([PY, "-S", "-c", SERVER_OF], cwd=workspace, env=dict(os.environ), payload=None,
                                 timeout=30, max_bytes=10_000, sandbox=which)
        assert done.returncode == 0, done.stderr
        server, namespace = done.stdout.split()
        return int(server), namespace.decode()

    first, second, third = await server_of(sandbox), await server_of(sandbox), await server_of(other)
    assert first == second, "the same sandbox went to another server"
    assert third[0] != first[0], "another sandbox (the network allowed) went to the same server"
    server = first[0]
    assert _parent(server) == spawner.server_pid()
    # Confined once: the server holds the mount namespace its calls run in (none made per
    # call), its Landlock domain is why no_new_privs is set, and the host has neither.
    assert os.readlink(f"/proc/{server}/ns/mnt") == first[1] != os.readlink("/proc/self/ns/mnt")
    assert _status(server, "NoNewPrivs") == "1" and _status(os.getpid(), "NoNewPrivs") == "0"
    assert {server, third[0]} <= spawner.helper_pids()
    # And it still confines: the workspace's .crystal/ is read-only, the workspace is not.
    done = await run_process(["/bin/sh", "-c", "echo x > made.txt; echo y > .crystal/x.txt"], cwd=workspace,
                             env=dict(os.environ), payload=None, timeout=30, max_bytes=10_000, sandbox=sandbox)
    assert done.returncode != 0 and b"Read-only file system" in done.stderr
    assert (workspace / "made.txt").exists() and not (workspace / ".crystal/x.txt").exists()


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
async def test_a_few_servers_are_kept_and_one_let_go_finishes_its_calls(workspace: Path, private_home: Path):
    """At most CONFINED_SERVERS are kept, the least recently used let go; a server let go
    while a call of its runs lets that call finish (no parent-death signal cut it short),
    then exits."""
    sandboxes = [_sandbox(workspace, private_home, cache=str(workspace / f"cache{i}"))
                 for i in range(spawner.CONFINED_SERVERS + 1)]
    waiting = SERVER_OF.replace("print(", "import time\nwhile not os.path.exists('go'): time.sleep(0.01)\nprint(")
    slow = asyncio.ensure_future(run_process([PY, "-S", "-c", waiting], cwd=workspace, env=dict(os.environ),
                                             payload=None, timeout=60, max_bytes=10_000, sandbox=sandboxes[0]))
    before = spawner.helper_pids()  # servers earlier tests of this process left kept
    deadline = time.monotonic() + 20
    while not spawner.helper_pids(0) - before and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    first = {p for p in spawner.helper_pids() - before if _parent(p) == spawner.server_pid()}  # not its spare
    assert len(first) == 1
    for sandbox in sandboxes[1:]:
        done = await run_process(["/bin/true"], cwd=workspace, env=dict(os.environ), payload=None, timeout=30,
                                 max_bytes=100, sandbox=sandbox)
        assert done.returncode == 0
    servers = {p for p in spawner.helper_pids() if _parent(p) == spawner.server_pid()}
    assert len(servers) == spawner.CONFINED_SERVERS and not first & servers, "the oldest server was kept"
    assert alive(next(iter(first))) and not slow.done(), "the server let go did not wait for its running call"
    (workspace / "go").touch()
    done = await slow
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[0]) == next(iter(first))
    assert wait_until(lambda: not alive(next(iter(first))), 5), "a server let go did not exit after its last call"


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
async def test_a_session_starts_its_bash_sandbox_server_before_the_first_call(workspace: Path):
    """With .crystal/ there, the server of bash's sandbox is started with the spawn server
    (host/runtime.py), so the session's first bash call does not wait for it to confine
    itself: the call's supervisor is forked by a server that existed before the call."""
    from crystal_kernel.host.bootstrap import SessionOptions, open_session
    from crystal_kernel.host.loop import run_turn
    from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply

    (workspace / ".crystal").mkdir()
    command = "echo server=$(cut -d' ' -f4 /proc/$PPID/stat)"
    session = open_session(SessionOptions(workspace, overrides={"approval": "full"}, person_present=False,
                                          provider=ScriptedProvider([tool_reply([("bash", {"command": command})]),
                                                                     text_reply("done")])))
    try:
        await session.prepare_tools()
        bash_rules = _sandbox(workspace, session.config.home, session.id)  # what bash's call uses
        assert wait_until(lambda: spawner.server_of(bash_rules) is not None, 20)
        started = spawner.server_of(bash_rules)
        events = [e async for e in run_turn(session, "go")]
    finally:
        await session.close()
    text = next(e for e in events if type(e).__name__ == "ToolResultEvent").text
    server = int(text.split("server=")[1].split()[0])
    assert server == started and _parent(server) == spawner.server_pid(), text


SESSION = "import os; print(os.getsid(0), os.getpgid(0), os.getppid())"


def _session_of(collect_argv: list[str], session: bool, workspace: Path,
                sandbox: Sandbox | None = None) -> tuple[int, int, int]:
    proc = spawner.spawn(collect_argv, cwd=str(workspace), env=None, sandbox=sandbox, grace=1.0,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         session=session)
    assert proc is not None and proc.stdout is not None
    out = proc.stdout.read()
    assert proc.wait(30) == 0
    proc.stdout.close()
    proc.close()
    sid, group, supervisor = (int(v) for v in out.split())
    return sid, group, supervisor


def test_a_program_that_uses_no_terminal_is_scheduled_in_the_hosts_session(workspace: Path):
    """Linux shares the CPU between sessions first (automatic process grouping): ripgrep
    in a session of its own took 1.1-1.7x the wall time of the same search started by the
    host (docs/benchmarks.md). Such a call stays in the host's session, in a process group
    of its own that the host signals to stop it; a shell command still gets a session of
    its own (no controlling terminal); the server is in the host's session but not in its
    process group (a Ctrl-C in the host's terminal does not reach it)."""
    # Unconfined (forked by the spawn server) and read-only (a spare of that sandbox's server).
    for sandbox in (None, read_only_sandbox()):
        sid, group, supervisor = _session_of([PY, "-S", "-c", SESSION], False, workspace, sandbox)
        assert sid == os.getsid(0), f"the call left the host's session ({sandbox})"
        assert group == supervisor != os.getpgid(0), f"the call is not in a process group of its own ({sandbox})"
        sid, group, supervisor = _session_of([PY, "-S", "-c", SESSION], True, workspace, sandbox)
        assert sid == group == supervisor != os.getsid(0), f"a shell command must get a session of its own ({sandbox})"
    server = spawner.server_pid()
    assert server is not None
    if sys.version_info >= (3, 11):  # 3.10 has no Popen(process_group=): the server gets a session of its own
        assert os.getsid(server) == os.getsid(0)
    assert os.getpgid(server) == server != os.getpgid(0)


async def test_ripgrep_runs_in_the_hosts_session(workspace: Path):
    from crystal_kernel.tools._rg import run_rg

    def collect(proc: spawner.ToolProcess) -> bytes:
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read()
        proc.stderr.read()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        return out

    out = await run_rg([PY, "-S", "-c", SESSION], collect, timeout=30)
    sid, group, supervisor = (int(v) for v in out.split())
    assert isinstance(spawner.server_pid(), int), "the search did not run under the spawn server"
    assert sid == os.getsid(0) and group == supervisor != os.getpgid(0)
