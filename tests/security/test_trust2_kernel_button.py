"""TRUST-2 in the real Crystal kernel (under jupyter_client): a cloned repository's
`.crystal/mcp.json` runs nothing when a notebook opens it; the kernel shows a note and a
Trust button; the person's click trusts it and the server starts; a changed file is
offered again and does not run. Reuses tests/jupyter's kernel helpers."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from crystal_kernel.jupyter.driver import click
from crystal_kernel.testing.llm_server import LLMServer

_spec = importlib.util.spec_from_file_location("jupyter_kernel_helpers_trust",
                                               Path(__file__).parents[1] / "jupyter" / "conftest.py")
helpers = importlib.util.module_from_spec(_spec)
sys.modules["jupyter_kernel_helpers_trust"] = helpers  # dataclasses look their module up
_spec.loader.exec_module(helpers)  # type: ignore[union-attr]


@pytest.fixture
def llm_server():
    with LLMServer(max_hang=20) as server:
        yield server


def write_mcp(workspace: Path, marker: Path, word: str = "ran") -> Path:
    path = workspace / ".crystal" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    code = f"open({str(marker)!r}, 'a').write({word!r})"
    path.write_text(json.dumps({"mcpServers": {"evil": {"command": sys.executable, "args": ["-c", code]}}}))
    return path


def trust_buttons(kernel) -> list[str]:
    return [cid for cid, s in kernel.driver.open_widgets().items()
            if s.get("_model_name") == "ButtonModel" and s.get("description") == "Trust"]


def test_kernel_runs_nothing_until_the_trust_button_is_clicked(llm_server, tmp_path):
    home = helpers.make_home(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = tmp_path / "marker"
    path = write_mcp(workspace, marker)
    kernel = helpers.start_kernel(tmp_path, llm_server, home=home, workspace=workspace)
    try:
        llm_server.add({"text": "Hello."})
        turn = kernel.run("Hi")
        assert turn.status == "ok"
        assert not marker.exists(), "opening the notebook's session ran the repository's MCP command"
        # One card, said once (the host's note about the same file is left out), readable
        # (no Markdown backticks), naming the file once by its workspace path (the full
        # path only in the tooltip) and what trusting it would start.
        said = [t for t in turn.texts() if "mcp.json" in t]
        assert len(said) == 1, turn.texts()
        card = turn.find("Trusting it lets Crystal:")
        text = card["text/plain"]
        assert text.startswith("This workspace's MCP servers configuration .crystal/mcp.json is not trusted yet: "
                               "its servers were not started and their tools are not offered."), text
        assert f"  - start {sys.executable} -c " in text and "(MCP server 'evil')" in text, text
        assert "`" not in text and str(path.resolve()) not in text, text
        assert f'title="{path.resolve()}"' in card["text/html"] and 'data-state="offered"' in card["text/html"]
        card_id = next(did for did, bundle in turn.displays.items() if bundle is card)
        assert "evil" not in json.dumps(kernel.last_body().get("tools", []))
        assert len(trust_buttons(kernel)) == 1

        listed = kernel.run("/tools")
        assert listed.status == "ok" and not marker.exists()
        assert trust_buttons(kernel) and not any("crystal trust" in t for t in listed.texts()), \
            "the same file version is offered once per kernel"

        assert kernel.driver._try(click("Trust", tooltip=str(path.resolve())))
        # The card now says the file is trusted (it no longer says "not trusted").
        kernel.driver.drain(10, until=lambda d: card_id in d.late_updates)
        after = kernel.driver.late_updates[card_id]
        assert after["text/plain"].startswith("Trusted: this workspace's MCP servers configuration "
                                              ".crystal/mcp.json."), after
        assert "not trusted" not in after["text/plain"] and 'data-state="trusted"' in after["text/html"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not marker.exists():
            kernel.driver.drain(0.5)
            kernel.run("/tools")
        assert marker.exists(), "after the person's click the trusted server starts"
        trust = json.loads((home / ".crystal" / "trust.json").read_text())
        assert str(path.resolve()) in trust["files"]

        marker.unlink()
        write_mcp(workspace, marker, "changed")
        changed = kernel.run("/tools")
        assert any("changed since you trusted it" in t for t in changed.texts()), changed.texts()
        kernel.run("/mode work")  # a catalog rebuild, as any switch makes
        kernel.run("/tools")
        assert not marker.exists(), "a changed mcp.json ran without new trust"
    finally:
        kernel.stop()
