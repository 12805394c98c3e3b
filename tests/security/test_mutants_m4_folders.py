"""host/folders.py and core/access.py, second hand-mutation pass
(``M4-..`` rows of docs/mutants.md; TRUST-3, TRUST-6).

The person's ``/access add`` through the real command handler, with the workspace and the
folders under ``$HOME`` as people have them (the first pass's tests never put them
there), and the read and write tools through the turn loop in ``full``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.events import ToolResultEvent
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply


@pytest.fixture
def home(private_home) -> Path:
    """The person's home ($HOME; the Crystal Home is its .crystal)."""
    return private_home.parent


@pytest.fixture
def project(home) -> Path:
    ws = home / "projects" / "app"
    ws.mkdir(parents=True)
    return ws


def _session(workspace: Path, *calls):
    provider = ScriptedProvider([*(tool_reply([c]) for c in calls), text_reply("done")])
    return open_session(SessionOptions(workspace, overrides={"approval": "full"}, provider=provider,
                                       person_present=False))


async def _results(session) -> list[ToolResultEvent]:
    return [e async for e in run_turn(session, "go") if isinstance(e, ToolResultEvent)]


async def _refused(session, line: str) -> str:
    with pytest.raises(UserError) as caught:
        await run_command(session, line)
    return str(caught.value)


# ----- host/folders.py --------------------------------------------------------------------

async def test_a_folder_in_home_can_be_added_one_holding_home_cannot__M4_30(home, project):
    """With the workspace in ~/projects, ~/data is an ordinary folder to add; the folder
    holding the home (all of it, config and keys included) is refused."""
    (home / "data").mkdir()
    (home / "data" / "table.csv").write_text("a,b\n1,2\n")
    session = _session(project, ("read", {"path": str(home / "data" / "table.csv")}))
    assert (await run_command(session, "/access add ~/data ro")).text == f"Added {home / 'data'} (ro)."
    (result,) = await _results(session)
    assert result.ok and "1,2" in result.text
    message = await _refused(session, f"/access add {home.parent}")
    assert message == (f"'{home.parent}' ({home.parent}) is or holds your home folder; "
                       "add a folder inside it instead.")
    assert [str(d.path) for d in session.access.directories] == [str(home / "data")]


async def test_a_folder_holding_a_crystal_home_outside_home_is_refused__M4_30(home, project, tmp_path,
                                                                                  monkeypatch):
    crystal_home = tmp_path / "srv" / "crystal"
    crystal_home.mkdir(parents=True)
    monkeypatch.setenv("CRYSTAL_HOME", str(crystal_home))
    session = _session(project)
    message = await _refused(session, f"/access add {tmp_path / 'srv'} ro")
    assert "is or holds the Crystal Home" in message
    assert session.access.directories == []


@pytest.mark.parametrize("folder", [".ssh/keys", ".config/gcloud", ".aws/sso/cache"])
async def test_a_folder_inside_a_credential_folder_is_refused__M4_31(home, project, folder):
    """~/.ssh/keys is as secret as ~/.ssh: it cannot be added, and a key in it stays
    out of the model's reach."""
    target = home / folder
    target.mkdir(parents=True)
    (target / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRETKEY\n")
    session = _session(project, ("read", {"path": str(target / "id_ed25519")}))
    message = await _refused(session, f"/access add ~/{folder} ro")
    assert message == f"'~/{folder}' ({target}) is a credential folder; it cannot be added."
    assert session.access.directories == []
    (result,) = await _results(session)
    assert not result.ok and "SECRETKEY" not in result.text


@pytest.mark.parametrize("inside", ["prompts", "sessions", "data/tools"])
async def test_a_folder_inside_the_crystal_home_is_refused__M4_35(private_home, project, inside):
    target = private_home / inside
    target.mkdir(parents=True, exist_ok=True)
    session = _session(project)
    message = await _refused(session, f"/access add {target} rw")
    assert message == f"'{target}' ({target}) is inside the Crystal Home, which only Crystal changes."
    assert session.access.directories == []


# ----- core/access.py ----------------------------------------------------------------------

async def test_adding_a_folder_again_read_only_downgrades_it__M4_28(home, project):
    """`/access add X ro` after `/access add X rw`: X is read-only from then on (one
    entry in the listing) and the write tool is refused there."""
    shared = home / "shared"
    shared.mkdir()
    session = _session(project, ("write", {"path": str(shared / "new.txt"), "content": "x\n"}))
    await run_command(session, f"/access add {shared} rw")
    await run_command(session, f"/access add {shared} ro")
    listing = (await run_command(session, "/access")).text
    *folders, sandbox_line = listing.splitlines()
    assert folders == [f"Workspace: {project} (rw)", f"{shared} (ro)"]
    assert sandbox_line.startswith("Sandbox: ")  # SANDBOX-2: which mechanism runs
    (result,) = await _results(session)
    assert not result.ok and "read-only directory" in result.text
    assert not (shared / "new.txt").exists()
