"""TRUST-5's trust hashes (core/trust_digest.py) and what needs trust (core/trust.py):
the second mutation pass (``D..`` and ``U..`` rows of docs/mutants.md). Real files and
links, the real trust store in a private Home; where it matters, whether a session offers
the set's tool."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from crystal_kernel.core import trust_digest
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.trust import (
    TrustStore,
    find_candidate,
    is_trusted,
    needs_content_trust,
    trust_all,
    workspace_states,
)
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.testing.scripted import ScriptedProvider


def make_set(workspace: Path, name: str = "kit") -> Path:
    """A workspace exec set whose tool `kit_tool` runs tool.py; returns its tools.json."""
    folder = workspace / ".crystal" / "tools" / name
    folder.mkdir(parents=True)
    (folder / "tool.py").write_text("print('honest')\n")
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "tool.py"], "tools": [
        {"name": "kit_tool", "description": "Honest.", "output": "text", "catalogs": ["plan", "work"]}]}))
    return folder / "tools.json"


async def offered(workspace: Path) -> bool:
    """Whether a new session in the workspace offers the set's tool."""
    session = open_session(SessionOptions(workspace, provider=ScriptedProvider([])))
    await session.prepare_tools()
    return session.tool("kit_tool") is not None


def refused_to_trust(home: Path, kind, path: Path) -> str:
    with pytest.raises(UserError) as caught:
        TrustStore(home).trust(kind, path)
    return str(caught.value)


# ----- core/trust_digest.py ---------------------------------------------------------------

def test_a_linked_workspace_file_is_not_trusted_by_its_target__D01(workspace, private_home):
    """`.crystal/mcp.json -> ../shared/mcp.json`: the trusted path would name content
    that can change where the link leads, so it is refused."""
    (workspace / "shared").mkdir()
    (workspace / "shared" / "mcp.json").write_text('{"mcpServers": {}}')
    (workspace / ".crystal").mkdir()
    os.symlink(workspace / "shared" / "mcp.json", workspace / ".crystal" / "mcp.json")
    assert "symbolic link" in refused_to_trust(private_home, "mcp", workspace / ".crystal" / "mcp.json")
    (state,) = workspace_states(private_home, workspace)
    assert not state.trusted and state.problem and "symbolic link" in state.problem


async def test_a_link_into_a_sibling_set_with_the_same_name_prefix_is_outside__D02(workspace, private_home):
    tools = make_set(workspace, "kit")
    sibling = tools.parent.parent / "kit2"
    sibling.mkdir()
    (sibling / "run.py").write_text("print('elsewhere')\n")
    os.symlink(sibling / "run.py", tools.parent / "run.py")
    assert "outside" in refused_to_trust(private_home, "exec", tools)
    assert not await offered(workspace)


def test_making_a_file_executable_untrusts_the_set__D06(workspace, private_home):
    tools = make_set(workspace)
    (tools.parent / "helper.sh").write_text("echo hi\n")
    os.chmod(tools.parent / "helper.sh", 0o644)
    trust_all(private_home, workspace)
    assert is_trusted(private_home, "exec", tools).trusted
    os.chmod(tools.parent / "helper.sh", 0o755)
    assert not is_trusted(private_home, "exec", tools).trusted


def test_the_file_bound_is_exact__D07(workspace, private_home, monkeypatch):
    tools = make_set(workspace)  # tools.json and tool.py
    (tools.parent / "data.txt").write_text("d\n")
    monkeypatch.setattr(trust_digest, "MAX_HASHED_FILES", 3)
    assert TrustStore(private_home).trust("exec", tools).trusted  # three files: within
    (tools.parent / "more.txt").write_text("m\n")
    assert "more than 3 files" in refused_to_trust(private_home, "exec", tools)


def test_the_byte_bound_is_exact__D08(workspace, private_home, monkeypatch):
    tools = make_set(workspace)
    (tools.parent / "data.bin").write_bytes(b"x" * 4096)
    total = sum(p.stat().st_size for p in tools.parent.iterdir())
    monkeypatch.setattr(trust_digest, "MAX_HASHED_BYTES", total)
    assert TrustStore(private_home).trust("exec", tools).trusted
    monkeypatch.setattr(trust_digest, "MAX_HASHED_BYTES", total - 1)
    assert "MiB" in refused_to_trust(private_home, "exec", tools)


async def test_same_size_content_with_the_old_times_put_back_untrusts_the_set__D09(workspace, private_home):
    """The hash cache is keyed by the file's identity including ctime, which a program
    cannot set back: replaced bytes of the same length with mtime restored are seen."""
    tools = make_set(workspace)
    program = tools.parent / "tool.py"
    trust_all(private_home, workspace)
    assert await offered(workspace)
    before = program.stat()
    evil = "print('EVIL!!')\n"
    assert len(evil) == before.st_size
    program.write_text(evil)
    os.utime(program, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert program.stat().st_mtime_ns == before.st_mtime_ns and program.stat().st_size == before.st_size
    assert not is_trusted(private_home, "exec", tools).trusted
    assert not await offered(workspace)


async def test_a_changed_program_untrusts_the_set_after_it_was_hashed__D10(workspace, private_home):
    tools = make_set(workspace)
    trust_all(private_home, workspace)
    assert is_trusted(private_home, "exec", tools).trusted  # hashed (and cached) as it was
    (tools.parent / "tool.py").write_text("import os\nos.system('touch PWNED')\n")
    assert not is_trusted(private_home, "exec", tools).trusted
    assert not await offered(workspace)


def test_a_set_with_a_link_leading_out_cannot_be_trusted__D11(workspace, private_home, tmp_path):
    tools = make_set(workspace)
    outside = tmp_path / "outside.py"
    outside.write_text("print('outside')\n")
    os.symlink(outside, tools.parent / "lib.py")
    assert "outside its exec set folder" in refused_to_trust(private_home, "exec", tools)
    assert not (private_home / "trust.json").exists()
    (state,) = workspace_states(private_home, workspace)
    assert not state.trusted and state.problem


def test_renaming_a_file_of_the_set_untrusts_it__D12(workspace, private_home):
    """A disabled plugin renamed into the name the program loads changes what runs."""
    tools = make_set(workspace)
    (tools.parent / "plugins").mkdir()
    (tools.parent / "plugins" / "wipe.py.disabled").write_text("import shutil\n")
    trust_all(private_home, workspace)
    (tools.parent / "plugins" / "wipe.py.disabled").rename(tools.parent / "plugins" / "wipe.py")
    assert not is_trusted(private_home, "exec", tools).trusted


# ----- core/trust.py ----------------------------------------------------------------------

def _listed_and_trustable(workspace: Path, home: Path, name: str) -> None:
    prompt = workspace / ".crystal" / "prompts" / name
    prompt.parent.mkdir(parents=True, exist_ok=True)
    prompt.write_text("Judge carefully.\n")
    states = workspace_states(home, workspace)
    assert ("prompt", name, False) in [(s.kind, s.path.name, s.trusted) for s in states]
    kind, path = find_candidate(workspace, f".crystal/prompts/{name}")
    assert kind == "prompt" and TrustStore(home).trust(kind, path).trusted


def test_review_user_texts_are_listed_and_can_be_trusted__U01(workspace, private_home):
    _listed_and_trustable(workspace, private_home, "review.user.md")
    _listed_and_trustable(workspace, private_home, "review.user.txt")


def test_txt_review_texts_are_listed_and_can_be_trusted__U02(workspace, private_home):
    _listed_and_trustable(workspace, private_home, "review.txt")


def test_a_file_the_person_named_outside_the_workspace_needs_no_trust__U03(workspace, private_home, tmp_path):
    elsewhere = tmp_path / "recordings" / "run.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text("{}")
    assert not needs_content_trust(private_home, workspace, elsewhere)
    inside = workspace / ".crystal" / "cassettes" / "default.json"
    inside.parent.mkdir(parents=True)
    inside.write_text("{}")
    assert needs_content_trust(private_home, workspace, inside)


def test_homes_own_files_need_no_trust_when_the_workspace_holds_home__U04(tmp_path):
    """A workspace at ~ has ~/.crystal as both Home and its .crystal folder."""
    workspace = tmp_path / "person"
    home = workspace / ".crystal"
    (home / "prompts").mkdir(parents=True)
    (home / "prompts" / "review.md").write_text("My own review text.\n")
    assert not needs_content_trust(home, workspace, home / "prompts" / "review.md")


def test_trust_given_through_a_linked_workspace_path_holds__U06(tmp_path, private_home):
    """A workspace opened through a link (a symlinked projects folder) keeps the
    person's trust: it is recorded by the resolved path, as it is looked up."""
    real = tmp_path / "real-ws"
    real.mkdir()
    linked = tmp_path / "ws-link"
    os.symlink(real, linked)
    make_set(real)
    assert [s.trusted for s in trust_all(private_home, linked)] == [True]
    assert [s.trusted for s in workspace_states(private_home, linked)] == [True]
    assert [s.trusted for s in workspace_states(private_home, real)] == [True]


async def test_a_tools_json_that_is_a_link_is_refused_even_inside_the_set__D04(workspace, private_home):
    """The set's tools.json must be the file itself (docs/security.md), wherever a link
    there leads; one leading out of the set is refused by the closure walk as well."""
    tools = make_set(workspace)
    (tools.parent / "manifests").mkdir()
    tools.rename(tools.parent / "manifests" / "v1.json")
    os.symlink(tools.parent / "manifests" / "v1.json", tools)
    assert "symbolic link" in refused_to_trust(private_home, "exec", tools)
    assert not await offered(workspace)


async def test_a_set_folder_that_is_a_link_is_refused__D03(workspace, private_home, tmp_path):
    """`.crystal/tools/kit -> /elsewhere/kit-v1`: re-pointing the link later would swap
    the whole set, so a linked set folder is never trusted."""
    made = make_set(tmp_path / "elsewhere")
    (workspace / ".crystal" / "tools").mkdir(parents=True)
    link = workspace / ".crystal" / "tools" / "kit"
    os.symlink(made.parent, link)
    assert "symbolic link" in refused_to_trust(private_home, "exec", link / "tools.json")
    assert not await offered(workspace)


@pytest.mark.parametrize("target", ["file", "folder"])
async def test_a_link_leading_out_of_the_set_is_refused__D05(workspace, private_home, tmp_path, target):
    tools = make_set(workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "lib.py").write_text("print('outside')\n")
    os.symlink(outside / "lib.py" if target == "file" else outside, tools.parent / "lib")
    assert "outside its exec set folder" in refused_to_trust(private_home, "exec", tools)
    assert not await offered(workspace)
