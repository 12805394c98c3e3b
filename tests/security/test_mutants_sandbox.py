"""SANDBOX-1 decisions that the first sandbox tests did not pin down: the second mutation
pass (``S..`` rows of docs/mutants.md). Real sandboxed processes in `full` approval, real
files outside every temp folder, a real loopback listener, a real notebook kernel."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import sys
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from crystal_kernel.core.config import Config, load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.jobs import landlock
from crystal_kernel.testing.scripted import ScriptedPerson, ScriptedProvider, text_reply, tool_reply
from crystal_kernel.tools.base import ToolResult
from crystal_kernel.tools.catalog import load_builtin

SANDBOX_LINE = "This ran in the sandbox (SANDBOX-1)"

pytestmark = pytest.mark.skipif(landlock.abi_version() < 6, reason="needs Landlock ABI 6 (this machine has 7)")

@pytest.fixture(autouse=True)
def landlock_path(monkeypatch):
    """These tests are of the Landlock path (its servers of one sandbox, its rules): the
    bubblewrap path has no such server (SANDBOX-2; tests/security/test_sandbox2_*.py)."""
    monkeypatch.setenv("CRYSTAL_SANDBOX_MECHANISM", "landlock")



@pytest.fixture
def place(private_home):
    """<place>/ws is the workspace, <place>/outside.txt beside it: outside every temp
    folder (temp folders are writable by design), in the real user's cache folder."""
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    root = real_home / ".cache" / "crystal-sandbox-tests" / uuid.uuid4().hex
    (root / "ws" / ".crystal" / "prompts").mkdir(parents=True)
    (root / "ws" / ".crystal" / "prompts" / "work.md").write_text("Original work prompt.\n")
    (root / "ws" / "src").mkdir()
    (root / "outside.txt").write_text("keep me\n")
    (root / "empty-dir").mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)



Person = ScriptedPerson  # crystal_kernel/testing/scripted.py


def session_for(workspace: Path, commands: list[str], approval: str = "full", replies=(), **overrides):
    calls = [tool_reply([("bash", {"command": c})]) for c in commands]
    provider = ScriptedProvider([*calls[:1], *replies, *calls[1:], text_reply("done")])
    return open_session(SessionOptions(workspace, overrides={"approval": approval, **overrides},
                                       provider=provider, person_present=False))


async def bash(workspace: Path, command: str, **overrides) -> ToolResultEvent:
    session = session_for(workspace, [command], **overrides)
    events = [e async for e in run_turn(session, "go")]
    (approval,) = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approval.outcome == "allow"  # full approval: only the sandbox stands
    return next(e for e in events if isinstance(e, ToolResultEvent))


# ----- what the sandbox refuses (landlock.py) ------------------------------------------------

async def test_truncating_a_file_outside_the_workspace_is_refused__S21(place):
    """truncate(2) by path needs only Landlock's truncate right (opening for writing is
    refused anyway); the sandbox handles it."""
    code = "import os; os.truncate('../outside.txt', 0); print('truncated')"
    result = await bash(place / "ws", f"{sys.executable} -c \"{code}\"")
    assert not result.ok and "truncated" not in result.text
    assert (place / "outside.txt").read_text() == "keep me\n"
    result = await bash(place / "ws", "truncate -s 0 .crystal/prompts/work.md")
    assert not result.ok and (place / "ws/.crystal/prompts/work.md").read_text() == "Original work prompt.\n"


async def test_moving_files_between_workspace_folders_works__S22(place):
    (place / "ws/src/a.txt").write_text("a\n")
    result = await bash(place / "ws", "mkdir -p build && mv src/a.txt build/a.txt && ln build/a.txt src/hard && echo moved")
    assert result.ok and "moved" in result.text, result.text
    assert (place / "ws/build/a.txt").read_text() == "a\n" and (place / "ws/src/hard").exists()


async def test_a_symlink_cannot_be_planted_outside_or_in_crystal__S23(place):
    result = await bash(place / "ws", "ln -s /etc/hostname ../planted")
    assert not result.ok and not os.path.lexists(place / "planted")
    result = await bash(place / "ws", "ln -s ../../notes.md .crystal/prompts/review.md")
    assert not result.ok and not os.path.lexists(place / "ws/.crystal/prompts/review.md")


async def test_removing_a_file_outside_the_workspace_is_refused__S24(place):
    result = await bash(place / "ws", "rm -f ../outside.txt")
    assert not result.ok and (place / "outside.txt").exists()
    assert result.text.count(SANDBOX_LINE) == 1


async def test_removing_an_empty_folder_outside_the_workspace_is_refused__S25(place):
    result = await bash(place / "ws", "rmdir ../empty-dir")
    assert not result.ok and (place / "empty-dir").is_dir()


async def test_a_sandboxed_command_cannot_listen_on_a_tcp_port__S26(place):
    code = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('listening')"
    result = await bash(place / "ws", f"{sys.executable} -c \"{code}\"")
    assert not result.ok and "listening" not in result.text


async def test_a_sandboxed_command_cannot_reach_the_hosts_abstract_unix_sockets__S27(place):
    name = f"crystal-test-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen(1)
    try:
        code = (f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\\\0{name}'); "
                "print('connected')")
        result = await bash(place / "ws", f"{sys.executable} -c \"{code}\"")
    finally:
        server.close()
    assert not result.ok and "connected" not in result.text, result.text


async def test_the_network_is_off_by_default__S68(place):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        result = await bash(place / "ws", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
    finally:
        listener.close()
    assert not result.ok and "connected" not in result.text
    assert load_config().sandbox_network is False


# ----- what the host decides (jobs/sandbox.py) -----------------------------------------------

async def test_a_folder_the_person_opened_rw_is_writable_in_the_sandbox__S05(place):
    (place / "shared").mkdir()
    session = session_for(place / "ws", ["echo shared > ../shared/out.txt && echo ok"])
    session.access.add(place / "shared", "rw")  # /access add ../shared rw
    events = [e async for e in run_turn(session, "go")]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.ok and (place / "shared/out.txt").read_text() == "shared\n", result.text


async def test_a_command_that_succeeds_gets_no_sandbox_line__S10(place):
    result = await bash(place / "ws", "echo 'grep: Permission denied lines: 0'")
    assert result.ok and SANDBOX_LINE not in result.text


async def test_without_a_sandbox_a_refusal_gets_no_sandbox_line__S11(place):
    result = await bash(place / "ws", "echo 'Permission denied' >&2; exit 1", sandbox="off")
    assert not result.ok and "Permission denied" in result.text and SANDBOX_LINE not in result.text


async def test_home_inside_a_folder_the_person_opened_rw_stays_unwritable__S02(place, monkeypatch):
    """Crystal's Home is protected by itself, not only as part of the person's home
    folder: a Home inside an /access rw folder (outside HOME) is still refused."""
    home = place / "shared" / "crystal-home"
    home.mkdir(parents=True)
    monkeypatch.setenv("CRYSTAL_HOME", str(home))
    session = session_for(place / "ws", [f"echo '{{}}' > {home}/config.json; echo other > ../shared/other.txt"])
    session.access.add(place / "shared", "rw")
    events = [e async for e in run_turn(session, "go")]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not (home / "config.json").exists(), result.text
    assert (place / "shared/other.txt").read_text() == "other\n"  # the rest of the folder is writable


DATA_SCRIPT = """import os
path = os.path.join(os.environ["CRYSTAL_TOOL_DATA"], "state.txt")
with open(path, "w") as f:
    f.write("kept")
print("saved")
"""


async def test_an_exec_sets_data_folder_is_writable_with_home_outside_temp__S34(place, monkeypatch):
    """EX-3: a Home set keeps its data folder writable under the sandbox, where Home is
    in no writable folder (the usual ~/.crystal, not a temp folder)."""
    home = place / "crystal-home"
    folder = home / "tools" / "saver"
    folder.mkdir(parents=True)
    monkeypatch.setenv("CRYSTAL_HOME", str(home))
    (folder / "saver.py").write_text(DATA_SCRIPT)
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "saver.py"],
                                                   "tools": [{"name": "saver", "output": "text"}]}))
    provider = ScriptedProvider([tool_reply([("saver", {})]), text_reply("done")])
    session = open_session(SessionOptions(place / "ws", overrides={"approval": "full"}, provider=provider,
                                          person_present=False))
    events = [e async for e in run_turn(session, "go")]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.ok and "saved" in result.text, result.text
    assert (home / "data/tools/saver/state.txt").read_text() == "kept"


def test_an_unknown_sandbox_mode_is_one_line_error__S67():
    with pytest.raises(UserError, match="'sandbox' must be one of") as caught:
        load_config(overrides={"sandbox": "workspace_write"})
    assert "\n" not in str(caught.value)


# ----- approval without Landlock (approval_flow.py) ------------------------------------------

async def test_without_landlock_review_mode_asks_the_person_not_the_reviewer__S50(place, monkeypatch):
    monkeypatch.setenv("CRYSTAL_SANDBOX_ABI", "0")
    verdict = text_reply('{"risk_level": "low", "user_authorization": "high", "harm_unrequested": false, '
                         '"rationale": "asked for"}')
    session = session_for(place / "ws", ["echo ran > ran.txt"], approval="review", replies=[verdict])
    events = [e async for e in run_turn(session, "go")]
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approvals[-1].outcome == "deny" and not (place / "ws/ran.txt").exists()
    assert any("sandbox" in (a.reason or "") for a in approvals if a.outcome == "ask")


async def test_without_landlock_a_session_allowance_still_counts__S51(place, monkeypatch):
    monkeypatch.setenv("CRYSTAL_SANDBOX_ABI", "0")
    session = session_for(place / "ws", ["echo one >> log.txt", "echo one >> log.txt"])
    person = Person("allow_session")
    events = [e async for e in run_turn(session, "go", person)]
    assert len(person.requests) == 1
    assert [e.ok for e in events if isinstance(e, ToolResultEvent)] == [True, True]
    assert (place / "ws/log.txt").read_text() == "one\none\n"


# ----- notebook_run (tools/notebook_run.py) --------------------------------------------------

async def test_notebook_run_cells_are_confined__S64(place, private_home):
    ws = place / "ws"
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}})
    nb.cells = [new_code_cell("print('started')"),
                new_code_cell("open('.crystal/prompts/work.md', 'w').write('INJECTED')"),
                new_code_cell("open('../outside.txt', 'w').write('INJECTED')")]
    nbformat.write(nb, str(ws / "a.ipynb"))
    session = Session(workspace=ws, config=Config(home=private_home), provider=ScriptedProvider(),
                      person_present=False)
    ctx = session.tool_context(NoPerson(), call_id="call-1")
    tool = load_builtin("notebook_run")
    result: ToolResult = await tool.run(tool.parse({"path": "a.ipynb", "timeout_seconds": 90}), ctx)
    assert "started" in result.text, result.text  # the kernel ran (over unix sockets: no TCP)
    assert not result.ok and ("Read-only file system" in result.text or "Permission denied" in result.text)
    assert (ws / ".crystal/prompts/work.md").read_text() == "Original work prompt.\n"
    assert (place / "outside.txt").read_text() == "keep me\n"
