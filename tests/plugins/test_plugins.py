"""Plugins (SPEC §10): entry-point discovery, in-process tool sets under the external
rules (naming, catalogs, MODE-3 floor), and a plugin that raises never takes the
session down. Plugins here are installed-like packages (see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import PathFinder
from pathlib import Path

from crystal_kernel import plugins
from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.tool_sources import PluginTool, discover_external_tools
from crystal_kernel.tools.base import Authority, Risk, ToolContext

SHOUT = '''
from crystal_kernel.plugins import hookimpl
from crystal_kernel.tools.base import Risk, Tool, ToolInput, ToolResult


class ShoutInput(ToolInput):
    text: str


class ShoutTool(Tool):
    """Repeat the text in capitals."""

    name = "shout"
    Input = ShoutInput
    risk = Risk.READ
    catalogs = {"plan", "work"}

    async def run(self, args, ctx):
        return ToolResult(ok=True, text=args.text.upper() + " in " + ctx.workspace.name)


class CrashTool(Tool):
    """Always fails with a bug."""

    name = "crash"

    async def run(self, args, ctx):
        raise ZeroDivisionError("division by zero")


@hookimpl
def crystal_tools(context):
    return [ShoutTool(), CrashTool()]


@hookimpl
def crystal_placeholders():
    return {"team": lambda context: "the shouting team"}
'''

BROKEN_TOOLS = '''
from crystal_kernel.plugins import hookimpl

@hookimpl
def crystal_tools(context):
    raise RuntimeError("cannot list tools today")
'''


def ctx_for(workspace: Path, home: Path) -> ToolContext:
    """A context built from the documented parts alone (docs/plugins.md), as a plugin's
    own tests would: no session anywhere."""
    return ToolContext(access=AccessRules(workspace), config=Config(home=home), interaction=NoPerson(),
                       session_id="s1", approval="default")


def test_entry_point_plugin_is_loaded(install_plugin):
    install_plugin("shout", SHOUT)
    manager = plugins.plugin_manager()
    assert "shout" in [name for name, _ in manager.list_name_plugin()]
    assert plugins.load_notes() == []


async def test_plugin_tool_follows_external_rules(install_plugin, workspace, private_home):
    install_plugin("shout", SHOUT)
    tools, notes = await discover_external_tools(private_home, workspace, context="the session")
    by_name = {t.name: t for t in tools}
    assert notes == []
    shout = by_name["shout"]
    assert isinstance(shout, PluginTool) and shout.external is True
    assert shout.catalogs == {"plan", "work"} and by_name["crash"].catalogs == {"work"}
    assert shout.spec().description == "Repeat the text in capitals."
    assert shout.spec().input_schema["required"] == ["text"]
    ctx = ctx_for(workspace, private_home)
    args = shout.parse({"text": "hi"})
    # MODE-3: the plugin says READ; the host floor is WRITE + WORKSPACE, external.
    c = shout.classify(args, ctx)
    assert (c.risk, c.authority, c.external) == (Risk.WRITE, Authority.WORKSPACE, True)
    result = await shout.run(args, ctx)
    assert result.ok and result.text == "HI in ws"


async def test_plugin_tool_bug_is_a_failed_result(install_plugin, workspace, private_home):
    install_plugin("shout", SHOUT)
    tools, _ = await discover_external_tools(private_home, workspace)
    crash = {t.name: t for t in tools}["crash"]
    try:
        await crash.run(crash.parse({}), ctx_for(workspace, private_home))
    except ToolError as exc:
        assert str(exc) == ("The plugin tool crash (shout) failed: ZeroDivisionError: division by zero")
    else:
        raise AssertionError("expected a ToolError")
    bad_args = None
    try:
        crash.parse({"unexpected": 1})
    except ToolError as exc:
        bad_args = str(exc)
    assert bad_args and bad_args.startswith("Invalid arguments for crash")


def test_raising_plugin_is_a_note_and_others_still_load(install_plugin, workspace, private_home):
    install_plugin("broken", BROKEN_TOOLS)
    install_plugin("shout", SHOUT)
    tools, notes = run_to_completion(discover_external_tools(private_home, workspace))
    assert sorted(t.name for t in tools) == ["crash", "shout"]
    assert notes == ["Plugin 'broken' failed in crystal_tools: RuntimeError: cannot list tools today"]


def test_plugin_that_cannot_be_imported_is_a_note(install_plugin, workspace, private_home):
    install_plugin("badimport", "raise ImportError('missing dependency: frobnicate')\n")
    install_plugin("shout", SHOUT)
    tools, notes = run_to_completion(discover_external_tools(private_home, workspace))
    assert sorted(t.name for t in tools) == ["crash", "shout"]
    assert notes == ["Plugin 'badimport' could not be loaded: missing dependency: frobnicate"]


def test_plugin_names_reserved_invalid_and_clashing(install_plugin, workspace, private_home):
    install_plugin("names", '''
        from crystal_kernel.plugins import hookimpl
        from crystal_kernel.tools.base import Tool

        def make(tool_name, catalogs=None, kind="json"):
            cls = type("T", (Tool,), {"name": tool_name, "__doc__": "x", "input_kind": kind})
            tool = cls()
            if catalogs is not None:
                tool.catalogs = catalogs
            return tool

        @hookimpl
        def crystal_tools(context):
            return [make("read"), make("Bad-Name"), make("from_set"), make("weird", {"everywhere"}),
                    make("texty", kind="text"), "not a tool", make("fine")]
        ''')
    folder = private_home / "tools" / "s"
    folder.mkdir(parents=True)
    (folder / "tools.json").write_text(json.dumps({"command": ["true"], "tools": [{"name": "from_set"}]}))
    tools, notes = run_to_completion(discover_external_tools(private_home, workspace))
    assert [t.name for t in tools] == ["from_set", "fine"]
    assert notes == [
        "Plugin 'names' tool weird: catalogs must be plan and/or work, not ['everywhere']; skipped.",
        "Plugin 'names' returned str from crystal_tools, not a Tool with a name; skipped.",
        "Tool 'read' from plugin 'names' refused: the name belongs to a built-in tool.",
        "Tool 'Bad-Name' from plugin 'names' refused: names must match ^[a-z][a-z0-9_]{0,63}$.",
        f"Tool 'from_set' from plugin 'names' refused: the name is already taken by {folder / 'tools.json'}.",
        "Tool 'texty' from plugin 'names' skipped: it declares text input, and tool input is JSON only.",
    ]


def test_call_each_runs_in_load_order_and_isolates_failures(install_plugin):
    install_plugin("first", '''
        from crystal_kernel.plugins import hookimpl
        @hookimpl
        def crystal_on_prompt(kind, text, context):
            return "first:" + kind
        ''')
    install_plugin("second", '''
        from crystal_kernel.plugins import hookimpl
        @hookimpl
        def crystal_on_prompt(kind, text, context):
            raise ValueError("oops")
        ''')
    install_plugin("third", '''
        from crystal_kernel.plugins import hookimpl
        @hookimpl
        def crystal_on_prompt(kind, text, context):
            return "third:" + text
        ''')
    notes: list[str] = []
    answers = plugins.call_each("crystal_on_prompt", notes, kind="work", text="body", context=None)
    assert answers == [("first", "first:work"), ("third", "third:body")]
    assert notes == ["Plugin 'second' failed in crystal_on_prompt: ValueError: oops"]


def test_plugins_list_command(install_plugin, site, workspace):
    install_plugin("shout", SHOUT)
    env = dict(os.environ, PYTHONPATH=str(site))
    crystal = str(Path(sys.executable).parent / "crystal")
    result = subprocess.run([crystal, "plugins", "list", "--format", "json"], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {"name": "shout", "hooks": ["crystal_placeholders", "crystal_tools"]} in data["plugins"]
    listed = subprocess.run([crystal, "tools", "list", "--format", "json"], cwd=workspace, env=env,
                            capture_output=True, text=True, timeout=60)
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert names == ["shout", "crash"]
    called = subprocess.run([crystal, "tools", "call", "shout", "--args", '{"text": "hey"}'], cwd=workspace,
                            env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(called.stdout) == {"ok": True, "text": "HEY in ws", "images": []}


PROMPT_PLUGIN = '''
from crystal_kernel.plugins import hookimpl

@hookimpl
def crystal_on_prompt(kind, text, context):
    return "Team rule from a plugin: answer in haiku (" + kind + " mode, " + context.workspace.name + ")."

@hookimpl
def crystal_rewrite_prompt(kind, text, context):
    return None  # keep the composed text
'''

RAISING_PROMPT_PLUGIN = '''
from crystal_kernel.plugins import hookimpl

@hookimpl
def crystal_on_prompt(kind, text, context):
    raise KeyError("no such team")
'''


def test_installed_plugin_shapes_a_real_session(install_plugin, workspace):
    """PA-7 through the real Session: one plugin appends, one raises (a note, no crash)."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.session import Session
    from crystal_kernel.testing.scripted import ScriptedProvider

    install_plugin("haiku", PROMPT_PLUGIN)
    install_plugin("broken", RAISING_PROMPT_PLUGIN)
    install_plugin("shout", SHOUT)
    session = Session(workspace=workspace, config=load_config(overrides={"mode": "plan"}),
                      provider=ScriptedProvider([]), person_present=False)
    text = session.system_text()
    assert text.rstrip().endswith("Team rule from a plugin: answer in haiku (plan mode, ws).")
    names = [t.name for t in run_to_completion(session.prepare_tools())]
    assert "shout" in names and "crash" not in names  # crash is Work-only
    notes = session.drain_notes()
    assert any("broken" in n and "no such team" in n for n in notes)


def test_raising_provider_plugin_does_not_break_provider_lookup(install_plugin):
    install_plugin("badprov", '''
        from crystal_kernel.plugins import hookimpl
        @hookimpl
        def crystal_providers():
            raise RuntimeError("no providers today")
        ''')
    install_plugin("goodprov", '''
        from crystal_kernel.plugins import hookimpl
        @hookimpl
        def crystal_providers():
            return {"echo-model": lambda config: None}
        ''')
    from crystal_kernel.providers.registry import known_providers

    assert "echo-model" in known_providers()


def test_plugins_list_takes_home_like_the_prompt_set_commands_PS9(install_plugin, site, workspace, tmp_path):
    """`crystal plugins list --home DIR` as `crystal promptsets list --home DIR`."""
    install_plugin("shout", SHOUT)
    env = dict(os.environ, PYTHONPATH=str(site))
    crystal = str(Path(sys.executable).parent / "crystal")
    other = tmp_path / "other-home"
    other.mkdir()
    result = subprocess.run([crystal, "plugins", "list", "--home", str(other), "--format", "json"], cwd=workspace,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["home"] == str(other)
    assert {"name": "shout", "hooks": ["crystal_placeholders", "crystal_tools"]} in data["plugins"]
    text = subprocess.run([crystal, "plugins", "list", "--home", str(other)], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "shout: crystal_placeholders, crystal_tools" in text.stdout.splitlines()
    missing = subprocess.run([crystal, "plugins", "list", "--home", str(tmp_path / "nope")], cwd=workspace,
                             env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr == f"crystal: --home '{tmp_path / 'nope'}' is not a folder.\n"


def test_the_quick_entry_point_check_finds_what_importlib_metadata_finds(install_plugin):
    """Start to first request (docs/benchmarks.md): plugins.declares_entry_points reads entry_points.txt files raw instead of
    building every distribution; it must never say no where importlib.metadata finds the
    group (a plugin would be silently left out), here for an installed-like plugin and
    for the groups of the real environment. (It may say yes where there is none: "True
    when unsure", and other workers of make test install plugins into the same venv.)"""
    from importlib.metadata import entry_points

    install_plugin("quick", "from crystal_kernel.plugins import hookimpl\n")
    assert plugins.declares_entry_points("crystal_kernel.plugins")
    for group in ("console_scripts", "pydantic", "crystal_kernel.plugins", "no.such.group"):
        if entry_points(group=group):
            assert plugins.declares_entry_points(group), group


def test_the_quick_entry_point_check_says_no_for_a_group_nobody_declares(tmp_path, monkeypatch):
    """The quick check's "no": a path holding only distributions that declare other groups
    (the real venv cannot be used: other make test workers install plugins into it, and an
    editable install's finder makes the check unsure, which answers yes)."""
    dist = tmp_path / "someone-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: someone\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[some.group]\nname = someone:thing\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not hasattr(f, "find_distributions")
                                           or f is PathFinder])
    assert plugins.declares_entry_points("some.group")
    assert not plugins.declares_entry_points("no.such.group")
