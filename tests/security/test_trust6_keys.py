"""TRUST-4, TRUST-6: every host process withdraws the model key once its
provider holds it, so a tool's shell finds no key — neither in its own environment nor
in the initial environment block of the Crystal process that started it
(``/proc/$PPID/environ``), nor further up. Attacked through the real fronts: a real
``crystal run`` and ``crystal acp`` (a real JSON-RPC client over stdio), each with the
loopback model server; the kernel and the magics are attacked in
test_trust4_python_tool.py. On the old code `crystal run` and `crystal acp` left the key
in their /proc/PID/environ and these tests fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crystal_kernel.testing.llm_server import LLMServer
from tests.acp.harness import RecordingClient, crystal_acp

CRYSTAL = str(Path(sys.executable).parent / "crystal")
SECRET = "sk-trust6-attack-0123456789abcdef"
# The shell walks up from itself through every ancestor it can read (its parent is the
# Crystal process), printing any OPENAI_API_KEY it finds reversed, so the host's
# redaction of known secret values cannot hide a leak from this test.
ATTACK = ('for f in /proc/$$/environ /proc/$PPID/environ; do tr "\\0" "\\n" < $f | grep "^OPENAI_API_KEY=" | rev; done; '
          'p=$PPID; while [ "$p" -gt 1 ]; do tr "\\0" "\\n" < /proc/$p/environ 2>/dev/null '
          '| grep "^OPENAI_API_KEY=" | rev; p=$(cut -d" " -f4 /proc/$p/stat); done; '
          'env | grep "^OPENAI_API_KEY=" | rev; echo "scanned from $PPID"')
REPLIES = [{"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": ATTACK}}]}, {"text": "Done."}]


def tool_result_sent_back(server: LLMServer) -> str:
    """What the bash call printed, as the model got it in the next request."""
    messages = server.bodies("chat")[1]["messages"]
    return json.dumps([m for m in messages if m["role"] == "tool"])


def assert_no_key(seen: str) -> None:
    assert "scanned from" in seen  # the attack ran
    assert SECRET[::-1] not in seen
    assert SECRET not in seen


def test_crystal_run_bash_finds_no_key_in_its_parent(workspace):
    with LLMServer(list(REPLIES)) as server:
        env = dict(os.environ, CRYSTAL_PROVIDER="openai", CRYSTAL_BASE_URL=server.base_url, CRYSTAL_MODEL="gpt-test",
                   OPENAI_API_KEY=SECRET)
        out = subprocess.run([CRYSTAL, "run", "look around", "--workspace", str(workspace), "--approval", "full",
                              "--format", "jsonl"], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        seen = tool_result_sent_back(server)
        # The model server still got the key: the provider holds it.
        assert server.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert_no_key(seen)


async def test_crystal_acp_bash_finds_no_key_in_its_parent(workspace):
    client = RecordingClient()
    with LLMServer(list(REPLIES)) as server:
        async with crystal_acp(client, server, cwd=workspace, args=("--approval", "full"),
                               env_extra={"OPENAI_API_KEY": SECRET}) as (conn, proc, init):
            sid = (await conn.new_session(cwd=str(workspace))).session_id
            response = await conn.prompt(session_id=sid, prompt=[{"type": "text", "text": "look around"}])
            # The agent process itself: its /proc environ block holds no key either.
            block = Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert response.stop_reason == "end_turn"
        seen = tool_result_sent_back(server)
        assert server.requests[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    assert_no_key(seen)
    assert SECRET.encode() not in block

