"""Discovery of exec tool sets (SPEC §11 manifest, MODE-3, MODE-6, MODE-7 reserved names)."""

from __future__ import annotations

import json
from pathlib import Path

from exec_support import PY, call, home_set, load, write_set

from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.tool_sources import discover_external_tools
from crystal_kernel.tools.base import Authority, Risk
from crystal_kernel.tools.catalog import CatalogOptions, build_catalog
from crystal_kernel.tools.exec_sets import ExecTool

ECHO = [PY, "-c", "import json,sys; print(json.dumps({'text': sys.stdin.read()}))"]


def ws_set(workspace: Path, name: str, manifest: dict) -> Path:
    """A workspace set the person has trusted (TRUST-2; tests/security covers untrusted ones)."""
    from crystal_kernel.core.paths import home_dir
    from crystal_kernel.core.trust import trust_all

    folder = write_set(workspace / ".crystal" / "tools", name, manifest)
    trust_all(home_dir(), workspace)
    return folder


def test_defaults_from_the_manifest(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "plain", "description": "Says hi."}]})
    tools, notes = load(home, workspace)
    tool = tools["plain"]
    assert notes == []
    assert isinstance(tool, ExecTool) and tool.external is True
    assert tool.catalogs == {"work"}
    assert tool.manifest.stdin is True and tool.manifest.output == "content"
    assert tool.manifest.timeout == 60
    spec = tool.spec()
    assert (spec.name, spec.description, spec.input_kind) == ("plain", "Says hi.", "json")
    assert spec.input_schema == {"type": "object", "properties": {}}


def test_home_and_workspace_sets_both_load_home_first(home, workspace):
    home_set(home, "h", {"command": ECHO, "tools": [{"name": "from_home"}]})
    ws_set(workspace, "w", {"command": ECHO, "tools": [{"name": "from_ws", "catalogs": ["plan", "work"]}]})
    tools, notes = run_to_completion(discover_external_tools(home, workspace))
    assert [t.name for t in tools] == ["from_home", "from_ws"] and notes == []
    assert tools[1].catalogs == {"plan", "work"}
    assert tools[1].tool_set.source == "project"


def test_clash_between_sets_refused_with_note_rest_loads(home, workspace):
    home_set(home, "a", {"command": ECHO, "tools": [{"name": "shared"}, {"name": "only_a"}]})
    ws_set(workspace, "b", {"command": ECHO, "tools": [{"name": "shared"}, {"name": "only_b"}]})
    tools, notes = run_to_completion(discover_external_tools(home, workspace))
    assert [t.name for t in tools] == ["shared", "only_a", "only_b"]
    assert tools[0].tool_set.name == "a"
    assert len(notes) == 1
    assert "Tool 'shared' from" in notes[0] and str(workspace / ".crystal/tools/b/tools.json") in notes[0]
    assert "already taken by" in notes[0] and str(home / "tools/a/tools.json") in notes[0]


def test_reserved_builtin_names_refused_even_if_disabled(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "bash"}, {"name": "view_image"}, {"name": "mine"}]})
    tools, notes = load(home, workspace)
    assert list(tools) == ["mine"]
    assert len(notes) == 2 and all("belongs to a built-in tool" in n for n in notes)


def test_invalid_names_refused(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "Bad"}, {"name": "9lives"}, {"name": "x" * 65},
                                                    {"name": "good_1"}]})
    tools, notes = load(home, workspace)
    assert list(tools) == ["good_1"]
    assert len(notes) == 3 and all("must match ^[a-z][a-z0-9_]{0,63}$" in n for n in notes)


def test_invalid_manifest_skipped_with_note_naming_file(home, workspace):
    folder = home / "tools" / "broken"
    folder.mkdir(parents=True)
    (folder / "tools.json").write_text("{not json")
    home_set(home, "fine", {"command": ECHO, "tools": [{"name": "fine"}]})
    home_set(home, "notools", {"command": ECHO})
    tools, notes = load(home, workspace)
    assert list(tools) == ["fine"]
    assert notes[0] == f"Exec tool set {folder / 'tools.json'} is not valid JSON (line 1: Expecting property name enclosed in double quotes); skipped."
    assert str(home / "tools/notools/tools.json") in notes[1] and "tools: Field required" in notes[1]


def test_invalid_tool_skipped_others_load(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [
        {"name": "t1", "output": "html"},
        {"name": "t2", "timeoutSeconds": -1},
        {"name": "t3", "catalogs": ["review"]},
        {"name": "t4", "argv": {"a": 3}},
        {"name": "t5", "inputSchema": {"type": "array"}},
        {"name": "t6", "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}},
        "not an object",
        {"name": "ok"}]})
    tools, notes = load(home, workspace)
    assert list(tools) == ["ok"]
    assert len(notes) == 7
    manifest = str(home / "tools/s/tools.json")
    assert all(n.startswith(f"Exec tool set {manifest}: ") and n.endswith("that tool was skipped.") for n in notes)
    assert "tool 't1': output:" in notes[0]
    assert 'timeoutSeconds: must be a positive number of seconds or "unlimited"' in notes[1]
    assert "tool 't5': inputSchema: must describe an object" in notes[4]
    assert "is not a valid JSON schema" in notes[5]
    assert "tools[6] must be an object" in notes[6]


def test_folder_without_manifest_noted(home, workspace):
    (home / "tools" / "empty").mkdir(parents=True)
    tools, notes = load(home, workspace)
    assert tools == {} and notes == [f"Exec tool set folder {home / 'tools' / 'empty'} has no tools.json; skipped."]


def test_tool_without_any_command_refused(home, workspace):
    home_set(home, "s", {"tools": [{"name": "nothing"}, {"name": "own", "command": ["/bin/echo"]}]})
    tools, notes = load(home, workspace)
    assert list(tools) == ["own"]
    assert "has no command and the set has no command either" in notes[0]


def test_text_input_kind_skipped_with_note(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "freeform", "inputKind": "text"}, {"name": "j"}]})
    tools, notes = load(home, workspace)
    assert list(tools) == ["j"]
    assert notes == [f"Tool 'freeform' from {home / 'tools/s/tools.json'} skipped: it declares text input, "
                     "and tool input is JSON only."]


def test_unknown_manifest_fields_accepted_and_file_untouched(home, workspace):
    manifest = {"command": ECHO, "version": 3, "tools": [{"name": "t", "icon": "x.svg"}]}
    folder = home_set(home, "s", manifest)
    before = (folder / "tools.json").read_bytes()
    tools, notes = load(home, workspace)
    assert list(tools) == ["t"] and notes == []
    assert (folder / "tools.json").read_bytes() == before


def test_mode3_classification_floor(home, workspace, ctx):
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "t", "catalogs": ["plan"]}]})
    tools, _ = load(home, workspace)
    c = tools["t"].classify(tools["t"].parse({}), ctx)
    assert (c.risk, c.authority, c.external) == (Risk.WRITE, Authority.WORKSPACE, True)


def test_catalog_membership_by_mode(home, workspace):
    home_set(home, "s", {"command": ECHO, "tools": [
        {"name": "plan_only", "catalogs": ["plan"]}, {"name": "both", "catalogs": ["plan", "work"]},
        {"name": "work_only"}]})
    tools, _ = run_to_completion(discover_external_tools(home, workspace))
    for mode, expected in (("plan", ["plan_only", "both"]), ("work", ["both", "work_only"])):
        external = [t for t in tools if mode in t.catalogs]
        catalog = build_catalog(CatalogOptions(mode=mode), external=external)
        assert [t.name for t in catalog if t.external] == expected


async def test_arguments_checked_against_input_schema(home, workspace, ctx):
    schema = {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}},
              "required": ["size"], "additionalProperties": False}
    home_set(home, "s", {"command": ECHO, "tools": [{"name": "t", "inputSchema": schema}]})
    tools, _ = load(home, workspace)
    bad = await call(tools["t"], {"size": 0, "other": 1}, ctx)
    assert not bad.ok and bad.text.startswith("Invalid arguments for t: ")
    assert "0 is less than the minimum of 1" in bad.text and "Additional properties are not allowed ('other' unexpected)" in bad.text
    missing = await call(tools["t"], {}, ctx)
    assert not missing.ok and "'size' is a required property" in missing.text
    good = await call(tools["t"], {"size": 4}, ctx)
    assert good.ok and json.loads(good.text) == {"size": 4}
