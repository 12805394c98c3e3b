"""The job supervisor starts for every exec tool, ripgrep and bash call, so
its own start is kept small — loaded from its cached bytecode, without ``ctypes`` (its C
calls go through jobs/libc.py), and with no /proc scan when the command left nothing
running. A real supervisor process, started as every launcher starts it."""

from __future__ import annotations

import os
import subprocess

from crystal_kernel.jobs.guarded import SUPERVISOR, supervisor_command


def _imports(command: list[str], shell_command: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    # -X importtime lists every module the supervisor process imports (on stderr).
    argv = [command[0], "-X", "importtime", *command[1:], str(os.getpid()), "1.0", "/bin/sh", shell_command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    names = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return done, names


def test_the_supervisor_starts_without_ctypes_and_keeps_its_path_on_the_command_line():
    command = supervisor_command()
    assert SUPERVISOR in command, "the jobs server extension finds a supervisor by this path"
    done, names = _imports(command, "echo ran; exit 3")
    assert done.stdout == "ran\n" and done.returncode == 3, "the command's output and exit status, as before"
    # Imported as a module (a script run is not in this list): its cached bytecode is
    # used, where a script was compiled at every start.
    assert "supervisor" in names and "libc" in names
    assert "ctypes" not in names, "importing ctypes cost every tool call milliseconds"

