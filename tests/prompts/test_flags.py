"""SPEC §9: process flags for prompts (FL-1 … FL-5), with real sessions and folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.commands import promptattach_command, promptset_command
from crystal_kernel.prompts.selection import check_prompt_flags, resolve_selection


def _override(home: Path, name: str, text: str) -> None:
    (home / "prompts").mkdir(exist_ok=True)
    (home / "prompts" / f"{name}.md").write_text(text)


def _export(home: Path, workspace: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "prompts", "export", *args,
                           "--home", str(home), "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=60)


def test_FL_1_prompt_set_flag_forces_the_set(home, workspace, mkset, make_session, snap):
    mkset("on", {"enabled": True}, work_md="ON\n")
    mkset("off", {"enabled": False}, work_md="OFF\n")
    assert make_session(prompt_set="off").system_text() == "OFF\n"
    assert make_session(prompt_set="default").system_text().startswith("You are Crystal")
    session = make_session(prompt_set="off")
    before = snap(home)
    with pytest.raises(UserError, match="refused"):
        promptset_command(session, ["default"])
    with pytest.raises(UserError, match="refused"):
        promptset_command(session, ["on"])
    assert snap(home) == before
    # Listing and export still work.
    assert "Selected: off (forced by --prompt-set)" in promptset_command(session, [])
    assert _export(home, workspace, "work", "--prompt-set", "off").stdout == "OFF\n"
    # A forced set that does not exist refuses to start.
    with pytest.raises(UserError, match="--prompt-set 'ghost'"):
        make_session(prompt_set="ghost").system_text()
    assert snap(home) == before


def test_FL_2_attachments_off(home, workspace, mkatt, make_session, snap):
    _override(home, "work", "W\n")
    mkatt("a", {"enabled": True}, work_md="A\n")
    mkatt("b", {"enabled": False}, work_md="B\n")
    on = make_session(prompt_attachments="on")
    assert on.system_text() == "W\n\nA\n"
    off = make_session(prompt_attachments="off")
    assert off.system_text() == "W\n"
    before = snap(home)
    for action in ("enable", "disable", "up", "down"):
        with pytest.raises(UserError, match="--prompt-attachments off"):
            promptattach_command(off, [action, "a"])
    assert snap(home) == before
    listing = promptattach_command(off, [])
    assert "off for this process" in listing and "a" in listing and "b" in listing
    with pytest.raises(UserError, match="on or off"):
        resolve_selection(home, workspace, type("F", (), {"prompt_attachments": "maybe"})())


def test_FL_3_forced_attachments(home, workspace, mkatt, make_session):
    _override(home, "work", "W\n")
    mkatt("x", {"enabled": True, "order": 0}, work_md="X\n")
    mkatt("y", {"enabled": True, "order": 1}, work_md="Y\n")
    mkatt("z", {"enabled": False}, work_md="Z\n")
    mkatt("w", {"enabled": False}, where="workspace", work_md="WS\n")
    session = make_session(prompt_attachment=["w", "y", "z", "w", "x"])
    # Enabled ones keep their manifest order; forced ones follow in first-seen order, once.
    assert session.system_text() == "W\n\nX\n\nY\n\nWS\n\nZ\n"
    with pytest.raises(UserError, match="cannot be combined"):
        check_prompt_flags(home, workspace, type("F", (), {"prompt_attachments": "off",
                                                           "prompt_attachment": ["z"]})())
    # A name not discovered in Home or the starting workspace fails startup.
    with pytest.raises(UserError, match="'ghost' is not a prompt attachment"):
        make_session(prompt_attachment=["ghost"]).system_text()
    # Through the real CLI: one line on stderr, exit 2.
    run = subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "run", "hi", "--workspace", str(workspace),
                          "--provider", "replay", "--prompt-attachment", "ghost"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "ghost" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_FL_4_forced_names_refuse_changes_and_are_skipped_later(home, workspace, mkatt, make_session, snap, tmp_path):
    _override(home, "work", "W\n")
    mkatt("forced", {"enabled": False}, where="workspace", work_md="F\n")
    other = mkatt("other", {"enabled": False}, work_md="O\n")
    session = make_session(prompt_attachment=["forced"])
    before = snap(workspace)
    for action in ("enable", "disable", "up", "down"):
        with pytest.raises(UserError, match="forced for this process"):
            promptattach_command(session, [action, "forced"])
    assert snap(workspace) == before
    promptattach_command(session, ["enable", "other"])  # other names can still change
    assert json.loads((other / "prompt.json").read_text())["enabled"] is True
    assert "forced (disabled on disk)" in promptattach_command(session, [])
    assert session.system_text() == "W\n\nO\n\nF\n"
    # After /cd to a workspace without it, the forced name is skipped with a note.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    session.drain_notes()
    session.change_directory(str(elsewhere))
    session.refresh_system()
    assert session.system_text() == "W\n\nO\n"
    assert any("'forced' is not a prompt attachment" in n and "skipped" in n for n in session.drain_notes())
    # A fork made there is not a new start: it skips the name too instead of failing.
    child = session.fork()
    assert child.system_text() == "W\n\nO\n"


def test_FL_5_flags_never_write_and_old_config_keys_are_dropped(home, workspace, mkset, mkatt, make_session, snap):
    (home / "config.json").write_text(json.dumps({"promptSet": "a", "promptAttachments": "off", "keep": 1}))
    mkset("a", {"enabled": False}, work_md="A\n")
    mkatt("b", {"enabled": False}, work_md="B\n")
    before = snap(home)
    session = make_session()
    assert session.system_text().startswith("You are Crystal")  # the old keys are ignored
    assert "\nB\n" not in session.system_text()
    forced = make_session(prompt_set="a", prompt_attachment=["b"])
    assert forced.system_text() == "A\n\nB\n"
    forced.refresh_system()
    forced.system_text()
    assert snap(home) == before
    config = load_config(home)
    config.save_preferences(approval="edit")
    assert json.loads((home / "config.json").read_text()) == {"keep": 1, "approval": "edit"}
