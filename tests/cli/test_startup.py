"""What `crystal run` loads before its first model request (the target: start to first
request). A real `crystal run` process against the loopback server, for each SDK: the
answer arrives, and the process never imported what the run does not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

# Runs `crystal run ...` exactly as the console script does (main() reading sys.argv),
# then reports which modules the process had loaded by the time it exited.
WRAPPER = """
import atexit, json, sys
def report():
    names = sorted({m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('openai.resources')})
    sys.stderr.write('MODULES ' + json.dumps(names) + '\\n')
atexit.register(report)
from crystal_kernel.cli import main
sys.argv = ['crystal', *sys.argv[1:]]
sys.exit(main())
"""

NEVER = {"IPython", "ipykernel", "ipywidgets", "jupyter_client", "jupyter_core", "nbformat", "mcp", "aiohttp"}


def run_crystal(workspace: Path, env_extra: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", WRAPPER, "run", "hello", "--workspace", str(workspace)],
                         capture_output=True, text=True, env=env, timeout=60)
    lines = [line for line in out.stderr.splitlines() if line.startswith("MODULES ")]
    return out, set(json.loads(lines[-1][len("MODULES "):])) if lines else set()


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_run_answers_without_loading_unused_modules(provider: str, workspace: Path, tmp_path: Path):
    with LLMServer([{"text": "Hello back."}]) as server:
        url = server.url if provider == "anthropic" else server.base_url
        out, modules = run_crystal(workspace, {
            "CRYSTAL_HOME": str(tmp_path / "home"), "CRYSTAL_PROVIDER": provider, "CRYSTAL_BASE_URL": url,
            "CRYSTAL_MODEL": "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4.1",
            "CRYSTAL_API_KEY_ENV": "TEST_KEY", "TEST_KEY": "sk-test"})
        requests = server.requests
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello back."
    assert requests and requests[0]["headers"].get("authorization", requests[0]["headers"].get("x-api-key"))
    assert modules, out.stderr
    assert not modules & NEVER, f"crystal run imported {sorted(modules & NEVER)}"
    # The request goes through the client's own post(), not the SDK's resource classes.
    assert not any(m.startswith("openai.resources") for m in modules if m != "openai.resources")
