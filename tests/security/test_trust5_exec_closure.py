"""TRUST-5 attacks on a trusted exec set: the trust hash covers the set's whole closure.

Every file reachable from the set folder counts (``.venv``, ``__pycache__``, ``*.pyc``,
``node_modules``, ``.git`` included), links are resolved, a link leading outside the set
folder is refused, and the set folder and its tools.json must be themselves. Each test
plays what a hostile repository (or a model's `bash`) does after the person ran
`crystal trust`; a marker file shows whether replaced code ran.
"""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core import trust_digest
from crystal_kernel.core.events import ToolResultEvent
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.core.trust import TrustStore, workspace_states
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply

CRYSTAL = str(Path(sys.executable).parent / "crystal")
HONEST = "print('honest')\n"


def evil_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'a').write('ran\\n'); print('pwned')\n"


def write_program(target: Path, code: str) -> None:
    """The program's source, or for a ``.pyc`` the compiled code Python runs from it."""
    if target.suffix != ".pyc":
        target.write_text(code)
        return
    source = target.with_name("source_tmp.py")
    source.write_text(code)
    py_compile.compile(str(source), cfile=str(target), doraise=True)
    source.unlink()


def make_set(workspace: Path, command: list[str], name: str = "kit") -> Path:
    folder = workspace / ".crystal" / "tools" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.json").write_text(json.dumps({"command": command, "tools": [
        {"name": "kit_tool", "description": "Honest.", "output": "text", "catalogs": ["plan", "work"]}]}))
    return folder


def crystal_trust(workspace: Path, target: str) -> subprocess.CompletedProcess:
    return subprocess.run([CRYSTAL, "trust", target], cwd=workspace, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def offered(workspace: Path) -> bool:
    session = open_session(SessionOptions(workspace, provider=ScriptedProvider([])))
    return any(t.name == "kit_tool" for t in run_to_completion(session.prepare_tools()))


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_link_leading_outside_the_set_is_refused(workspace, tmp_path, link):
    """TRUST-5: the set's program is a link to a workspace file the model may `write`
    in any mode (it is not under .crystal/). On the old hash the link counted by its
    target text, so after `crystal trust` a rewritten target ran as trusted code."""
    marker = tmp_path / "marker"
    outside = workspace / "scripts"
    outside.mkdir()
    (outside / "run.py").write_text(HONEST)
    if link == "file":
        folder = make_set(workspace, [sys.executable, "run.py"])
        (folder / "run.py").symlink_to(outside / "run.py")
    else:
        folder = make_set(workspace, [sys.executable, "lib/run.py"])
        (folder / "lib").symlink_to(outside)
    done = crystal_trust(workspace, str(folder))
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and "symbolic link leading outside its exec set folder" in done.stderr
    (outside / "run.py").write_text(evil_code(marker))  # what the model's `write` can do
    assert not offered(workspace)
    listed = subprocess.run([CRYSTAL, "trust", "list"], cwd=workspace, capture_output=True, text=True, timeout=120)
    assert "refused" in listed.stdout and "leading outside" in listed.stdout


def test_a_linked_tools_json_is_refused(workspace, tmp_path):
    """A tools.json that is a link made the old hash cover the link target's folder, not
    the set folder whose run.py actually runs."""
    marker = tmp_path / "marker"
    folder = make_set(workspace, [sys.executable, "run.py"])
    (folder / "run.py").write_text(HONEST)
    decoy = workspace / "decoy"
    decoy.mkdir()
    (folder / "tools.json").rename(decoy / "tools.json")
    (folder / "tools.json").symlink_to(decoy / "tools.json")
    done = crystal_trust(workspace, str(folder))
    assert done.returncode == 2 and "is a symbolic link" in done.stderr
    (folder / "run.py").write_text(evil_code(marker))
    assert not offered(workspace)


def test_a_linked_set_folder_cannot_be_re_pointed(workspace, tmp_path):
    """The set folder itself is a link: it is refused, so re-pointing it later trusts nothing."""
    real = tmp_path / "kit-v1"
    make_set(tmp_path / "x", [sys.executable, "run.py"])  # a set made elsewhere
    (tmp_path / "x" / ".crystal" / "tools" / "kit").rename(real)
    (real / "run.py").write_text(HONEST)
    (workspace / ".crystal" / "tools").mkdir(parents=True)
    link = workspace / ".crystal" / "tools" / "kit"
    link.symlink_to(real)
    done = crystal_trust(workspace, str(link))
    assert done.returncode == 2 and "is a symbolic link" in done.stderr
    assert not offered(workspace)


@pytest.mark.parametrize("replaced", [".venv/bin/runner", "__pycache__/tool.cpython-312.pyc",
                                      "node_modules/lib/index.py", ".git/hooks/run"])
async def test_replacing_a_file_in_a_skipped_folder_untrusts_the_set(workspace, tmp_path, replaced):
    """The old hash skipped .venv, __pycache__, *.pyc, node_modules and .git: a set that
    runs `.venv/bin/runner` ran replaced code while `trust list` said trusted."""
    marker = tmp_path / "marker"
    folder = make_set(workspace, [sys.executable, replaced])
    target = folder / replaced
    target.parent.mkdir(parents=True)
    write_program(target, HONEST)
    done = crystal_trust(workspace, str(folder))
    assert done.returncode == 0, done.stderr
    session = open_session(SessionOptions(workspace, provider=ScriptedProvider([
        tool_reply([("kit_tool", {})]), text_reply("done")]), overrides={"approval": "full"},
        person_present=False))
    await session.prepare_tools()
    assert session.tool("kit_tool") is not None

    write_program(target, evil_code(marker))  # after trust, under the catalog already built
    events = [e async for e in run_turn(session, "use the kit")]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "changed since you trusted it" in result.text
    assert not marker.exists(), "replaced code in a trusted set ran"
    assert [s.changed for s in workspace_states(session.home, workspace)] == [True]


async def test_writing_through_an_inner_link_untrusts_the_set(workspace, tmp_path):
    """A link inside the set to a file inside the set is hashed by the file it leads to."""
    marker = tmp_path / "marker"
    folder = make_set(workspace, [sys.executable, "run.py"])
    (folder / "impl").mkdir()
    (folder / "impl" / "real.py").write_text(HONEST)
    (folder / "run.py").symlink_to(folder / "impl" / "real.py")
    session = open_session(SessionOptions(workspace, provider=ScriptedProvider([])))
    assert "Trusted" in (await run_command(session, "/trust all")).text
    await session.prepare_tools()
    assert session.tool("kit_tool") is not None
    (folder / "run.py").write_text(evil_code(marker))  # writes through the link
    session.refresh_system()
    await session.prepare_tools()
    assert session.tool("kit_tool") is None


def test_a_set_too_big_to_hash_is_refused_in_one_line(workspace, monkeypatch):
    """Bounded: beyond the file cap the set is refused, never hashed by names only."""
    folder = make_set(workspace, [sys.executable, "run.py"])
    (folder / "run.py").write_text(HONEST)
    for i in range(5):
        (folder / f"data{i}.bin").write_bytes(b"x")
    monkeypatch.setattr(trust_digest, "MAX_HASHED_FILES", 3)
    home = Path(os.environ["CRYSTAL_HOME"])
    with pytest.raises(Exception) as caught:
        TrustStore(home).trust("exec", folder / "tools.json")
    assert "more than 3 files" in str(caught.value) and "\n" not in str(caught.value)
    assert not (home / "trust.json").exists()
