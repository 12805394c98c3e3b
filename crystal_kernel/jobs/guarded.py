"""Short-lived tool processes that cannot outlive the host (ROBUST-3).

``bash``, background jobs and MCP servers already run under the job supervisor
(:mod:`crystal_kernel.jobs.supervisor`): a parent-death signal and a child subreaper, so
their whole tree dies with the host however the host dies, SIGKILL included. This
wraps other argv (ripgrep for ``grep``, exec tools) the same way: the supervisor
runs ``/bin/sh -c 'exec ARGV'`` and exits the way the program did (same code or signal),
with the caller's stdin, stdout, stderr, working folder and environment. The supervisor
drops its own copy of stdin once the program started, so a program that stops reading
its arguments still breaks the host's pipe (EX-6, EX-15).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from crystal_kernel.jobs.sandbox import Sandbox

# Standard library only, loaded by path (no import of the package in the child).
SUPERVISOR = str(Path(__file__).resolve().with_name("supervisor.py"))
# How the supervisor is started: ``python -c`` imports it as a module, so its compiled
# form in __pycache__ is used; run as a script it was compiled on every start (~5 ms of
# CPU per tool call, docs/benchmarks.md). Its path stays on the command line (the first argument,
# taken off here), where the jobs server extension looks for it.
_BOOT = ("import sys;sys.path.insert(0,sys.argv.pop(1).rpartition('/')[0]);import supervisor;"
         "del sys.path[0];supervisor.main(sys.argv)")


def supervisor_command() -> list[str]:
    """The start of every supervisor command line: its arguments follow."""
    return [sys.executable, "-I", "-S", "-c", _BOOT, SUPERVISOR]
# Seconds between SIGTERM and SIGKILL when the supervisor stops the tree.
GRACE_SECONDS = 1.0
SHELL = "/bin/sh"


def guarded_argv(argv: list[str], sandbox: Sandbox | None = None) -> list[str]:
    """``argv`` run under the supervisor, confined by ``sandbox`` when given
    (SANDBOX-1); the caller starts it from the host process (the supervisor checks that
    its parent is the host). Falls back to ``argv`` itself where there is no ``/bin/sh``
    to exec through (no Landlock there either: not Linux)."""
    if not os.path.exists(SHELL):
        return list(argv)
    return [*supervisor_command(), *(sandbox.launcher_args() if sandbox else ()),
            str(os.getpid()), str(GRACE_SECONDS), SHELL, "exec " + shlex.join(argv)]


GROUP_GUARD = str(Path(__file__).resolve().with_name("group_guard.py"))


def start_group_guard() -> subprocess.Popen[bytes] | None:
    """Start :mod:`crystal_kernel.jobs.group_guard` for this process: when it dies,
    however it dies, its process group is stopped (what code run in-process started,
    e.g. the ``python`` notebook tool's subprocesses). Only when this process leads its
    own group (Jupyter starts kernels so): otherwise the group holds whoever started us.
    Call it from the main thread (the parent-death signal follows the starting thread)."""
    if not sys.platform.startswith("linux") or os.getpgrp() != os.getpid():
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", GROUP_GUARD, str(os.getpid()), str(GRACE_SECONDS)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None
