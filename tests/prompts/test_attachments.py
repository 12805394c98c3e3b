"""SPEC §8: prompt attachments (PA-1 … PA-9), on real folders in Home and the workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.core.errors import UserError
from crystal_kernel.plugins import hookimpl, plugin_manager
from crystal_kernel.prompts.attachments import (
    disable_attachment,
    discover_attachments,
    enable_attachment,
    enabled_in_order,
    move_attachment,
)
from crystal_kernel.prompts.commands import promptattach_command
from crystal_kernel.prompts.compose import compose
from crystal_kernel.prompts.context import PromptContext
from crystal_kernel.prompts.names import NAMED_PROMPTS
from crystal_kernel.prompts.selection import resolve_selection


def _compose(name: str, home: Path, workspace: Path, flags=None, extra=None) -> str:
    ctx = PromptContext(workspace=workspace, home=home)
    return compose(name, ctx, resolve_selection(home, workspace, flags), extra)


def _override(home: Path, name: str, text: str) -> None:
    (home / "prompts").mkdir(exist_ok=True)
    (home / "prompts" / f"{name}.md").write_text(text)


def _m(folder: Path) -> dict:
    return json.loads((folder / "prompt.json").read_text())


def test_PA_1_appended_after_bound_body_only_for_work_plan_review(home, workspace, mkatt):
    files = {n.replace(".", "_") + "_md": f"ATT-{n}\n" for n in NAMED_PROMPTS}
    mkatt("all", {"enabled": True}, **files)
    for name in NAMED_PROMPTS:
        _override(home, name, f"BODY {name} {{{{mode}}}}\n")
    for name in ("work", "plan", "review"):
        mode = {"work": "work", "plan": "plan", "review": "review"}[name]
        assert _compose(name, home, workspace) == f"BODY {name} {mode}\n\nATT-{name}\n"
    for name in ("review.user", "topic", "compaction.system", "compaction.user", "image.system", "image.user"):
        assert "ATT-" not in _compose(name, home, workspace, extra={})


def test_PA_2_files_missing_empty_and_trailing_newline(home, workspace, mkatt):
    _override(home, "work", "BODY\n")
    _override(home, "plan", "PLAN\n")
    _override(home, "review", "REVIEW\n")
    mkatt("a-one", {"enabled": True, "order": 0}, work_md="one, no newline")
    mkatt("b-two", {"enabled": True, "order": 1}, work_txt="two\n\n", plan_md="   \n")
    # a-one has no plan.md, b-two's plan.md is empty: Plan gets nothing.
    assert _compose("plan", home, workspace) == "PLAN\n"
    assert _compose("review", home, workspace) == "REVIEW\n"
    # Trailing newlines at the end of a file are kept.
    assert _compose("work", home, workspace) == "BODY\n\none, no newline\n\ntwo\n\n"
    # A UTF-8 BOM is not text; a file that is not UTF-8 is skipped with a note.
    bom = mkatt("c-bom", {"enabled": True, "order": 2})
    (bom / "review.md").write_bytes(b"\xef\xbb\xbfBOM review\n")
    bad = mkatt("d-bad", {"enabled": True, "order": 3})
    (bad / "review.md").write_bytes(b"\xff\xfe not utf-8\n")
    notes: list[str] = []
    ctx = PromptContext(workspace=workspace, home=home)
    assert compose("review", ctx, resolve_selection(home, workspace), None, notes) == "REVIEW\n\nBOM review\n"
    assert len(notes) == 1 and "d-bad" in notes[0] and "cannot be read" in notes[0]


def test_PA_3_folder_names(home, workspace, mkatt, mkset):
    for name in ("default", "a", "x" * 64, "with-hyphen-2"):
        mkatt(name, {"enabled": True}, work_md=f"{name}\n")
    for name in ("x" * 65, "Upper", "double--hyphen", "-lead", "trail-", "under_score"):
        mkatt(name, {"enabled": True}, work_md="BAD\n")
    notes: list[str] = []
    found = discover_attachments(home, workspace, notes)
    assert sorted(found) == sorted(["default", "a", "x" * 64, "with-hyphen-2"])
    assert sum("its name is not 1–64" in n for n in notes) == 6
    mkset("Bad_Set", {"enabled": True})
    sel = resolve_selection(home, workspace)
    assert sel.set_name is None and any("Bad_Set" in n for n in sel.notes)
    with pytest.raises(UserError, match="not a valid name"):
        enable_attachment(found, "Bad_Name")


def test_PA_4_discovery_home_and_workspace_root_workspace_wins_whole(home, workspace, mkatt, tmp_path):
    mkatt("shared", {"enabled": True, "order": 0, "name": "Home copy"}, work_md="HOME shared\n")
    mkatt("shared", {"enabled": False, "name": "Workspace copy"}, where="workspace", work_md="WS shared\n")
    mkatt("home-only", {"enabled": True, "order": 1}, work_md="home only\n")
    mkatt("ws-only", {"enabled": True, "order": 2}, where="workspace", plan_md="ws only\n")
    # No walk up the parents: a parent's .crystal folder is not read.
    child = workspace / "child"
    child.mkdir()
    found = discover_attachments(home, workspace, [])
    assert found["shared"].source == "workspace" and found["shared"].title == "Workspace copy"
    assert [f.name for f in enabled_in_order(found)] == ["home-only", "ws-only"]
    assert sorted(discover_attachments(home, child, [])) == ["home-only", "shared"]
    _override(home, "work", "W\n")
    assert _compose("work", home, workspace) == "W\n\nhome only\n"


def test_PA_5_order_enable_disable_up_down(home, workspace, mkatt):
    a = mkatt("a", {"enabled": True, "order": 5, "keep": "me"})
    b = mkatt("b", {"enabled": True})           # no order: sorts last
    c = mkatt("c", {"enabled": True, "order": 1})
    d = mkatt("d", {"enabled": False})
    e = mkatt("e", {"enabled": True, "order": 1})  # same order as c: folder name decides
    found = discover_attachments(home, workspace, [])
    assert [f.name for f in enabled_in_order(found)] == ["c", "e", "a", "b"]
    enable_attachment(found, "d")
    assert [_m(f).get("order") for f in (c, e, a, b, d)] == [0, 1, 2, 3, 4]
    assert _m(a) == {"enabled": True, "order": 2, "keep": "me"}
    disable_attachment(found, "e")  # no renumbering
    assert [_m(f).get("order") for f in (c, e, a, b, d)] == [0, 1, 2, 3, 4] and _m(e)["enabled"] is False
    found = discover_attachments(home, workspace, [])
    move_attachment(found, "d", -1)
    assert [f.name for f in enabled_in_order(discover_attachments(home, workspace, []))] == ["c", "a", "d", "b"]
    assert [_m(f)["order"] for f in (c, a, d, b)] == [0, 1, 2, 3]
    found = discover_attachments(home, workspace, [])
    move_attachment(found, "c", 1)
    assert [f.name for f in enabled_in_order(discover_attachments(home, workspace, []))] == ["a", "c", "d", "b"]
    with pytest.raises(UserError, match="already first"):
        move_attachment(discover_attachments(home, workspace, []), "a", -1)
    with pytest.raises(UserError, match="not enabled"):
        move_attachment(discover_attachments(home, workspace, []), "e", 1)


def test_PA_6_tokens_in_attachments_expand_with_body_values(home, workspace, mkatt):
    _override(home, "work", "body {{mode}}\n")
    mkatt("t", {"enabled": True}, work_md="att {{workspace}} {{mode}} {{product_name}}\n")
    assert _compose("work", home, workspace) == f"body work\n\natt {workspace} work Crystal\n"


class _Appender:
    def __init__(self, tag: str, rewrite: bool = False):
        self.tag, self.rewrite = tag, rewrite

    @hookimpl
    def crystal_on_prompt(self, kind, text):
        return f"{self.tag} sees {kind}, last line {text.splitlines()[-1]!r}"

    @hookimpl
    def crystal_rewrite_prompt(self, kind, text, context):
        if self.rewrite:
            return f"REWRITTEN {kind} in {context.workspace.name} ({len(text.splitlines())} lines)\n"
        return None


class _Broken:
    @hookimpl
    def crystal_on_prompt(self, kind, text, context):
        raise RuntimeError("broken plugin")


def test_PA_7_composition_order(home, workspace, mkatt):
    _override(home, "work", "BODY {{mode}}\n")
    mkatt("first", {"enabled": True, "order": 0}, work_md="ATT1\n")
    mkatt("second", {"enabled": True, "order": 1}, work_md="ATT2\n")
    pm = plugin_manager()
    pm.register(_Appender("P1"), name="p1")
    pm.register(_Broken(), name="broken")
    pm.register(_Appender("P2"), name="p2")
    notes: list[str] = []
    ctx = PromptContext(workspace=workspace, home=home)
    text = compose("work", ctx, resolve_selection(home, workspace), None, notes)
    assert text == ("BODY work\n\nATT1\n\nATT2\n\nP1 sees work, last line 'ATT2'\n\n"
                    "P2 sees work, last line \"P1 sees work, last line 'ATT2'\"")
    assert notes == ["Plugin 'broken' on_prompt failed: RuntimeError: broken plugin"]
    pm.register(_Appender("P3", rewrite=True), name="p3")
    assert _compose("work", home, workspace) == "REWRITTEN work in ws (11 lines)\n"


def test_PA_8_slash_promptattach(home, workspace, mkatt, make_session):
    _override(home, "work", "W\n")
    mkatt("style", {"name": "Style guide", "description": "Be terse", "enabled": True}, work_md="STYLE\n")
    mkatt("local", {"name": "Local rules"}, where="workspace", work_md="LOCAL\n")
    session = make_session()
    listing = promptattach_command(session, [])
    assert "style" in listing and "Style guide — Be terse" in listing and "[home, enabled, work]" in listing
    assert "Local rules" in listing and "[workspace, disabled, work]" in listing
    assert session.system_text() == "W\n\nSTYLE\n"
    assert "enabled" in promptattach_command(session, ["enable", "local"])
    assert session.system_text() == "W\n\nSTYLE\n\nLOCAL\n"  # system message replaced
    session.busy = True
    with pytest.raises(UserError, match="while a turn is running"):
        promptattach_command(session, ["disable", "style"])
    assert "Style guide" in promptattach_command(session, [])
    session.busy = False
    with pytest.raises(UserError, match="Usage"):
        promptattach_command(session, ["sideways", "style"])


def test_PA_9_cli_prompt_attachments_and_session_edits_winner(home, workspace, mkatt, make_session, snap):
    h = mkatt("dup", {"enabled": False, "x": 1}, work_md="home dup\n")
    w = mkatt("dup", {"enabled": False, "y": 2}, where="workspace", work_md="ws dup\n")
    mkatt("solo", {"enabled": True, "order": 0})

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "prompt-attachments", *args,
                               "--home", str(home), "--workspace", str(workspace)],
                              capture_output=True, text=True, timeout=60)

    listing = json.loads(run("list", "--format", "json").stdout)
    assert [(r["name"], r["source"]) for r in listing["attachments"]] == [("solo", "home"), ("dup", "workspace")]
    assert run("enable", "dup", "--source", "home").returncode == 0
    assert _m(h) == {"enabled": True, "x": 1, "order": 1} and _m(w) == {"enabled": False, "y": 2}
    home_list = json.loads(run("list", "--source", "home", "--format", "json").stdout)
    assert {r["name"]: r["source"] for r in home_list["attachments"]} == {"dup": "home", "solo": "home"}
    shown = run("show", "dup")
    assert "Prompt attachment dup (workspace, disabled)" in shown.stdout
    # The session edits the winning (workspace) folder.
    session = make_session()
    promptattach_command(session, ["enable", "dup"])
    assert _m(w) == {"enabled": True, "y": 2, "order": 1}
    assert run("up", "dup", "--source", "project").returncode == 2  # alone in the project view: already first
    assert run("up", "dup").returncode == 0
    assert _m(w)["order"] == 0
    before = snap(home), snap(workspace)
    for args in (("enable", "ghost"), ("enable", "dup", "--source", "elsewhere"), ("show",), ("down", "solo")):
        result = run(*args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
    assert (snap(home), snap(workspace)) == before
