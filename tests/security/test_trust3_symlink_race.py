"""TRUST-3 attack on the host's own writes with a race: another process keeps swapping a
folder under ``.crystal/`` for a symbolic link to a folder outside the workspace (and
back) while the host writes session documents, status files and job logs there. A
check-then-write would sometimes follow the link; the host walks folders from the
workspace with ``O_NOFOLLOW | O_DIRECTORY`` descriptors and creates and renames files
relative to them, so not one byte may land outside. Real processes, real files.

A control run shows the attack works on this machine: the same race against a naive
"check the folders, then write by path" lands files outside.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crystal_kernel.core.fsutil import atomic_write_text, ensure_folder_inside, open_inside
from crystal_kernel.jobs.logfile import RotatingLog

SWAPPER = r"""
import os, sys, time
folder, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
stash = folder + ".real"
end = time.monotonic() + 120
open(stop + ".started", "w").close()
while not os.path.exists(stop) and time.monotonic() < end:
    try:
        os.rename(folder, stash)
    except OSError:
        continue
    try:
        os.symlink(outside, folder)
    except OSError:
        pass
    for _ in range(50):
        pass
    try:
        os.unlink(folder)
    except OSError:
        pass
    try:
        os.rename(stash, folder)
    except OSError:
        # The host made the folder again meanwhile: keep its copy, drop ours.
        import shutil
        shutil.rmtree(stash, ignore_errors=True)
"""


def start_swapper(folder: Path, outside: Path, stop: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(outside), str(stop)])


def everything_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def arena(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".crystal" / "sessions").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    stop = tmp_path / "stop"
    return ws, ws / ".crystal" / "sessions", outside, stop


def race(arena, write, *, seconds: float = 4.0, until_leak: bool = False, both: bool = False,
         at_most: float = 60.0) -> tuple[int, int]:
    """Write while the swapper runs: for ``seconds``, and on until both sides of the race
    were hit (``both``: a write done and one refused) or until a file leaked
    (``until_leak``), for ``at_most`` seconds in all. The clock starts when the swapper runs: on a loaded
    machine its interpreter can take seconds to start."""
    ws, folder, outside, stop = arena
    swapper = start_swapper(folder, outside, stop)
    started = Path(f"{stop}.started")
    done = failed = 0
    try:
        waited = time.monotonic() + at_most
        while not started.exists() and time.monotonic() < waited:
            time.sleep(0.01)
        begin = time.monotonic()
        while time.monotonic() < begin + at_most:
            try:
                write(ws, folder, done + failed)
                done += 1
            except OSError:
                failed += 1
            if until_leak:
                if everything_under(outside):
                    break
            elif time.monotonic() >= begin + seconds and (not both or (done and failed)):
                break
    finally:
        stop.touch()
        swapper.wait(10)
    return done, failed


def test_control_a_naive_check_then_write_is_redirected(arena):
    """The attack is real: checking folders first and then writing by path leaks."""
    def naive(ws: Path, folder: Path, n: int) -> None:
        ensure_folder_inside(ws, folder)
        with open(folder / f"naive-{n}.json", "w") as handle:
            handle.write("x")

    race(arena, naive, until_leak=True)
    assert everything_under(arena[2]), "the swapper never redirected a naive write (the race was not hit)"


def test_atomic_writes_never_land_outside(arena):
    def write(ws: Path, folder: Path, n: int) -> None:
        atomic_write_text(folder / "doc.json", f'{{"n": {n}}}\n', fsync=False, inside=ws)

    done, failed = race(arena, write, both=True)
    assert everything_under(arena[2]) == [], "a host write landed outside the workspace"
    assert done > 0 and failed > 0, (done, failed)  # both sides of the race were hit


def test_opened_files_and_job_logs_never_land_outside(arena):
    def write(ws: Path, folder: Path, n: int) -> None:
        fd = open_inside(ws, folder / "lock", os.O_WRONLY | os.O_CREAT)
        os.close(fd)
        log = RotatingLog(folder / "j1.log", 64, inside=ws)
        try:
            if log.error:
                raise OSError(log.error)
            log.write(b"y" * 200, 200)  # rotates: rename and unlink relative to the folder
        finally:
            log.close()

    done, failed = race(arena, write)
    assert everything_under(arena[2]) == [], "a host write landed outside the workspace"
    assert done > 0, (done, failed)


def test_swapping_crystal_itself_never_redirects(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".crystal" / "jobs").mkdir(parents=True)
    outside = tmp_path / "outside"
    (outside / "jobs").mkdir(parents=True)
    stop = tmp_path / "stop"

    def write(ws: Path, folder: Path, n: int) -> None:
        atomic_write_text(ws / ".crystal" / "jobs" / "j1.json", "{}\n", fsync=False, inside=ws)

    done, failed = race((ws, ws / ".crystal", outside, stop), write)
    assert everything_under(outside) == ["jobs"], "a host write landed outside the workspace"
    assert done > 0, (done, failed)


def test_file_tool_writes_never_land_outside(tmp_path):
    """write, edit and notebook_edit resolve the path (no link in it then) and write
    relative to descriptors opened from the allowed folder: a folder of the workspace
    swapped for a link to outside afterwards cannot take the model's write there."""
    from types import SimpleNamespace

    from crystal_kernel.core.access import AccessRules
    from crystal_kernel.tools._files import write_allowed

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    ctx = SimpleNamespace(access=AccessRules(ws))

    def write(ws: Path, folder: Path, n: int) -> None:
        write_allowed(ctx, ws / "src" / "main.py", f"print({n})\n")

    done, failed = race((ws, ws / "src", outside, tmp_path / "stop"), write)
    assert everything_under(outside) == [], "a tool's write landed outside the workspace"
    assert done > 0, (done, failed)
