"""``crystal run`` turns the garbage collector off while it imports (cli/__init__.py main);
a run that ends before its session opens, on a usage error, turns it back on: main() may
be called in a process that goes on (a test worker, an embedding program)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, sys
sys.argv = ["crystal", "run", "   "]
from crystal_kernel.cli import main
code = main()
print(code, gc.isenabled())
"""


def test_a_run_refused_before_its_session_leaves_the_collector_on():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert "The prompt is empty." in done.stderr, done.stderr
    assert done.stdout.split() == ["2", "True"], (done.stdout, done.stderr)
