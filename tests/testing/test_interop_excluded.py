"""`make test` never runs the interop suite (docs/interop.md): it needs a llama-server build
that takes tens of minutes. Only `make interop` (CRYSTAL_INTEROP=1) collects it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collect(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRYSTAL_INTEROP"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/interop"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


def test_the_interop_suite_is_collected_only_under_make_interop():
    plain = collect({})
    assert plain.returncode == 5 and "no tests collected" in plain.stdout, plain.stdout + plain.stderr
    interop = collect({"CRYSTAL_INTEROP": "1"})
    assert interop.returncode == 0, interop.stdout + interop.stderr
    assert "test_llama_server.py::test_a_real_streamed_tool_call_runs" in interop.stdout
    makefile = (ROOT / "Makefile").read_text()
    assert "CRYSTAL_INTEROP=1" in makefile.split("\ninterop:")[1].split("\n\n")[0]
    assert "CRYSTAL_INTEROP" not in makefile.split("\ntest:")[1].split("\n\n")[0]
