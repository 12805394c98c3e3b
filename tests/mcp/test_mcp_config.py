"""mcp.json rules: invalid entries skipped with a note naming the file, `${VAR}`,
workspace over Home, name normalisation and clashes."""

from __future__ import annotations

import json

from mcp_support import session_for, stdio_entry, write_config

from crystal_kernel.core.trust import TrustStore
from crystal_kernel.mcp.config import load_servers, read_file, tool_name
from crystal_kernel.tools.base import Authority, Risk


def test_invalid_entries_are_skipped_with_notes_and_the_rest_load(home, workspace):
    path = write_config(home / "mcp.json", {
        "good": {"command": "srv", "args": ["--x"], "env": {"A": "1"}},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X": "y"}, "catalogs": ["plan", "work"]},
        "both": {"command": "a", "url": "http://x"},
        "neither": {"args": []},
        "args": {"command": "a", "args": "not a list"},
        "cats": {"command": "a", "catalogs": ["review"]},
        "sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "slow": {"command": "a", "timeoutSeconds": -1},
        "off": {"command": "a", "disabled": True},
        "notobj": 3,
    })
    notes: list[str] = []
    servers = load_servers(home, workspace, notes)
    assert [s.name for s in servers] == ["good", "web"]
    assert servers[0].transport == "stdio" and servers[0].args == ("--x",) and servers[0].env == (("A", "1"),)
    assert servers[1].transport == "http" and servers[1].catalogs == frozenset({"plan", "work"})
    assert len(notes) == 7 and all(str(path) in n and n.endswith("skipped.") for n in notes)
    assert any("'both'" in n and "exactly one of" in n for n in notes)
    assert any("'sse'" in n and "not SSE" in n for n in notes)


def test_broken_files_leave_a_note_and_change_nothing(home, workspace):
    (home / "mcp.json").write_text("{not json", encoding="utf-8")
    (workspace / ".crystal").mkdir()
    (workspace / ".crystal" / "mcp.json").write_text(json.dumps({"servers": {}}), encoding="utf-8")
    TrustStore(home).trust("mcp", workspace / ".crystal" / "mcp.json")  # read once trusted (TRUST-2)
    notes: list[str] = []
    assert load_servers(home, workspace, notes) == []
    assert "is not valid JSON" in notes[0] and str(home / "mcp.json") in notes[0]
    assert "has no \"mcpServers\" object" in notes[1]
    assert (home / "mcp.json").read_text() == "{not json"


def test_variables_expand_and_unset_ones_refuse_the_entry(tmp_path):
    path = write_config(tmp_path / "mcp.json", {
        "a": {"url": "http://127.0.0.1:${PORT}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "b": {"command": "srv", "env": {"MODE": "${MODE:-fast}"}},
        "c": {"command": "srv", "args": ["${MISSING}"]},
    })
    notes: list[str] = []
    servers = read_file(path, notes, environ={"PORT": "8931", "TOKEN": "s3cret"})
    assert servers[0].url == "http://127.0.0.1:8931/mcp"
    assert servers[0].headers == (("Authorization", "Bearer s3cret"),)
    assert servers[1].env == (("MODE", "fast"),)
    assert notes == [f"MCP server 'c' in {path} uses ${{MISSING}} in \"args\", which is not set; skipped."]


def test_workspace_entry_replaces_the_home_entry(home, workspace):
    write_config(home / "mcp.json", {"x": {"command": "home-srv"}, "h": {"command": "only-home"}})
    write_config(workspace / ".crystal" / "mcp.json", {"x": {"command": "ws-srv"}})
    servers = {s.name: s for s in load_servers(home, workspace, [])}
    assert servers["x"].command == "ws-srv" and servers["h"].command == "only-home"


def test_risk_overrides_only_raise_the_floor(tmp_path):
    path = write_config(tmp_path / "mcp.json", {
        "s": {"command": "srv", "risk": "read", "tools": {"rm": {"risk": "execute", "authority": "outside-workspace"},
                                                         "ls": {"risk": "read"}}},
    })
    notes: list[str] = []
    server = read_file(path, notes)[0]
    assert server.risk == Risk.WRITE
    assert server.override("rm").risk == Risk.EXECUTE and server.override("rm").authority == Authority.OUTSIDE
    assert server.override("ls").risk == Risk.WRITE and server.override("other").risk == Risk.WRITE
    assert len(notes) == 2 and all("would lower the external floor" in n for n in notes)


def test_tool_names_are_normalised():
    assert tool_name("GitHub", "create-issue") == "github_create_issue"
    assert tool_name("my server", "Read.File") == "my_server_read_file"
    assert tool_name("1db", "q") == "mcp_1db_q"
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long != tool_name("s" * 40, "t" * 39 + "u")
    import re
    assert all(re.match(r"^[a-z][a-z0-9_]{0,63}$", n) for n in (long, tool_name("_", "_"), tool_name("é", "ß")))


async def test_clashing_names_are_refused_with_a_note(home, workspace):
    # "demo" and "Demo" both normalise to demo_*: the second server's tools are refused.
    write_config(home / "mcp.json", {"demo": stdio_entry(), "Demo": stdio_entry()})
    session = session_for(workspace)
    try:
        names = [t.name for t in (await session.prepare_tools())]
        assert names.count("demo_echo") == 1
        notes = session.drain_notes()
        assert any("Tool 'demo_echo' from MCP server 'Demo'" in n and "already taken by MCP server 'demo'" in n
                   for n in notes), notes
    finally:
        await session.close()


def test_no_mcp_json_imports_no_sdk(home, workspace):
    """Without mcp.json a catalog build never imports the (slow to import) SDK."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from crystal_kernel.core.config import load_config; "
            "from crystal_kernel.core.runner import run_to_completion; "
            "from crystal_kernel.host.session import Session; from crystal_kernel.testing.scripted import "
            "ScriptedProvider; s = Session(workspace=Path(sys.argv[1]), config=load_config(), "
            "provider=ScriptedProvider([]), person_present=False); run_to_completion(s.prepare_tools()); "
            "print(s.tool_source.mcp.manager, 'mcp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(workspace)], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["None", "False"], out.stderr
