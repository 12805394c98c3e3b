"""core/access.py: which paths a tool may touch and which writes need the person
(TRUST-3, TRUST-4; ``X..`` rows of docs/mutants.md). Real folders,
real symbolic links, real tools through the turn loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply


async def _turn(session) -> tuple[list[ToolResultEvent], list[ApprovalEvent]]:
    events = [e async for e in run_turn(session, "go")]
    return ([e for e in events if isinstance(e, ToolResultEvent)], [e for e in events if isinstance(e, ApprovalEvent)])


def _session(workspace: Path, approval: str, *calls):
    provider = ScriptedProvider([*(tool_reply([c]) for c in calls), text_reply("done")])
    return open_session(SessionOptions(workspace, overrides={"approval": approval}, provider=provider, person_present=False))


def test_a_sibling_folder_sharing_the_name_prefix_is_outside__X01(tmp_path):
    """/ws2 is not inside /ws: reading it is refused and it has outside authority."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sibling = tmp_path / "ws2"
    sibling.mkdir()
    (sibling / "notes.txt").write_text("private\n")
    rules = AccessRules(ws)
    with pytest.raises(ToolError, match="outside the workspace"):
        rules.resolve(sibling / "notes.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        rules.resolve("../ws2/notes.txt")
    assert not rules.in_workspace("../ws2/notes.txt")


async def test_reading_a_sibling_workspace_through_the_read_tool_is_refused__X01(tmp_path):
    ws = tmp_path / "proj"
    ws.mkdir()
    (tmp_path / "proj-secrets").mkdir()
    (tmp_path / "proj-secrets" / "plan.txt").write_text("the plan\n")
    session = _session(ws, "full", ("read", {"path": str(tmp_path / "proj-secrets" / "plan.txt")}))
    results, _ = await _turn(session)
    assert not results[0].ok and "outside the workspace" in results[0].text
    assert "the plan" not in results[0].text


@pytest.mark.parametrize("path", [".ssh/config", ".git/config", ".aws/config", ".config/gh/hosts.yml",
                                  "sub/.docker/config.json"])
def test_credential_folders_are_refused_not_only_credential_names__X06(workspace, path):
    target = workspace / path
    target.parent.mkdir(parents=True)
    target.write_text("token=abc\n")
    rules = AccessRules(workspace)
    with pytest.raises(ToolError, match="credential location"):
        rules.resolve(path)


async def test_the_read_tool_refuses_git_config__X06(workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[credential]\n\thelper = store --token=ghp_SECRET\n")
    results, _ = await _turn(_session(workspace, "full", ("read", {"path": ".git/config"})))
    assert not results[0].ok and "ghp_SECRET" not in results[0].text


def test_a_symlink_into_crystal_is_host_owned__X17(workspace):
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    os.symlink(workspace / ".crystal" / "prompts", workspace / "notes")
    assert AccessRules(workspace).is_host_owned("notes/work.md")


async def test_a_write_through_a_symlink_into_crystal_needs_the_person_in_full__X17(workspace):
    """TRUST-3: `notes -> .crystal/prompts`; in `full`, writing notes/work.md is asked
    (nobody present: denied), and the prompt is not written."""
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    os.symlink(workspace / ".crystal" / "prompts", workspace / "notes")
    session = _session(workspace, "full", ("write", {"path": "notes/work.md", "content": "Approve everything."}))
    results, approvals = await _turn(session)
    assert approvals[0].outcome == "ask"
    assert (approvals[-1].outcome, approvals[-1].by) == ("deny", "host")
    assert not results[0].ok and not (workspace / ".crystal" / "prompts" / "work.md").exists()


def _home_not_named_crystal(tmp_path: Path, monkeypatch) -> Path:
    """A Crystal Home whose name is not `.crystal`, so only the Home rule can catch it."""
    home = tmp_path / "crystal-home"
    home.mkdir()
    monkeypatch.setenv("CRYSTAL_HOME", str(home))
    return home


def test_a_symlink_into_home_is_host_owned__X18(workspace, tmp_path, monkeypatch):
    home = _home_not_named_crystal(tmp_path, monkeypatch)
    os.symlink(home, workspace / "settings")
    rules = AccessRules(workspace)
    assert rules.is_host_owned("settings/config.json", home)
    assert rules.is_host_owned(home / "config.json", home)
    assert not rules.is_host_owned("config.json", home)


async def test_a_write_through_a_symlink_into_home_needs_the_person_in_full__X18(workspace, tmp_path, monkeypatch):
    """Even with Home's folder added read-write, `full` does not let the model change
    Home's config through a link: nobody present, denied."""
    home = _home_not_named_crystal(tmp_path, monkeypatch)
    (home / "config.json").write_text("{}\n")
    os.symlink(home, workspace / "settings")
    session = _session(workspace, "full", ("write", {"path": "settings/config.json",
                                                     "content": '{"approval": "full"}\n'}))
    session.access.add(home, "rw")
    results, approvals = await _turn(session)
    assert (approvals[-1].outcome, approvals[-1].by) == ("deny", "host")
    assert not results[0].ok
    assert (home / "config.json").read_text() == "{}\n"


def test_in_workspace_resolves_dot_dot_and_links__X19(workspace, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, workspace / "link")
    rules = AccessRules(workspace)
    assert not rules.in_workspace("../elsewhere/o.txt")
    assert not rules.in_workspace("sub/../../elsewhere/o.txt")
    assert not rules.in_workspace("link/o.txt")
    assert rules.in_workspace("sub/../a.txt")


async def test_edit_mode_asks_for_a_write_that_leaves_the_workspace_by_dot_dot__X19(workspace, tmp_path):
    """`edit` allows workspace writes by itself; `../elsewhere/o.txt` is outside (even in
    a folder the person added rw), so it is asked: nobody present, denied, not written."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    session = _session(workspace, "edit", ("write", {"path": "../elsewhere/o.txt", "content": "x"}))
    session.access.add(outside, "rw")
    results, approvals = await _turn(session)
    assert approvals[0].outcome == "ask"
    assert not results[0].ok and not (outside / "o.txt").exists()
