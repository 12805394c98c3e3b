"""The Landlock path of the tool-process sandbox, third hand-mutation pass (``M4-94`` to
``M4-99`` rows of docs/mutants.md; SANDBOX-1, and SANDBOX-2's fallback).

Each test drives what a user drives: a session's bash, grep and background-job tools
in ``full`` (the sandbox is all that stands), or a real ``crystal run`` against the
loopback model server. Files that must stay untouched lie outside every temp folder
(temp folders are writable by design), in the real user's cache folder. Two decisions
depend on the kernel, so the kernel is made to answer otherwise: a supervisor whose
Landlock ABI is capped at 4 (M4-96), and a ``crystal run`` under a seccomp filter that
refuses ``landlock_restrict_self`` (M4-97, a sandbox that fails to start).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import ToolResultEvent
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.jobs import landlock, spawner
from crystal_kernel.jobs.sandbox import sandbox_for
from crystal_kernel.testing.llm_server import LLMServer
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply

CRYSTAL = str(Path(sys.executable).parent / "crystal")

pytestmark = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 (this machine has 7)")


@pytest.fixture(autouse=True)
def _landlock(landlock_path):
    """Every test here is of the Landlock path (tests/conftest.py's fixture)."""


@pytest.fixture
def root():
    """A fresh folder outside every temp folder: the real user's cache folder."""
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    folder = real_home / ".cache" / "crystal-sandbox-tests" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _session(workspace: Path, calls: list):
    replies = [tool_reply([call]) for call in calls] + [text_reply("done")]
    return open_session(SessionOptions(workspace, overrides={"approval": "full"}, provider=ScriptedProvider(replies),
                                       person_present=False))


async def _results(session) -> list[ToolResultEvent]:
    return [e async for e in run_turn(session, "go") if isinstance(e, ToolResultEvent)]


# ----- jobs/sandbox.py --------------------------------------------------------------------

CREDENTIAL_FILES = {".netrc": "machine git.example.com login me password mine\n",
                    ".git-credentials": "https://me:mine@git.example.com\n",
                    ".pgpass": "db.example.com:5432:*:me:mine\n",
                    ".pypirc": "[pypi]\nusername = __token__\npassword = pypi-mine\n",
                    ".npmrc": "//registry.npmjs.org/:_authToken=npm-mine\n"}


async def test_credential_files_in_home_stay_unwritable_with_the_workspace_at_home__M4_94(root, monkeypatch):
    """A session opened in ``~`` may write its files, but not plant a ``.netrc`` entry or
    swap the git, Postgres, PyPI and npm credentials kept directly in Home."""
    home = root / "home"
    (home / "src").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRYSTAL_HOME", str(root / "crystal-home"))
    for name, text in CREDENTIAL_FILES.items():
        (home / name).write_text(text)
    attack = "; ".join(f"echo 'machine evil.example login x password y' >> ~/{name}; echo swapped > ~/{name}"
                       for name in CREDENTIAL_FILES)
    session = _session(home, [("bash", {"command": f"echo mine > src/notes.txt; {attack}; true"})])
    try:
        await _results(session)
    finally:
        await session.close()
    assert (home / "src/notes.txt").read_text() == "mine\n"  # the workspace itself is writable
    assert {name: (home / name).read_text() for name in CREDENTIAL_FILES} == CREDENTIAL_FILES


RAN = "ran outside: "


async def test_ripgrep_that_misbehaves_writes_only_temp__M4_95(root, tmp_path, monkeypatch):
    """The grep tool runs ripgrep in a read-only sandbox. ripgrep itself never writes,
    so it is stood in for by a program that does what a ripgrep taken over by a crafted
    file could: write outside temp. It runs (its temp file is there) and writes nothing else."""
    from crystal_kernel.tools import grep as grep_tool

    ws = root / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("needle\n")
    marker, escaped = tmp_path / "rg-ran", root / "escaped.txt"
    taken_over = root / "bin" / "rg"
    taken_over.parent.mkdir()
    taken_over.write_text(f"#!/bin/sh\necho ran > {marker}\necho ESCAPED > {escaped}\nexit 1\n")
    taken_over.chmod(0o755)
    monkeypatch.setattr(grep_tool, "require_rg", lambda: str(taken_over))
    session = _session(ws, [("grep", {"pattern": "needle"})])
    try:
        (result,) = await _results(session)
    finally:
        await session.close()
    assert marker.read_text() == "ran\n", result.text
    assert not escaped.exists()


# ----- jobs/landlock.py -------------------------------------------------------------------

# The job supervisor as the host starts it, on a kernel whose Landlock ABI is 4 (Linux
# 6.7 to 6.9: TCP rules, no scopes). It loads landlock.py by path as ``landlock``.
CAPPED_SUPERVISOR = """import sys
from crystal_kernel.jobs import landlock
landlock.abi_version = lambda: 4
sys.modules["landlock"] = landlock
from crystal_kernel.jobs import supervisor
supervisor.main(sys.argv)
"""


def test_no_tcp_connection_on_a_landlock_abi_4_kernel__M4_96(root):
    """Without ``sandboxNetwork`` a command cannot connect to a loopback port, on the
    first kernels whose Landlock has network rules too."""
    ws = root / "ws"
    ws.mkdir()
    sandbox = sandbox_for(load_config(), ws)
    assert sandbox is not None and not sandbox.network
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, "-c", CAPPED_SUPERVISOR, *sandbox.launcher_args(), str(os.getpid()),
                               "1.0", shutil.which("bash") or "/bin/bash",
                               f"echo confined > ok.txt && exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"],
                              cwd=ws, capture_output=True, text=True, timeout=60)
    finally:
        listener.close()
    assert (ws / "ok.txt").read_text() == "confined\n", done.stderr  # the sandbox started and ran the command
    assert "connected" not in done.stdout and done.returncode != 0
    assert "Permission denied" in done.stderr, done.stderr


# ----- jobs/supervisor.py -----------------------------------------------------------------

# Runs a program under a seccomp filter that answers landlock_restrict_self (syscall 446
# on every architecture) with ENOSYS, as a container's seccomp profile may: the host still
# finds Landlock (its ABI is asked with syscall 444), and every attempt to enforce the
# rules fails. The filter is inherited by everything the program starts.
NO_RESTRICT_SELF = """import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
ops = [(0x20, 0, 0, 0),                      # load the syscall number
       (0x15, 0, 1, 446),                    # landlock_restrict_self?
       (0x06, 0, 0, 0x00050000 | 38),        # yes: fail with ENOSYS
       (0x06, 0, 0, 0x7FFF0000)]             # else: allow
code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in ops))
class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
program = Program(len(ops), ctypes.addressof(code))
if libc.prctl(38, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
    sys.exit("no_new_privs: " + os.strerror(ctypes.get_errno()))
if libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(program), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_background_job_whose_sandbox_fails_to_start_does_not_run__M4_97(root):
    """A background job is confined by its own supervisor (the per-call path). When the
    kernel refuses to enforce the rules, the job must not run unconfined: nothing is
    written outside the workspace, it exits 126, and its log says why."""
    home, ws, outside = root / "home", root / "ws", root / "outside.txt"
    home.mkdir()
    ws.mkdir()
    calls = [("bash_start", {"command": f"echo ESCAPED > {outside}; echo the job ran"}),
             ("bash_status", {"job_id": "j1", "wait_seconds": 20}), ("bash_logs", {"job_id": "j1"})]
    replies = [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in calls] + [{"text": "done"}]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "OPENAI_", "ANTHROPIC_"))}
    with LLMServer(replies) as server:
        env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_SANDBOX_MECHANISM": "landlock",
                    "CRYSTAL_PROVIDER": "openai", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_MODEL": "gpt-test",
                    "OPENAI_API_KEY": "sk-test"})
        out = subprocess.run([sys.executable, "-c", NO_RESTRICT_SELF, CRYSTAL, "run", "go", "--workspace", str(ws),
                              "--format", "jsonl", "--approval", "full"],
                             capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    results = [json.loads(line) for line in out.stdout.splitlines()]
    texts = [e["text"] for e in results if e["type"] == "tool_result"]
    assert len(texts) == 3, out.stdout
    assert not outside.exists()
    assert "Exit code: 126" in texts[1], texts[1]
    assert "the sandbox could not start" in texts[2] and "the job ran" not in texts[2], texts[2]


# ----- jobs/spawner.py --------------------------------------------------------------------

async def test_a_link_made_at_a_missing_credential_folder_between_calls_is_seen__M4_99(root, monkeypatch):
    """The workspace holds Home, which has no ``~/.ssh`` yet: bash's sandbox is kept by a
    server that confined itself once, Home read-only in its mount namespace. Between two
    calls a link ``~/.ssh -> <workspace>/dotfiles-ssh`` is made (a dotfiles manager makes
    such links), dangling: its target does not exist yet. The next call must not be able
    to create that target and so write the person's ``authorized_keys`` through the link."""
    ws, crystal_home = root / "ws", root / "crystal-home"
    home = ws / "home"
    home.mkdir(parents=True)
    crystal_home.mkdir()  # made later by the session, it would end the kept server for another reason
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CRYSTAL_HOME", str(crystal_home))
    keys = home / ".ssh" / "authorized_keys"
    attack = f"mkdir -p dotfiles-ssh && echo 'ssh-ed25519 AAAA attacker' >> {keys}"
    provider = ScriptedProvider([tool_reply([("bash", {"command": "echo first"})]), text_reply("one"),
                                 tool_reply([("bash", {"command": attack})]), text_reply("two")])
    session = open_session(SessionOptions(ws, overrides={"approval": "full"}, provider=provider, person_present=False))
    try:
        (first,) = [e async for e in run_turn(session, "one") if isinstance(e, ToolResultEvent)]
        assert first.ok and "first" in first.text, first.text
        sandbox = sandbox_for(session.config, ws, session=session.id)  # its private temp is the session's
        assert sandbox is not None and spawner.server_of(sandbox) is not None, "bash's sandbox is not kept by a server"
        os.symlink(ws / "dotfiles-ssh", home / ".ssh")
        (second,) = [e async for e in run_turn(session, "two") if isinstance(e, ToolResultEvent)]
    finally:
        await session.close()
    assert not keys.exists(), second.text
    assert not second.ok


# ----- jobs/bwrap.py (SANDBOX-2): the analogous decision on the bubblewrap path ------------

async def test_a_bwrap_that_cannot_make_its_namespaces_leaves_tool_processes_to_landlock__S2_01(root, monkeypatch):
    """In a container that forbids user namespaces bubblewrap is installed but fails at
    once. It must not be chosen: commands then run under Landlock (confined, and they
    run), rather than every command failing with bubblewrap's error."""
    ws, outside = root / "ws", root / "outside.txt"
    ws.mkdir()
    failing = root / "bin" / "bwrap"
    failing.parent.mkdir()
    failing.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace, likely because the kernel "
                       "does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CRYSTAL_BWRAP", str(failing))
    monkeypatch.delenv("CRYSTAL_SANDBOX_MECHANISM")  # bubblewrap where it works, else Landlock
    session = _session(ws, [("bash", {"command": f"echo the command ran; echo ESCAPED > {outside}"})])
    try:
        (result,) = await _results(session)
    finally:
        await session.close()
    assert "the command ran" in result.text and "bwrap:" not in result.text, result.text
    assert "(SANDBOX-1)" in result.text  # Landlock's own line: the write outside was refused
    assert not outside.exists()
