"""`make demo` runs offline: the replayed CLI tour fixes the sample project for real."""

from __future__ import annotations

import os
import subprocess
import sys


def test_demo_runs_offline_and_fixes_the_sample_project():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    out = subprocess.run([sys.executable, "-m", "crystal_kernel.demo"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "The sample project's tests after the agent's fix: pass" in out.stdout
    assert "Both tests pass now." in out.stdout
    assert "✓ edit" in out.stderr
