"""`make lab` (``python -m crystal_kernel.demo --lab``): JupyterLab on the tour workspaces
keeps its collaboration store under build/, not in the folder it was started from (the
repository), and stops on SIGINT also when it runs without a terminal, in the background
of a script (where SIGINT arrives ignored, and JupyterLab only asks on a terminal).

A real JupyterLab server; a real collaboration room is opened over its REST API and
websocket, as a page does, so the store is written."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

TOKEN = "lab-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(port: int, proc: subprocess.Popen[bytes], seconds: float = 150) -> None:
    # Generous: make test starts JupyterLab beside five other test workers.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "JupyterLab exited while starting"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=2).read()
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError("JupyterLab did not start")


def collaboration_session(port: int, path: str) -> dict[str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/collaboration/session/{path}?token={TOKEN}",
                                     data=b'{"format": "json", "type": "notebook"}', method="PUT",
                                     headers={"Content-Type": "application/json"})
    session: dict[str, str] = json.loads(urllib.request.urlopen(request, timeout=30).read())
    return session


async def open_room(port: int, session: dict[str, str]) -> None:
    """What a page does to open a notebook with real-time collaboration."""
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(f"ws://127.0.0.1:{port}/api/collaboration/room/json:notebook:{session['fileId']}"
                                 f"?token={TOKEN}&sessionId={session['sessionId']}")
    await asyncio.sleep(2)
    ws.close()


@pytest.mark.timeout(360)
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_make_lab_keeps_its_store_in_build_and_stops_on_a_signal_without_a_terminal(tmp_path: Path,
                                                                                    stop_signal: int) -> None:
    started_in = tmp_path / "checkout"  # where `make lab` runs: the repository
    started_in.mkdir()
    build = tmp_path / "build" / "demo"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRYSTAL_", "JPY_"))}
    env["CRYSTAL_DEMO_BUILD"] = str(build)
    log = (tmp_path / "lab.log").open("wb")
    # No terminal, and SIGINT ignored as a background job of a script inherits it.
    proc = subprocess.Popen([sys.executable, "-m", "crystal_kernel.demo", "--lab", "--no-browser", f"--port={port}",
                             f"--ServerApp.token={TOKEN}", "--allow-root"],
                            cwd=started_in, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_until_up(port, proc)
        asyncio.run(open_room(port, collaboration_session(port, "tour/tour.ipynb")))
        assert (build / ".jupyter_ystore.db").is_file(), "the collaboration store is under build/"
        assert not (started_in / ".jupyter_ystore.db").exists(), "nothing is left where make lab ran"
        stopped_at = time.monotonic()
        os.killpg(proc.pid, stop_signal)  # what kill -INT -PGID (or a job runner) sends
        code = proc.wait(timeout=60)
        assert time.monotonic() - stopped_at < 30
        assert code == 0
        # Its JupyterLab went with it.
        time.sleep(0.5)
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
