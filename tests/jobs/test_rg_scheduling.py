"""ripgrep's calls are scheduled with the host and have no controlling terminal, on both
sandbox mechanisms (SANDBOX-2).

Linux shares the CPU between sessions first (automatic process grouping): ripgrep in a
session of its own took up to 2.8x the wall time of the same search started by the host
(docs/benchmarks.md). bubblewrap's ``--new-session`` put ripgrep's sandbox in a session
of its own again; it is started without it, and the spawn server lets go of the host's
terminal instead, so that the person's terminal still is not ripgrep's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.jobs import bwrap

# A host whose controlling terminal is a pty the test holds; the call, run as ripgrep is
# (tools/_rg.py run_rg), says whether /dev/tty opens and which scheduling group it is in.
HOST = """import asyncio, fcntl, os, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
os.close(os.open("/dev/tty", os.O_WRONLY))  # the host has the terminal
from crystal_kernel.tools._rg import run_rg
PROBE = ("import os\\n"
         "try:\\n"
         "    os.close(os.open('/dev/tty', os.O_WRONLY)); tty = 'terminal'\\n"
         "except OSError:\\n"
         "    tty = 'none'\\n"
         "print(tty, open('/proc/self/autogroup').read().split()[0])\\n")
def collect(proc):
    out = proc.stdout.read(); proc.stderr.read(); proc.wait()
    return out.decode().strip()
print("HOST", open("/proc/self/autogroup").read().split()[0])
print("CALL", asyncio.run(run_rg([sys.executable, "-S", "-c", PROBE], collect, timeout=60)))
"""


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_ripgrep_is_scheduled_with_the_host_and_has_no_terminal(mechanism: str, private_home: Path,
                                                                tmp_path: Path):
    if not os.path.exists("/proc/self/autogroup"):
        pytest.skip("this kernel has no automatic process grouping")
    if mechanism == "bubblewrap" and bwrap.program() is None:
        pytest.skip("bubblewrap does not work here")
    master, slave = os.openpty()
    try:
        env = dict(os.environ, CRYSTAL_SANDBOX_MECHANISM=mechanism)
        done = subprocess.run([sys.executable, "-c", HOST], stdin=slave, capture_output=True, text=True, env=env,
                              cwd=str(Path(__file__).resolve().parents[2]), start_new_session=True, timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert "CALL" in lines, done.stdout + done.stderr
    tty, group = lines["CALL"].split()
    assert tty == "none", f"the call could open the person's terminal ({mechanism})"
    assert group == lines["HOST"], f"the call is scheduled apart from the host ({mechanism}): {group}"
