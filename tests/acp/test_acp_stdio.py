"""`crystal acp` at the edges of its input: end of input right after a request, and
regular files instead of pipes (`crystal acp < requests.jsonl > replies.jsonl`)."""

from __future__ import annotations

import json
import os
import subprocess

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import CRYSTAL, model_env


def requests(workspace) -> str:
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
             {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}}]
    return "".join(json.dumps(line) + "\n" for line in lines)


def env_for(server) -> dict[str, str]:
    env = dict(os.environ)
    env.update(model_env(server))
    return env


def test_input_closed_right_after_session_new_ends_quietly(workspace):
    """The input (a pipe) holds initialize and session/new and then ends at once: the agent
    exits 0 with nothing on stderr (no traceback from the commands update it could no
    longer send)."""
    with LLMServer([]) as server:
        for _ in range(3):  # the race is in the agent's shutdown; try it a few times
            out = subprocess.run([CRYSTAL, "acp"], input=requests(workspace), capture_output=True, text=True,
                                 cwd=workspace, env=env_for(server), timeout=60)
            assert out.returncode == 0, out.stderr
            assert out.stderr == ""
