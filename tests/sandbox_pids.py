"""Host process ids of what a sandboxed command reports as ``$$`` or ``$!``.

Inside bubblewrap's PID namespace (SANDBOX-2) a command's process ids are its own, not
the host's. A test that reads such an id finds the host's process by the id's last entry
in ``NSpid`` (the id in the innermost namespace) and by its working folder, which is the
test's own (so sandboxes of tests running beside it do not match); Crystal's own helpers
there (a sandbox's server, bwrap itself) are passed over. On the Landlock path
``NSpid`` holds the one id, which is the host's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def host_pid(inner: int, folder: Path, wait: float = 5.0) -> int | None:
    """The host's id of the live process that is ``inner`` in its own namespace and works
    in ``folder``; None when there is none (already ended)."""
    want = os.path.realpath(folder)
    deadline = time.monotonic() + wait
    while True:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/status") as handle:
                    ids = next((line.split()[1:] for line in handle if line.startswith("NSpid:")), [])
                if not ids or int(ids[-1]) != inner or _helper(name):
                    continue
                cwd = os.path.realpath(os.readlink(f"/proc/{name}/cwd"))
            except (OSError, ValueError):
                continue
            if cwd == want or cwd.startswith(want.rstrip("/") + "/"):
                return int(name)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _helper(pid: str) -> bool:
    """A sandbox's server or its spare (named so: jobs/spawn_server.py), or bwrap itself;
    a call's supervisor takes another name."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().strip() in (b"crystal-sandbox", b"bwrap")
    except OSError:
        return False
