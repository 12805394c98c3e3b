"""The kernel answers before it imports the host, and imports it right after (the
kernel's start to idle, bench/bench_kernel.py).

A person waits for a new kernel's "idle"; the host (pydantic's models, the session, the
notebook tools) is only needed by the first cell. The real kernel is started under
jupyter_client through a small launcher that logs, with the time, each module the kernel
imports and when it sent its first kernel_info reply: pydantic must not be among those
imported before that reply, and the session and the notebook tools must follow on their
own, with no cell run.
"""

from __future__ import annotations

import sys
import time

LAUNCHER = """
import os, sys, time
LOG = os.open(sys.argv.pop(1), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

class Logged:
    def find_spec(self, name, path=None, target=None):
        os.write(LOG, f"{time.time():.6f} {name}\\n".encode())
        return None

sys.meta_path.insert(0, Logged())
from ipykernel.kernelbase import Kernel

replied = Kernel.kernel_info_request

async def logged_reply(self, *args):
    await replied(self, *args)  # the reply is on its way when this returns
    os.write(LOG, f"{time.time():.6f} <kernel_info replied>\\n".encode())

Kernel.kernel_info_request = logged_reply
from crystal_kernel.jupyter.kernel import main
main()
"""

LATER = ("pydantic", "crystal_kernel.host.session", "crystal_kernel.jupyter.notebook_tools")


def _imported(log) -> dict[str, float]:
    seen: dict[str, float] = {}
    for line in log.read_text().splitlines():
        stamp, name = line.split(" ", 1)
        seen.setdefault(name, float(stamp))
    return seen


def test_the_kernel_is_ready_before_the_host_is_imported_and_imports_it_unasked(tmp_path, llm_server):
    from tests.jupyter.conftest import kernel_env, make_home, start_own_spec

    log = tmp_path / "imports.log"
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = kernel_env(make_home(tmp_path), llm_server, str(workspace / "a.ipynb"), {})
    km, kc = start_own_spec(tmp_path, "crystal_logged", [sys.executable, str(launcher), str(log), "-f", "{connection_file}"],
                            "Crystal (imports logged)", env, workspace)
    try:
        kc.wait_for_ready(timeout=60)
        assert kc.kernel_info(reply=True, timeout=30)["content"]["implementation"] == "crystal"
        deadline = time.monotonic() + 60
        while not all(name in _imported(log) for name in LATER) and time.monotonic() < deadline:
            time.sleep(0.1)
        seen = _imported(log)
        assert "crystal_kernel.jupyter.kernel" in seen
        ready = seen["<kernel_info replied>"]
        missing = [name for name in LATER if name not in seen]
        assert not missing, f"the kernel did not import {missing} after it was ready"
        early = {name: round(ready - seen[name], 3) for name in LATER if seen[name] < ready}
        assert not early, f"imported before the kernel answered (seconds before): {early}"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
