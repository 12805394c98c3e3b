"""acp/checks.py, second hand-mutation pass (``M4-..`` rows of
docs/mutants.md; TRUST-3, TRUST-6). A real `crystal acp` over raw JSON-RPC lines on the
loopback model server, as in test_acp_hostile_input.py."""

from __future__ import annotations

import json

import pytest

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.test_acp_hostile_input import error, notes_of_one_turn, start


@pytest.mark.parametrize("inside", ["", "sessions"])
def test_a_cwd_linked_to_the_crystal_home_is_refused__M4_38(workspace, tmp_path, private_home, inside):
    """A client's cwd that is a symbolic link to the Crystal Home (or a folder in it) is
    the Crystal Home: refused, naming where the link leads, and nothing is written
    there."""
    target = private_home / inside if inside else private_home
    target.mkdir(exist_ok=True)
    link = tmp_path / "project-link"
    link.symlink_to(target)
    expected = (f"The cwd '{link}' ({target}) is the Crystal Home or inside it, which only Crystal changes; "
                "open a project folder instead.")
    with LLMServer([]) as server:
        with start(workspace, server) as agent:
            for method in ("session/new", "session/list"):
                reply = agent.call(method, {"cwd": str(link), "mcpServers": []})
                assert error(reply) == (-32602, expected), method
            assert agent.close() == 0
    assert not (target / ".crystal").exists()


@pytest.mark.parametrize("control", ["\x9b", "\x85", "\x90", "\x9d"])
def test_a_client_server_name_with_a_c1_control_is_left_out__M4_39(workspace, control):
    """8-bit CSI (0x9B), NEL (0x85), DCS and OSC are terminal controls like ESC: a name
    holding one is left out with a note, and never reaches the client or the model."""
    servers = [{"name": f"evil{control}2J", "command": "/bin/false", "args": [], "env": []}]
    with LLMServer([{"text": "Hello."}]) as server:
        with start(workspace, server) as agent:
            notes = notes_of_one_turn(agent, workspace, mcpServers=servers)
            assert "Note: An MCP server passed by the client is left out: its name contains a control character" \
                   in notes, notes
            assert control not in json.dumps(agent.seen, ensure_ascii=False)
            assert "could not start" not in notes
            assert agent.close() == 0
        assert control not in json.dumps(server.bodies(), ensure_ascii=False)
