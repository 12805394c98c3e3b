"""SPEC §7: prompt sets (PS-1 … PS-9), on real folders under a private Home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.errors import UserError
from crystal_kernel.prompts.commands import promptset_command
from crystal_kernel.prompts.compose import compose
from crystal_kernel.prompts.context import PromptContext
from crystal_kernel.prompts.names import NAMED_PROMPTS
from crystal_kernel.prompts.promptsets import (
    builtin_text,
    disable_sets,
    discover_sets,
    enable_set,
    resolve_prompt,
)
from crystal_kernel.prompts.selection import resolve_selection


def _work(home: Path, workspace: Path, flags=None) -> str:
    ctx = PromptContext(workspace=workspace, home=home)
    return compose("work", ctx, resolve_selection(home, workspace, flags))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "prompt.json").read_text())


def crystal(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crystal_kernel.cli", *args, "--home", str(home)],
                          capture_output=True, text=True, timeout=60)


def test_PS_1_sets_are_home_only_folders_with_named_files(home, workspace, mkset):
    mkset("team", {"enabled": True}, work_txt="Team work text\n", review_user_md="RU {{tool_name}}\n")
    # A set-looking folder in the workspace is never scanned.
    ws_set = workspace / ".crystal" / "promptsets" / "local"
    ws_set.mkdir(parents=True)
    (ws_set / "prompt.json").write_text('{"enabled": true}')
    (ws_set / "work.md").write_text("WORKSPACE SET\n")
    assert list(discover_sets(home, [])) == ["team"]
    assert _work(home, workspace) == "Team work text\n"  # .txt accepted
    sel = resolve_selection(home, workspace)
    assert resolve_prompt("review.user", home, workspace, sel.set_folder, []).text == "RU {{tool_name}}\n"
    assert resolve_prompt("plan", home, workspace, sel.set_folder, []).source == "built-in"


def test_PS_2_default_is_virtual_and_missing_or_empty_files_fall_back(home, workspace, mkset):
    mkset("default", {"enabled": True}, work_md="not a set\n")
    mkset("thin", {"enabled": True}, work_md="  \n\n", plan_md="Thin plan\n")
    notes: list[str] = []
    sets = discover_sets(home, notes)
    assert list(sets) == ["thin"]
    assert any("'default' is reserved" in n for n in notes)
    sel = resolve_selection(home, workspace)
    assert sel.set_name == "thin"
    # Empty work.md and missing review.md fall back to the built-in prompts.
    assert resolve_prompt("work", home, workspace, sel.set_folder, []).text == builtin_text("work")
    assert resolve_prompt("review", home, workspace, sel.set_folder, []).source == "built-in"
    assert resolve_prompt("plan", home, workspace, sel.set_folder, []).text == "Thin plan\n"


def test_PS_3_direct_overrides_need_no_manifest(home, workspace):
    (home / "prompts").mkdir()
    (home / "prompts" / "plan.md").write_text("Home plan\n")
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    (workspace / ".crystal" / "prompts" / "work.txt").write_text("Workspace work\n")
    sel = resolve_selection(home, workspace)
    assert sel.set_name is None
    assert resolve_prompt("plan", home, workspace, None, []).text == "Home plan\n"
    assert _work(home, workspace) == "Workspace work\n"
    assert not (home / "prompts" / "prompt.json").exists()


def test_PS_4_manifest_rules(home, workspace, mkset, snap):
    mkset("long-title", {"enabled": True, "name": "x" * 81})
    mkset("long-desc", {"enabled": True, "description": "d" * 281})
    mkset("ok", {"name": "t" * 80, "description": "d" * 280, "owner": "me", "tags": [1, 2]},
          work_md="OK set\n")
    mkset("not-on", {"name": "Off"}, work_md="off\n")
    broken = mkset("broken", '{"enabled": tru', work_md="broken\n")
    mkset("no-manifest", None, work_md="x\n").joinpath("prompt.json").unlink(missing_ok=True)
    notes: list[str] = []
    sets = discover_sets(home, notes)
    assert sorted(sets) == ["not-on", "ok"]
    assert sum("Skipped the prompt set" in n for n in notes) == 4
    assert any("'name' must be text of at most 80 characters" in n for n in notes)
    assert any("'description' must be text of at most 280 characters" in n for n in notes)
    # enabled omitted means off: the built-in text is used.
    assert _work(home, workspace).startswith("You are Crystal")
    assert resolve_selection(home, workspace).set_name is None
    # Unknown fields survive a write.
    enable_set(home, "ok")
    assert _manifest(home / "promptsets" / "ok") == {
        "name": "t" * 80, "description": "d" * 280, "owner": "me", "tags": [1, 2], "enabled": True}
    # Commands never create missing folders or manifests and leave corrupt ones untouched.
    before = snap(home)
    for bad in ("missing", "broken", "no-manifest"):
        with pytest.raises(UserError):
            enable_set(home, bad)
    disable_sets(home, "ok")
    after = snap(home)
    assert after["promptsets/broken/prompt.json"] == before["promptsets/broken/prompt.json"]
    assert not (home / "promptsets" / "missing").exists()
    assert not (home / "promptsets" / "no-manifest" / "prompt.json").exists()
    assert broken.joinpath("prompt.json").read_text() == '{"enabled": tru'


def test_PS_5_at_most_one_enabled(home, workspace, mkset):
    a = mkset("a", {"enabled": True}, work_md="A\n")
    b = mkset("b", {"enabled": False}, work_md="B\n")
    c = mkset("c", {}, work_md="C\n")
    enable_set(home, "b")
    assert [_manifest(f).get("enabled") for f in (a, b, c)] == [False, True, None]
    assert _work(home, workspace) == "B\n"
    # Disabling the current set clears every enabled flag.
    disable_sets(home, "b")
    assert [_manifest(f).get("enabled") for f in (a, b, c)] == [False, False, None]
    assert resolve_selection(home, workspace).set_name is None
    # Hand-edited conflict: none is used, the session notes it and stays on default.
    (a / "prompt.json").write_text('{"enabled": true}')
    (c / "prompt.json").write_text('{"enabled": true}')
    sel = resolve_selection(home, workspace)
    assert sel.set_name is None and sel.set_label == "default"
    assert any("a, c are all enabled" in n for n in sel.notes)
    assert _work(home, workspace).startswith("You are Crystal")
    # /promptset default clears every flag.
    enable_set(home, "default")
    assert [_manifest(f).get("enabled") for f in (a, b, c)] == [False, False, False]


def test_PS_6_precedence(home, workspace, mkset):
    files = {n.replace(".", "_") + "_md": f"set {n}\n" for n in NAMED_PROMPTS}
    mkset("s", {"enabled": True}, **files)
    sel = resolve_selection(home, workspace)
    (home / "prompts").mkdir()
    ws_prompts = workspace / ".crystal" / "prompts"
    ws_prompts.mkdir(parents=True)
    for name in NAMED_PROMPTS:
        assert resolve_prompt(name, home, workspace, None, []).source == "built-in"
        assert resolve_prompt(name, home, workspace, sel.set_folder, []).text == f"set {name}\n"
        (home / "prompts" / f"{name}.md").write_text(f"home {name}\n")
        assert resolve_prompt(name, home, workspace, sel.set_folder, []).text == f"home {name}\n"
        (ws_prompts / f"{name}.md").write_text(f"ws {name}\n")
        assert resolve_prompt(name, home, workspace, sel.set_folder, []).text == f"ws {name}\n"
    # Instructions, the skill bootstrap and the env block are not set members.
    with pytest.raises(UserError):
        resolve_prompt("instructions", home, workspace, sel.set_folder, [])
    # A replaced compaction.user may omit {{output_template}}.
    ctx = PromptContext(workspace=workspace, home=home)
    assert compose("compaction.user", ctx, sel, {"output_template": "FORMAT"}) == "ws compaction.user\n"


def test_PS_7_slash_promptset_lists_and_switches(home, workspace, mkset, make_session):
    mkset("terse", {"name": "Terse", "description": "Short answers"}, work_md="Terse work\n",
          review_md="Terse review\n")
    session = make_session()
    listing = promptset_command(session, [])
    assert "terse" in listing and "Terse — Short answers" in listing
    assert "Work: built-in" in listing and "Review: built-in" in listing
    assert session.system_text().startswith("You are Crystal")
    assert promptset_command(session, ["terse"]) == "Prompt set 'terse' is enabled."
    assert _manifest(home / "promptsets" / "terse")["enabled"] is True
    # The active system message was replaced; config.json was not written.
    assert session.system_text() == "Terse work\n"
    assert not (home / "config.json").exists()
    listing = promptset_command(session, [])
    assert "Work: prompt set 'terse'" in listing and "Plan: built-in" in listing
    assert "Selected: terse (enabled in prompt.json)" in listing
    promptset_command(session, ["default"])
    assert session.system_text().startswith("You are Crystal")
    session.busy = True
    with pytest.raises(UserError, match="while a turn is running"):
        promptset_command(session, ["terse"])
    assert "terse" in promptset_command(session, [])  # listing still works


def test_PS_8_forced_set_refuses_switch_and_resume_uses_manifest(home, workspace, mkset, make_session, snap):
    mkset("a", {"enabled": True}, work_md="A\n")
    mkset("b", {}, work_md="B\n")
    forced = make_session(prompt_set="b")
    assert forced.system_text() == "B\n"
    before = snap(home)
    for target in ("a", "default"):
        with pytest.raises(UserError, match="--prompt-set b"):
            promptset_command(forced, [target])
    assert snap(home) == before
    # A session started later (resume, fork) follows the enabled manifest, not a stored selection.
    plain = make_session()
    assert plain.system_text() == "A\n"
    enable_set(home, "b")
    assert make_session().system_text() == "B\n"


def test_PS_9_cli_promptsets(home, mkset, snap):
    mkset("alpha", {"name": "Alpha", "extra": 1}, work_md="alpha\n")
    mkset("beta", {"enabled": True})
    out = crystal("promptsets", "list", "--format", "json", home=home)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [s["name"] for s in data["sets"]] == ["alpha", "beta"] and data["selected"] == "beta"
    assert crystal("promptsets", "enable", "alpha", home=home).returncode == 0
    assert _manifest(home / "promptsets" / "alpha") == {"name": "Alpha", "extra": 1, "enabled": True}
    assert _manifest(home / "promptsets" / "beta") == {"enabled": False}
    shown = crystal("promptsets", "show", "alpha", home=home)
    assert "Prompt set alpha (enabled)" in shown.stdout and "Prompts: work" in shown.stdout
    text = crystal("promptsets", "list", home=home).stdout
    assert "* alpha" in text and "Selected: alpha" in text
    assert crystal("promptsets", "disable", home=home).returncode == 0
    assert _manifest(home / "promptsets" / "alpha")["enabled"] is False
    # There is no --source flag; bad input is one line on stderr, exit 2, nothing changed.
    before = snap(home)
    for args in (("list", "--source", "home"), ("enable", "nope"), ("enable", "Bad_Name"), ("show",)):
        result = crystal("promptsets", *args, home=home)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    assert snap(home) == before
