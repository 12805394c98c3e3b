"""A file name that is not valid UTF-8 must not break a kernel session for good
(ROBUST-1): a real Crystal kernel under jupyter_client, the model on the loopback
server. The cell that lists the folder succeeds, every later cell works, and the
session document is saved after each.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.llm_server import LLMServer

_spec = importlib.util.spec_from_file_location(
    "crystal_tests_jupyter_helpers", Path(__file__).resolve().parent.parent / "jupyter" / "conftest.py")
kernel_helpers = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, kernel_helpers)
_spec.loader.exec_module(kernel_helpers)  # type: ignore[union-attr]


def test_kernel_survives_non_utf8_file_names(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    root = os.fsencode(workspace)
    with open(os.path.join(root, b"r\xe9sum\xe9.txt"), "wb") as handle:
        handle.write(b"needle\n")
    os.mkdir(os.path.join(root, b"d\xff"))
    with LLMServer() as server:
        kernel = kernel_helpers.start_kernel(tmp_path, server, workspace=workspace)
        try:
            kernel.run("/approval full")
            server.add({"tool_calls": [{"name": "list", "arguments": {"path": "."}},
                                       {"name": "grep", "arguments": {"pattern": "needle"}},
                                       {"name": "bash", "arguments": {"command": "ls"}}]},
                       {"text": "Listed the folder."})
            first = kernel.run("What is in this folder?")
            server.add({"text": "Still working."})
            second = kernel.run("Are you still there?")
            sent = json.dumps(server.bodies("chat")[1]["messages"])
        finally:
            kernel.stop()
    assert first.status == "ok", first.texts()
    assert "Listed the folder." in " ".join(first.texts())
    assert "r\\\\xe9sum\\\\xe9.txt" in sent and "d\\\\xff" in sent  # the model saw the escaped names
    assert second.status == "ok", second.texts()
    assert "Still working." in " ".join(second.texts())
    store = SessionStore(workspace)
    summaries = store.list()
    assert len(summaries) == 1 and summaries[0].turns == 2
    for path in (workspace / ".crystal" / "sessions").glob("*.jsonl"):
        path.read_bytes().decode("utf-8")  # every saved line is valid UTF-8
