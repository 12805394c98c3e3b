"""The real Crystal kernel renders an MCP tool call as an ordinary tool card, and a
kernel shutdown leaves no MCP server behind. Reuses tests/jupyter's kernel helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from mcp_support import alive, pids, stdio_entry, wait_until, write_config

from crystal_kernel.testing.llm_server import LLMServer

_spec = importlib.util.spec_from_file_location("jupyter_kernel_helpers",
                                               Path(__file__).parents[1] / "jupyter" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
sys.modules["jupyter_kernel_helpers"] = helpers  # dataclasses look their module up
_spec.loader.exec_module(helpers)  # type: ignore[union-attr]


@pytest.fixture
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server


def test_mcp_tool_call_is_a_tool_card(llm_server, tmp_path):
    home = helpers.make_home(tmp_path)
    pidfile = tmp_path / "pids"
    write_config(home / ".crystal" / "mcp.json", {"demo": stdio_entry(pidfile=pidfile)})
    kernel = helpers.start_kernel(tmp_path, llm_server, home=home)
    try:
        kernel.reset(approval="full")
        llm_server.add(
            {"tool_calls": [{"name": "demo_echo", "arguments": {"text": "via mcp"}},
                            {"name": "demo_broken", "arguments": {}}]},
            {"text": "Done."},
        )
        run = kernel.run("Use the demo server")
        assert run.status == "ok"
        cards = [d for d in run.outputs() if 'class="crystal-card"' in d.get("text/html", "")]
        assert len(cards) == 2
        assert 'data-state="done"' in cards[0]["text/html"] and "echo: via mcp" in cards[0]["text/plain"]
        assert "demo_echo" in cards[0]["text/plain"]
        assert 'data-state="failed"' in cards[1]["text/html"]
        assert run.outputs()[-1]["text/plain"] == "Done."
        tools = kernel.run("/tools")
        assert "from MCP server 'demo': running" in str(tools.outputs())
        server = pids(pidfile)[0]
        assert alive(server)
    finally:
        kernel.stop()
    assert wait_until(lambda: not alive(server), 15), "the MCP server outlived the kernel"
