"""A model server cannot hold a turn forever (ROBUST-4): a stream of nothing but SSE
keep-alive comments times out, and ``requestTimeoutSeconds`` bounds the whole wait,
retries included. Real `crystal run` processes, the official SDKs, the loopback server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
PROVIDERS = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def run(workspace: Path, server: LLMServer, provider: str, timeout_seconds: float) -> tuple[subprocess.CompletedProcess, float]:
    home = Path(os.environ["CRYSTAL_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"requestTimeoutSeconds": timeout_seconds}))
    env = dict(os.environ)
    url = server.url if provider == "anthropic" else server.base_url
    env.update({"CRYSTAL_PROVIDER": provider, "CRYSTAL_BASE_URL": url, "CRYSTAL_MODEL": "m-test",
                PROVIDERS[provider]: "sk-test"})
    out = subprocess.run([CRYSTAL, "run", "hello", "--workspace", str(workspace), "--format", "jsonl"],
                         capture_output=True, text=True, env=env, timeout=120)
    # From the first request reaching the server to the process's end: the wait the
    # timeout governs (process start-up, slow on a loaded machine, is not part of it).
    first = min(entry["time"] for entry in server.requests)
    return out, time.time() - first


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("after", [0, 3])
def test_keep_alive_only_stream_times_out(workspace, provider, after):
    """Pings for 60 s (before the first event, or mid-answer); the request timeout is 2 s."""
    with LLMServer([{"text": "Hello there, this is a long answer.", "chunk": 2, "ping": 60, "ping_after": after}],
                   max_hang=60) as server:
        out, took = run(workspace, server, provider, 2)
    assert took < 10, f"took {took:.1f} s"  # 2 s plus the process's own exit
    events = [json.loads(line) for line in out.stdout.splitlines()]
    errors = [e["message"] for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "sent nothing but keep-alives for 2 s" in errors[0], events
    assert events[-1]["type"] == "turn_end" and events[-1]["stopReason"] == "error"
    assert out.returncode != 0 and "Traceback" not in out.stderr


def test_request_timeout_bounds_the_retries_too(workspace):
    """Three 503s each asking to retry after 5 s would make a person wait 15 s or more;
    with requestTimeoutSeconds 2 the run gives up within the budget and says why."""
    busy = {"status": 503, "headers": {"retry-after": "5"}, "message": "overloaded"}
    with LLMServer([busy, busy, busy, {"text": "late"}]) as server:
        out, took = run(workspace, server, "openai", 2)
        attempts = len(server.bodies("chat"))
    assert took < 10, f"took {took:.1f} s"
    assert attempts == 1
    events = [json.loads(line) for line in out.stdout.splitlines()]
    errors = [e["message"] for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "HTTP 503" in errors[0], errors
    assert events[-1]["type"] == "turn_end"


def test_a_slow_but_steady_answer_is_not_cut(workspace):
    """Events every 0.5 s for about 4 s, timeout 2 s: the gap, not the total, counts
    once the answer streams."""
    with LLMServer([{"text": "one two three four five six seven", "chunk": 4, "delay": 0.5}]) as server:
        out, took = run(workspace, server, "openai", 2)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert "".join(e["text"] for e in events if e["type"] == "text") == "one two three four five six seven"
    assert took > 3
