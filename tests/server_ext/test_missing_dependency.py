"""Crystal's server extension in a Jupyter whose environment lacks one of Crystal's
dependencies (crystal-kernel installed with --no-deps beside a Jupyter
that ran Crystal from another environment failed with a traceback on every start).

A real `jupyter server` process, the extension enabled by the config file the package
installs; nh3 is hidden from it by a module of that name that
raises as a missing module does (no package is uninstalled)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from crystal_kernel.jupyter.server_ext import missing_dependency_text

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.timeout(180)
def test_a_missing_dependency_is_one_line_and_jupyter_starts(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "nh3.py").write_text('raise ModuleNotFoundError("No module named \'nh3\'", name="nh3")\n')
    root = tmp_path / "root"
    root.mkdir()
    port = free_port()
    log = tmp_path / "server.log"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden), str(REPO)]), HOME=str(tmp_path))
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
             "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
             "--ServerApp.open_browser=False", "--allow-root"],
            env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if status(f"{base}/api/status") == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert status(f"{base}/api/status") == 200, log.read_text()
        assert status(f"{base}/crystal/api/info") == 404
    finally:
        server.terminate()
        server.wait(30)
    text = log.read_text()
    assert missing_dependency_text("nh3") in text, text
    # The old failure: jupyter_server's "failed to load" with the import's traceback.
    assert "No module named 'nh3'" not in text and "nh3.py" not in text, text
