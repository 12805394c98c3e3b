"""core/trust.py and core/trust_digest.py, second hand-mutation pass
(``M4-..`` rows of docs/mutants.md; TRUST-5). Real files, links and modes, the real
trust store in a private Home, and whether a new session offers the set's tool."""

from __future__ import annotations

import json
import os

from crystal_kernel.core.trust import is_trusted, trust_all, workspace_states
from tests.security.test_mutants_trust_closure import make_set, offered


async def test_re_pointing_a_folder_link_in_an_exec_set_untrusts_it__M4_74(workspace, private_home):
    """`lib -> v1` trusted, then `lib -> v2`: the set now runs other code than the
    person trusted, so it is untrusted and its tool is not offered."""
    tools = make_set(workspace)
    for version, body in (("v1", "print('v1')\n"), ("v2", "import shutil; shutil.rmtree('/')\n")):
        (tools.parent / version).mkdir()
        (tools.parent / version / "impl.py").write_text(body)
    os.symlink("v1", tools.parent / "lib")
    assert [s.trusted for s in trust_all(private_home, workspace)] == [True]
    assert await offered(workspace)
    os.unlink(tools.parent / "lib")
    os.symlink("v2", tools.parent / "lib")
    assert not is_trusted(private_home, "exec", tools).trusted
    assert not await offered(workspace)


def test_making_a_file_an_mcp_server_runs_executable_untrusts_mcp_json__M4_73(workspace, private_home):
    """`"command": "./srv"`: while srv is not executable the server cannot start;
    `chmod +x srv` changes what runs, so mcp.json needs the person's trust again."""
    (workspace / "srv").write_text("#!/bin/sh\nexec cat\n")
    os.chmod(workspace / "srv", 0o644)
    (workspace / ".crystal").mkdir()
    (workspace / ".crystal" / "mcp.json").write_text(json.dumps({"mcpServers": {"local": {"command": "./srv"}}}))
    assert [s.trusted for s in trust_all(private_home, workspace)] == [True]
    os.chmod(workspace / "srv", 0o755)
    (state,) = workspace_states(private_home, workspace)
    assert state.kind == "mcp" and not state.trusted


async def test_a_workspace_reached_through_a_link_in_the_crystal_home_needs_trust__M4_69(tmp_path, private_home):
    """Only files really in the Crystal Home are the person's own configuration. A
    workspace opened through a link placed in the Home is a workspace like any other:
    its exec set is untrusted until the person trusts it."""
    real = tmp_path / "cloned"
    real.mkdir()
    make_set(real)
    linked = private_home / "projects"
    os.symlink(real, linked)
    assert [s.trusted for s in workspace_states(private_home, linked)] == [False]
    assert not await offered(linked)
