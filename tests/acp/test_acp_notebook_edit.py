"""SPEC §12 notebook tools over ACP: the permission request for a notebook_edit shows
the per-cell diff, and the result is the whole-file diff (the file the client opens)."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp


async def test_notebook_edit_permission_shows_the_cell_diff(workspace):
    nb = new_notebook()
    nb.cells = [new_code_cell("1/0")]
    nb.cells[0].id = "calc"
    nbformat.write(nb, str(workspace / "a.ipynb"))
    client = RecordingClient(permissions=["allow_once"])
    replies = [
        {"tool_calls": [{"id": "n1", "name": "notebook_edit", "arguments": {
            "path": "a.ipynb", "action": "replace", "cell_id": "calc", "source": "1/2"}}]},
        {"text": "Fixed."},
    ]
    with LLMServer(replies) as server:
        async with crystal_acp(client, server, cwd=workspace) as (conn, proc, init):
            new = await conn.new_session(cwd=str(workspace))
            response = await conn.prompt(session_id=new.session_id, prompt=[{"type": "text", "text": "fix it"}])
    assert response.stop_reason == "end_turn"
    ((call, _),) = client.permission_requests
    shown = call.content[0].content.text
    assert shown.startswith("```diff\nReplaced the source of cell 1 (id calc).")
    assert "-1/0\n+1/2" in shown
    assert nbformat.read(str(workspace / "a.ipynb"), as_version=4).cells[0].source == "1/2"
    done = client.tool_updates("n1")[-1]
    assert done.status == "completed" and done.content[0].type == "diff"
