"""What trusting a workspace file lets Crystal do, said before the person trusts it
(TRUST-2, host/trust_scope.py): read as data only — nothing expands or runs — and bounded."""

from __future__ import annotations

import json

from crystal_kernel.core.trust import WorkspaceFile
from crystal_kernel.host.trust_scope import MAX_LINE, MAX_LINES, what_trusting_enables


def state(kind, path) -> WorkspaceFile:
    return WorkspaceFile(kind=kind, path=path, digest="d", trusted=False)


def test_mcp_servers_are_named_with_their_commands_and_addresses_unexpanded(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKEN", "secret-value")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some server", "${TOKEN}"]},
        "tracker": {"url": "http://127.0.0.1:8931/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}}))
    assert what_trusting_enables(state("mcp", path)) == [
        "start npx -y 'some server' '${TOKEN}' (MCP server 'files')",
        "connect to http://127.0.0.1:8931/mcp (MCP server 'tracker')"]


def test_an_exec_set_names_each_command_with_its_tools(tmp_path):
    folder = tmp_path / "imagetools"
    folder.mkdir()
    path = folder / "tools.json"
    path.write_text(json.dumps({"command": ["python3", "imagetools.py"], "tools": [
        {"name": "plot", "command": ["plot"]}, {"name": "thumb", "command": ["thumb"]},
        {"name": "info", "command": ["plot"]}]}))
    assert what_trusting_enables(state("exec", path)) == [
        "run python3 imagetools.py plot in imagetools/ (tools plot, info)",
        "run python3 imagetools.py thumb in imagetools/ (tool thumb)"]


def test_what_is_said_is_bounded_and_a_broken_file_says_so(tmp_path):
    path = tmp_path / "mcp.json"
    servers = {f"s{i}": {"command": "x" * 500} for i in range(40)}
    path.write_text(json.dumps({"mcpServers": servers}))
    lines = what_trusting_enables(state("mcp", path))
    assert len(lines) == MAX_LINES + 1 and lines[-1] == f"… and {40 - MAX_LINES} more"
    assert all(len(line) <= MAX_LINE for line in lines)
    path.write_text("{not json")
    assert what_trusting_enables(state("mcp", path))[0].startswith("(its content cannot be shown: ")
